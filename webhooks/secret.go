package webhooks

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"voiceroom/internal/seal"
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
const KeySize = seal.KeySize

// ParseKey reads the sealing key of VOICEROOM_WEBHOOKS_SECRET_KEY: 32
// bytes as 64 hex digits or as standard base64.
func ParseKey(s string) ([]byte, error) {
	b, err := seal.ParseKey(s)
	if err != nil {
		return nil, fmt.Errorf("%w: want %d bytes as hex or base64", ErrInvalidConfig, KeySize)
	}
	return b, nil
}

// Sealer encrypts signing secrets at rest (package seal): the secret is
// needed in clear to sign, so it cannot be hashed; sealed, a copy of the
// table (a backup, a replica, a dump) does not give it away without the
// key, which lives in the processes' configuration only. The app code is
// the additional data: a sealed secret moved to another app's row does
// not open.
type Sealer struct {
	s *seal.Sealer
}

// NewSealer returns a Sealer with key (KeySize bytes).
func NewSealer(key []byte) (*Sealer, error) {
	s, err := seal.New(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &Sealer{s: s}, nil
}

// seal returns the sealed secret for appCode.
func (s *Sealer) seal(appCode string, secret []byte) []byte {
	return s.s.Seal(aad(appCode), secret)
}

// open returns the secret seal sealed for appCode. Errors wrap
// ErrSealedSecret.
func (s *Sealer) open(appCode string, sealed []byte) ([]byte, error) {
	out, err := s.s.Open(aad(appCode), sealed)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSealedSecret, err)
	}
	return out, nil
}

func aad(appCode string) []byte { return []byte("voiceroom webhook secret/" + appCode) }
