package webhooks

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// SecretPrefix starts every signing secret, as Standard Webhooks writes
// them: whsec_ and the base64 of the HMAC key.
const SecretPrefix = "whsec_"

// secretBytes is the length of a signing key (Standard Webhooks: 24 to 64).
const secretBytes = 32

// newSecret returns a fresh signing key.
func newSecret() []byte {
	b := make([]byte, secretBytes)
	rand.Read(b)
	return b
}

// formatSecret is the key as the admin is shown it, once.
func formatSecret(key []byte) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// KeySize is the length of the key that seals signing secrets at rest.
const KeySize = 32

// ParseKey reads the sealing key of VOICEROOM_WEBHOOKS_SECRET_KEY: 32
// bytes as 64 hex digits or as standard base64.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if b, err := hex.DecodeString(s); err == nil && len(b) == KeySize {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == KeySize {
		return b, nil
	}
	return nil, fmt.Errorf("%w: want %d bytes as hex or base64", ErrInvalidConfig, KeySize)
}

// Sealer encrypts signing secrets at rest with AES-256-GCM. The secret is
// needed in clear to sign, so it cannot be hashed; sealed, a copy of the
// table (a backup, a replica, a dump) does not give it away without the
// key, which lives in the processes' configuration only. The app code is
// the additional data: a sealed secret moved to another app's row does
// not open.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer returns a Sealer with key (KeySize bytes).
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("%w: sealing key of %d bytes, want %d", ErrInvalidConfig, len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &Sealer{aead: aead}, nil
}

// sealVersion is the first byte of a sealed secret.
const sealVersion = 1

// seal returns version, nonce and ciphertext of secret for appCode.
func (s *Sealer) seal(appCode string, secret []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize(), 1+s.aead.NonceSize()+len(secret)+s.aead.Overhead())
	rand.Read(nonce)
	out := append([]byte{sealVersion}, nonce...)
	return s.aead.Seal(out, nonce, secret, aad(appCode))
}

// open returns the secret seal sealed for appCode. Errors wrap
// ErrSealedSecret.
func (s *Sealer) open(appCode string, sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n+s.aead.Overhead() || sealed[0] != sealVersion {
		return nil, fmt.Errorf("%w: malformed", ErrSealedSecret)
	}
	out, err := s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], aad(appCode))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSealedSecret, err)
	}
	return out, nil
}

func aad(appCode string) []byte { return []byte("voiceroom webhook secret/" + appCode) }
