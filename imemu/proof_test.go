package imemu_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"voiceroom/imbridge"
	"voiceroom/imemu"
	"voiceroom/internal/testenv"
)

// newTestProvingEmulator serves an emulator holding proof key key (none
// when empty) and returns its base URL.
func newTestProvingEmulator(tb testing.TB, key string) string {
	tb.Helper()
	emu, err := imemu.New(imemu.Config{ProofKey: []byte(key),
		Apps: []imbridge.Application{{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: testKey}}})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(emu)
	tb.Cleanup(srv.Close)
	return srv.URL
}

// TestVerify: only an emulator holding the key passes; whatever else
// answers on the address (an emulator with another key or none, a server
// echoing a fixed answer, one redirecting to the real emulator) fails with
// ErrNotProved, and nothing that fails to answer passes.
func TestVerify(t *testing.T) {
	const key = "0123456789abcdef-this-run"
	ctx := context.Background()
	good := newTestProvingEmulator(t, key)

	if err := imemu.Verify(ctx, nil, good, []byte(key)); err != nil {
		t.Fatalf("the emulator holding the key: %v", err)
	}
	if err := imemu.Verify(ctx, nil, good+"/", []byte(key)); err != nil {
		t.Fatalf("a base URL with a trailing slash: %v", err)
	}

	// A stranger that learnt one answer replays it to every nonce.
	var seen sync.Map
	replay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.URL.RequestURI(), true)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"mac":"` + imemu.ProofMAC([]byte(key), "a-nonce-seen-once") + `"}`))
	}))
	t.Cleanup(replay.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, good+r.URL.RequestURI(), http.StatusFound)
	}))
	t.Cleanup(redirect.Close)
	notJSON := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hello"))
	}))
	t.Cleanup(notJSON.Close)

	for _, tc := range []struct{ name, url, key string }{
		{"an emulator with another key", newTestProvingEmulator(t, "another-key-0123456789"), key},
		{"an emulator with no key", newTestProvingEmulator(t, ""), key},
		{"a replayed answer", replay.URL, key},
		{"a redirect to the emulator", redirect.URL, key},
		{"a server that is no emulator", notJSON.URL, key},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := imemu.Verify(ctx, nil, tc.url, []byte(tc.key))
			if !errors.Is(err, imemu.ErrNotProved) {
				t.Fatalf("Verify: %v, want ErrNotProved", err)
			}
		})
	}
	seen.Range(func(k, _ any) bool {
		if !strings.HasPrefix(k.(string), "/_emu/proof?nonce=") {
			t.Errorf("the check asked %s of a stranger", k)
		}
		return true
	})

	t.Run("nothing listening", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		if err := imemu.Verify(ctx, nil, url, []byte(key)); err == nil || errors.Is(err, imemu.ErrNotProved) {
			t.Fatalf("Verify: %v, want a connection error", err)
		}
	})
	t.Run("a short key", func(t *testing.T) {
		if err := imemu.Verify(ctx, nil, good, []byte("short")); err == nil {
			t.Fatal("a 5-byte key was accepted")
		}
	})
	t.Run("a bad URL", func(t *testing.T) {
		if err := imemu.Verify(ctx, nil, "ftp://x", []byte(key)); err == nil {
			t.Fatal("ftp:// was accepted")
		}
	})
}

// TestProofRoute: the route answers the nonce's MAC, refuses a missing or
// long nonce, and answers 404 on an emulator given no key (a short key is
// refused by TestConfigValidate).
func TestProofRoute(t *testing.T) {
	const key = "0123456789abcdef-route"
	url := newTestProvingEmulator(t, key)
	for _, tc := range []struct {
		query string
		code  int
		body  string
	}{
		{"?nonce=abc", 200, `"mac":"` + imemu.ProofMAC([]byte(key), "abc") + `"`},
		{"", 400, "nonce"},
		{"?nonce=" + strings.Repeat("a", 129), 400, "nonce"},
	} {
		code, _, body := testenv.Fetch(t, http.MethodGet, url+"/_emu/proof"+tc.query)
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("GET /_emu/proof%.20s: %d %s, want %d with %s", tc.query, code, body, tc.code, tc.body)
		}
	}
	if code, _, body := testenv.Fetch(t, http.MethodGet, newTestProvingEmulator(t, "")+"/_emu/proof?nonce=abc"); code != 404 {
		t.Errorf("an emulator with no key: %d %s, want 404", code, body)
	}
}
