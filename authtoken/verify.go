package authtoken

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"voiceroom"
)

// Keys are the keys a Verifier checks tokens with: the server's are
// package apps' Registry, development's SingleSecret. Implementations are
// safe for concurrent use.
type Keys interface {
	// AppKey returns the HS256 secret that verifies a token of app naming
	// kid ("" for a token without one: the single secret, where it is
	// accepted for app), and when it stops verifying (zero: no end). ok is
	// false when there is no usable key: an unknown kid, a key of another
	// app, a key past its grace period, a disabled app. It may reload its
	// keys first, within ctx, when it does not know kid.
	AppKey(ctx context.Context, app, kid string, now time.Time) (secret []byte, until time.Time, ok bool)
	// PlatformKey returns the secret of the platform operators' key kid.
	PlatformKey(kid string) ([]byte, bool)
	// Providers returns the identity providers of active apps whose tokens
	// carry the issuer iss.
	Providers(iss string) []*Provider
	// Generation changes whenever a verdict given before may have changed
	// (a key added, retired or revoked, an app disabled, a provider
	// changed): whoever caches verdicts starts over.
	Generation() uint64
}

// Provider is an app's identity provider: RS256 and ES256 user tokens
// from Issuer, for Audience, whose AppClaim claim names AppCode, signed
// with a key of the provider's key set (a JWKS URL).
type Provider struct {
	AppCode  string
	Issuer   string
	Audience string
	// AppClaim is the claim that names the app; "" means "app_code".
	AppClaim string
	// Keyfunc returns the function that finds the public key of a
	// token's kid (package keyfunc's KeyfuncCtx), for a request's ctx.
	Keyfunc func(ctx context.Context) jwt.Keyfunc
}

// DefaultAppClaim is the claim that names the app when a Provider names
// none.
const DefaultAppClaim = "app_code"

func (p *Provider) appClaim() string {
	if p.AppClaim == "" {
		return DefaultAppClaim
	}
	return p.AppClaim
}

// SingleSecret returns the Keys of one secret that verifies every app's
// tokens without a kid: development's mode, and tests'. It knows no key
// id, no platform key and no provider. SingleSecret(nil) verifies
// nothing.
func SingleSecret(secret []byte) Keys { return singleSecret(secret) }

type singleSecret []byte

func (s singleSecret) AppKey(_ context.Context, _, kid string, _ time.Time) ([]byte, time.Time, bool) {
	return s, time.Time{}, kid == "" && len(s) > 0
}
func (singleSecret) PlatformKey(string) ([]byte, bool) { return nil, false }
func (singleSecret) Providers(string) []*Provider      { return nil }
func (singleSecret) Generation() uint64                { return 0 }

// Verifier checks tokens against Keys. It is safe for concurrent use.
type Verifier struct {
	keys   Keys
	now    func() time.Time
	parser *jwt.Parser
}

// NewVerifier returns a Verifier of tokens signed with keys, reading the
// time from now.
func NewVerifier(keys Keys, now func() time.Time) *Verifier {
	return &Verifier{
		keys: keys,
		now:  now,
		parser: jwt.NewParser(
			// HS256 for voiceroom's own keys, RS256 and ES256 for identity
			// providers: the key function gives each only its own kind
			// of key, and the method checks the key's type.
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg(), jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg()}),
			jwt.WithExpirationRequired(),
			jwt.WithLeeway(Leeway),
			jwt.WithTimeFunc(now)),
	}
}

// Keys returns the keys v checks with.
func (v *Verifier) Keys() Keys { return v.keys }

// maxKID bounds the kid a Verifier looks up at all: identity providers'
// ids are longer than voiceroom's own (KeyIDMax), never this long.
const maxKID = 256

// Verify checks raw (the token without "Bearer ") and returns what it
// says. ctx bounds a reload of keys. Errors wrap ErrExpired, ErrInvalid
// (with ErrNoKey when no usable key verifies it), ErrNoAppCode or
// ErrBadSubject.
func (v *Verifier) Verify(ctx context.Context, raw string) (Token, error) {
	var c Claims
	t := Token{}
	var keyUntil time.Time
	var p *Provider
	_, err := v.parser.ParseWithClaims(raw, &c, func(jt *jwt.Token) (any, error) {
		kid, ok := jt.Header["kid"].(string)
		if _, present := jt.Header["kid"]; (present && !ok) || len(kid) > maxKID || !printable(kid) {
			return nil, ErrNoKey
		}
		t.KeyID = kid
		if jt.Method.Alg() != jwt.SigningMethodHS256.Alg() {
			var err error
			p, err = v.provider(raw, &c)
			if err != nil {
				return nil, err
			}
			key, err := p.Keyfunc(ctx)(jt)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrNoKey, err)
			}
			t.Source = SourceJWKS
			return key, nil
		}
		if c.Role == RolePlatform {
			s, ok := v.keys.PlatformKey(kid)
			if !ok || kid == "" {
				return nil, ErrNoKey
			}
			t.Source = SourcePlatform
			return s, nil
		}
		if kid != "" && !voiceroom.ValidAppCode(c.AppCode) {
			return nil, ErrNoKey
		}
		s, until, ok := v.keys.AppKey(ctx, c.AppCode, kid, v.now())
		if !ok {
			return nil, ErrNoKey
		}
		t.Source, keyUntil = SourceKey, until
		if kid == "" {
			t.Source = SourceSecret
		}
		return s, nil
	})
	if err != nil {
		return Token{}, refused(err)
	}
	switch {
	case t.Source == SourceJWKS:
		return v.providerToken(t, p, &c)
	case t.Source == SourcePlatform && c.AppCode != "":
		return Token{}, fmt.Errorf("%w: a platform token names an app", ErrInvalid)
	case t.Source != SourcePlatform && !voiceroom.ValidAppCode(c.AppCode):
		return Token{}, ErrNoAppCode
	}
	t.AppCode, t.Role = c.AppCode, c.Role
	if t.UserID, err = subject(c.Subject, false); err != nil {
		return Token{}, err
	}
	t.setTimes(c.ExpiresAt, keyUntil)
	return t, nil
}

// provider picks the identity provider of a token signed with a public
// key: one of those of its iss whose app claim names the provider's app.
// The claim's name is the provider's, so the claims are read again, as a
// map, for these tokens only.
func (v *Verifier) provider(raw string, c *Claims) (*Provider, error) {
	if c.Issuer == "" {
		return nil, ErrNoKey
	}
	provs := v.keys.Providers(c.Issuer)
	if len(provs) == 0 {
		return nil, ErrNoKey
	}
	parts := strings.Split(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, ErrNoKey
	}
	var all map[string]any
	if json.Unmarshal(b, &all) != nil {
		return nil, ErrNoKey
	}
	for _, p := range provs {
		if app, _ := all[p.appClaim()].(string); app == p.AppCode {
			return p, nil
		}
	}
	return nil, ErrNoKey
}

// providerToken is what an identity provider's verified token says: a
// user of the provider's app, if the token's kid was there and its aud
// holds the provider's audience.
func (v *Verifier) providerToken(t Token, p *Provider, c *Claims) (Token, error) {
	switch {
	case t.KeyID == "":
		return Token{}, fmt.Errorf("%w: %w: no kid", ErrInvalid, ErrNoKey)
	case !slices.Contains(c.Audience, p.Audience):
		return Token{}, fmt.Errorf("%w: audience", ErrInvalid)
	}
	id, err := subject(c.Subject, true)
	if err != nil {
		return Token{}, err
	}
	t.AppCode, t.UserID = p.AppCode, id
	t.setTimes(c.ExpiresAt, time.Time{})
	return t, nil
}

// refused sorts a parser's error: expired (only once the signature and
// the key are good), no usable key, or invalid.
func refused(err error) error {
	switch {
	case errors.Is(err, ErrNoKey):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case errors.Is(err, jwt.ErrTokenExpired):
		return ErrExpired
	}
	return fmt.Errorf("%w: %w", ErrInvalid, err)
}

// subject reads sub: a positive decimal user id, or absent (0) unless
// required.
func subject(sub string, required bool) (int64, error) {
	if sub == "" && !required {
		return 0, nil
	}
	id, err := strconv.ParseInt(sub, 10, 64)
	if err != nil || id <= 0 {
		return 0, ErrBadSubject
	}
	return id, nil
}

// setTimes sets ExpiresAt and Until from exp (required by the parsers) and
// the key's end.
func (t *Token) setTimes(exp *jwt.NumericDate, keyUntil time.Time) {
	if exp != nil {
		t.ExpiresAt = exp.Time
	}
	t.Until = t.ExpiresAt.Add(Leeway)
	if !keyUntil.IsZero() && keyUntil.Before(t.Until) {
		t.Until = keyUntil
	}
}

// printable reports whether s holds only printable ASCII without spaces.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
