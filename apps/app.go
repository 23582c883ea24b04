package apps

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/authtoken"
)

// An app's status.
const (
	StatusActive   = "active"
	StatusDisabled = "disabled"
)

// A key's status, computed from its retire time.
const (
	KeyActive   = "active"   // the app's current key: no end
	KeyRetiring = "retiring" // rotated out, verifying until retire_at_ms
	KeyRetired  = "retired"  // no longer verifies
)

// Where a key comes from.
const (
	SourceStored = "stored" // created by `voiceroom apps` or the platform routes
	SourceConfig = "config" // VOICEROOM_APP_KEYS
)

// App is what platform operators see of an app: never a secret.
type App struct {
	AppCode string `json:"app_code"`
	Status  string `json:"status"`
	// Keys are its HS256 signing keys, newest first.
	Keys []KeyInfo `json:"keys"`
	// JWKS is its identity provider; nil when it has none.
	JWKS *JWKS `json:"jwks"`
	// Registered says where the app is known: "stored" (a row), "config"
	// (only VOICEROOM_APP_KEYS names it).
	Registered  string `json:"registered"`
	CreatedBy   string `json:"created_by"`
	CreatedAtMs int64  `json:"created_at_ms"`
	UpdatedBy   string `json:"updated_by"`
	UpdatedAtMs int64  `json:"updated_at_ms"`
}

// KeyInfo describes a signing key without its secret.
type KeyInfo struct {
	KeyID       string `json:"key_id"`
	Status      string `json:"status"`
	Source      string `json:"source"`
	CreatedBy   string `json:"created_by"`
	CreatedAtMs int64  `json:"created_at_ms"`
	// RetireAtMs is when the key stops verifying; 0: no end.
	RetireAtMs int64 `json:"retire_at_ms"`
}

// JWKS is an app's identity provider: RS256/ES256 user tokens from Issuer
// for Audience, whose AppClaim claim names the app, verified with the key
// set at URL.
type JWKS struct {
	URL      string `json:"url"`
	Issuer   string `json:"issuer"`
	Audience string `json:"audience"`
	// AppClaim is the claim that names the app; "" means app_code.
	AppClaim string `json:"app_claim"`
}

// NewKey is a key's id and secret, answered once, when it is made.
type NewKey struct {
	KeyID  string `json:"key_id"`
	Secret string `json:"secret"`
}

// WithNewKey is an app with the key just made for it.
type WithNewKey struct {
	App
	NewKey NewKey `json:"new_key"`
}

// Limits of the values an operator sets.
const (
	// MaxGrace bounds a rotated-out key's grace period.
	MaxGrace    = 30 * 24 * time.Hour
	maxURL      = 2048
	maxIssuer   = 512
	maxAudience = 512
	maxClaim    = 256
	// retiredKept is how long a retired key stays listed.
	retiredKept = 30 * 24 * time.Hour
)

// StaticKey is an HS256 key from configuration: an app's
// (VOICEROOM_APP_KEYS) or the platform operators' (VOICEROOM_PLATFORM_KEYS,
// AppCode empty).
type StaticKey struct {
	AppCode string
	Key     authtoken.Key
}

// ParseAppKeys reads VOICEROOM_APP_KEYS: "app_code:key_id:secret" entries
// separated by commas (a secret holds no comma); at most two keys per app
// (the current one and the one it replaces), each id once per app, each
// secret at least authtoken.MinSecret bytes. The last key listed for an
// app is the one `voiceroom token` signs with.
func ParseAppKeys(s string) ([]StaticKey, error) {
	var out []StaticKey
	seen := map[string]int{}
	for i, entry := range splitList(s) {
		parts := strings.SplitN(entry, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("entry %d: want app_code:key_id:secret", i+1)
		}
		app, kid, secret := parts[0], parts[1], parts[2]
		if !voiceroom.ValidAppCode(app) {
			return nil, fmt.Errorf("entry %d: app code %q: want %s", i+1, app, voiceroom.AppCodeRule)
		}
		if err := checkStatic(i, kid, secret); err != nil {
			return nil, err
		}
		if seen[app+"\x00"+kid] > 0 {
			return nil, fmt.Errorf("entry %d: app %s lists key %s twice", i+1, app, kid)
		}
		seen[app+"\x00"+kid]++
		if seen[app]++; seen[app] > 2 {
			return nil, fmt.Errorf("entry %d: app %s has more than two keys (the current one and the one it replaces)", i+1, app)
		}
		out = append(out, StaticKey{AppCode: app, Key: authtoken.Key{ID: kid, Secret: []byte(secret)}})
	}
	return out, nil
}

// ParsePlatformKeys reads VOICEROOM_PLATFORM_KEYS: "key_id:secret"
// entries separated by commas, at most two (the current one and the one
// it replaces). The last one is the one `voiceroom token --platform`
// signs with.
func ParsePlatformKeys(s string) ([]StaticKey, error) {
	var out []StaticKey
	seen := map[string]bool{}
	for i, entry := range splitList(s) {
		kid, secret, ok := strings.Cut(entry, ":")
		if !ok {
			return nil, fmt.Errorf("entry %d: want key_id:secret", i+1)
		}
		if err := checkStatic(i, kid, secret); err != nil {
			return nil, err
		}
		if seen[kid] {
			return nil, fmt.Errorf("entry %d: key %s listed twice", i+1, kid)
		}
		seen[kid] = true
		out = append(out, StaticKey{Key: authtoken.Key{ID: kid, Secret: []byte(secret)}})
	}
	if len(out) > 2 {
		return nil, fmt.Errorf("%d keys: at most two (the current one and the one it replaces)", len(out))
	}
	return out, nil
}

func checkStatic(i int, kid, secret string) error {
	if !authtoken.ValidKeyID(kid) {
		return fmt.Errorf("entry %d: key id %q: want %s", i+1, kid, authtoken.KeyIDRule)
	}
	if len(secret) < authtoken.MinSecret {
		return fmt.Errorf("entry %d: key %s: the secret must be at least %d bytes", i+1, kid, authtoken.MinSecret)
	}
	return nil
}

// splitList splits a comma-separated list, trimming spaces and dropping
// empty entries.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// newKey makes a key for app: its id is the app code and 8 random hex
// digits, its secret 32 random bytes in hex (the HMAC key is that text,
// as an app's backend passes it to its JWT library).
func newKey(app string) NewKey {
	b := make([]byte, 36)
	rand.Read(b)
	return NewKey{KeyID: app + "-" + hex.EncodeToString(b[:4]), Secret: hex.EncodeToString(b[4:])}
}

// checkApp checks an app code from a request.
func checkApp(app string) error {
	if !voiceroom.ValidAppCode(app) {
		return apperr.Invalid("app_code", "want %s", voiceroom.AppCodeRule)
	}
	return nil
}

// checkJWKS checks an identity provider an operator sets; allowHTTP lets
// the key set's URL be http:// (development).
func checkJWKS(j JWKS, allowHTTP bool) error {
	u, err := url.Parse(j.URL)
	switch {
	case j.URL == "" || len(j.URL) > maxURL || err != nil || u.Host == "" || u.User != nil || u.Fragment != "":
		return apperr.Invalid("url", "want https://host[:port]/path of at most %d characters, no user or fragment", maxURL)
	case u.Scheme != "https" && !(u.Scheme == "http" && allowHTTP):
		return apperr.Invalid("url", "must be https (http only where VOICEROOM_AUTH_JWKS_ALLOW_HTTP allows it)")
	case j.Issuer == "" || len(j.Issuer) > maxIssuer || !printable(j.Issuer):
		return apperr.Invalid("issuer", "want 1..%d printable characters, the tokens' iss", maxIssuer)
	case j.Audience == "" || len(j.Audience) > maxAudience || !printable(j.Audience):
		return apperr.Invalid("audience", "want 1..%d printable characters, a value of the tokens' aud", maxAudience)
	case len(j.AppClaim) > maxClaim || !printable(j.AppClaim):
		return apperr.Invalid("app_claim", "want at most %d printable characters (empty: app_code)", maxClaim)
	}
	return nil
}

// printable reports whether s holds only printable ASCII without spaces.
func printable(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r > '~' }) < 0
}
