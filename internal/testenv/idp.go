package testenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// IdentityProvider is an app's identity provider in a test: it signs
// RS256 or ES256 tokens with keys of its own and serves the public keys it
// publishes as a JWKS on loopback, or 503 while down. Safe for concurrent
// use.
type IdentityProvider struct {
	tb      testing.TB
	srv     *httptest.Server
	mu      sync.Mutex
	keys    map[string]crypto.Signer
	served  []string
	down    bool
	fetches int
}

// NewIdentityProvider starts one, closed when the test ends.
func NewIdentityProvider(tb testing.TB) *IdentityProvider {
	p := &IdentityProvider{tb: tb, keys: map[string]crypto.Signer{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	tb.Cleanup(p.srv.Close)
	return p
}

// URL is its JWKS's address.
func (p *IdentityProvider) URL() string { return p.srv.URL + "/jwks.json" }

func (p *IdentityProvider) serve(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fetches++
	if p.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	var set jwkset.JWKSMarshal
	for _, kid := range p.served {
		alg := jwkset.AlgRS256
		if _, ok := p.keys[kid].(*ecdsa.PrivateKey); ok {
			alg = jwkset.AlgES256
		}
		jwk, err := jwkset.NewJWKFromKey(p.keys[kid].Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: alg, USE: jwkset.UseSig}})
		if err != nil {
			p.tb.Error(err)
			return
		}
		set.Keys = append(set.Keys, jwk.Marshal())
	}
	json.NewEncoder(w).Encode(set)
}

// AddKey makes a key (RSA 2048, or P-256 with ec) and publishes it too.
func (p *IdentityProvider) AddKey(kid string, ec bool) {
	var k crypto.Signer
	var err error
	if ec {
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		p.tb.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys[kid] = k
	p.served = append(p.served, kid)
}

// Publish sets the kids its JWKS holds.
func (p *IdentityProvider) Publish(kids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.served = kids
}

// SetDown makes its JWKS answer 503 (true) or the keys again.
func (p *IdentityProvider) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// Fetches is how many times its JWKS was asked for.
func (p *IdentityProvider) Fetches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fetches
}

// Token signs claims as they are with kid's key, kid in the header.
func (p *IdentityProvider) Token(kid string, claims map[string]any) string {
	p.tb.Helper()
	p.mu.Lock()
	key := p.keys[kid]
	p.mu.Unlock()
	method := jwt.SigningMethod(jwt.SigningMethodRS256)
	if _, ok := key.(*ecdsa.PrivateKey); ok {
		method = jwt.SigningMethodES256
	}
	t := jwt.NewWithClaims(method, jwt.MapClaims(claims))
	t.Header["kid"] = kid
	s, err := t.SignedString(key)
	if err != nil {
		p.tb.Fatal(err)
	}
	return s
}
