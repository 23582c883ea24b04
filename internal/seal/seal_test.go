package seal_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"voiceroom/internal/seal"
)

func TestSealOpens(t *testing.T) {
	key, err := seal.ParseKey(strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	s, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal([]byte("app/a"), []byte("the secret"))
	if bytes.Contains(sealed, []byte("the secret")) {
		t.Fatal("the sealed value holds the secret in clear")
	}
	if got, err := s.Open([]byte("app/a"), sealed); err != nil || string(got) != "the secret" {
		t.Fatalf("open: %q %v", got, err)
	}
	other, _ := seal.New(bytes.Repeat([]byte{1}, seal.KeySize))
	for name, open := range map[string]func() ([]byte, error){
		"other additional data": func() ([]byte, error) { return s.Open([]byte("app/b"), sealed) },
		"other key":             func() ([]byte, error) { return other.Open([]byte("app/a"), sealed) },
		"truncated":             func() ([]byte, error) { return s.Open([]byte("app/a"), sealed[:10]) },
		"bad version":           func() ([]byte, error) { return s.Open([]byte("app/a"), append([]byte{9}, sealed[1:]...)) },
	} {
		if _, err := open(); !errors.Is(err, seal.ErrOpen) {
			t.Errorf("%s: %v, want ErrOpen", name, err)
		}
	}
}

func TestParseKey(t *testing.T) {
	raw := bytes.Repeat([]byte{7}, 32)
	for _, s := range []string{hex.EncodeToString(raw), "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", " " + hex.EncodeToString(raw) + "\n"} {
		if got, err := seal.ParseKey(s); err != nil || !bytes.Equal(got, raw) {
			t.Errorf("%q: %x %v", s, got, err)
		}
	}
	for _, s := range []string{"", "abcd", strings.Repeat("ab", 31)} {
		if _, err := seal.ParseKey(s); !errors.Is(err, seal.ErrKey) {
			t.Errorf("%q: %v, want ErrKey", s, err)
		}
	}
	if _, err := seal.New(make([]byte, 16)); !errors.Is(err, seal.ErrKey) {
		t.Errorf("16-byte key: %v", err)
	}
}
