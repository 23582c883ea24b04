// Package seal encrypts the secrets voiceroom must keep in clear to use
// (webhook signing secrets, apps' token signing keys) before they are
// stored, with AES-256-GCM under a key that lives only in the processes'
// configuration: a copy of the table (a backup, a replica, a dump) does
// not give them away. Each sealed value is bound to additional data its
// caller chooses (the app code, the key id): a sealed value copied to
// another row does not open.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the length of a sealing key.
const KeySize = 32

// ErrKey reports a sealing key that is not KeySize bytes.
var ErrKey = errors.New("sealing key: want 32 bytes as hex or base64")

// ErrOpen reports a sealed value that does not open: malformed, sealed with
// another key, or for other additional data.
var ErrOpen = errors.New("sealed value does not open")

// ParseKey reads a sealing key: KeySize bytes as 64 hex digits or as
// standard base64. Errors wrap ErrKey.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if b, err := hex.DecodeString(s); err == nil && len(b) == KeySize {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == KeySize {
		return b, nil
	}
	return nil, ErrKey
}

// Sealer seals and opens values with one key. It is safe for concurrent
// use.
type Sealer struct {
	aead cipher.AEAD
}

// New returns a Sealer with key (KeySize bytes); errors wrap ErrKey.
func New(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("%w: got %d bytes", ErrKey, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	return &Sealer{aead: aead}, nil
}

// version is the first byte of a sealed value.
const version = 1

// Seal returns version, nonce and ciphertext of secret, bound to ad.
func (s *Sealer) Seal(ad, secret []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize(), 1+s.aead.NonceSize()+len(secret)+s.aead.Overhead())
	rand.Read(nonce)
	out := append([]byte{version}, nonce...)
	return s.aead.Seal(out, nonce, secret, ad)
}

// Open returns the secret Seal sealed with ad. Errors wrap ErrOpen.
func (s *Sealer) Open(ad, sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n+s.aead.Overhead() || sealed[0] != version {
		return nil, fmt.Errorf("%w: malformed", ErrOpen)
	}
	out, err := s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], ad)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOpen, err)
	}
	return out, nil
}
