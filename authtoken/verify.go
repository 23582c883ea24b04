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
// id, no platform key and no provider.
func SingleSecret(secret []byte) Keys { return singleSecret(secret) }

type singleSecret []byte

func (s singleSecret) AppKey(_ context.Context, _, kid string, _ time.Time) ([]byte, time.Time, bool) {
	return s, time.Time{}, kid == ""
}
func (singleSecret) PlatformKey(string) ([]byte, bool) { return nil, false }
func (singleSecret) Providers(string) []*Provider      { return nil }
func (singleSecret) Generation() uint64                { return 0 }

// Verifier checks tokens against Keys. It is safe for concurrent use.
type Verifier struct {
	keys Keys
	now  func() time.Time
	hs   *jwt.Parser // voiceroom's own keys: HS256
	pk   *jwt.Parser // identity providers: RS256, ES256
}

// NewVerifier returns a Verifier of tokens signed with keys, reading the
// time from now.
func NewVerifier(keys Keys, now func() time.Time) *Verifier {
	opts := func(methods ...string) []jwt.ParserOption {
		return []jwt.ParserOption{jwt.WithValidMethods(methods), jwt.WithExpirationRequired(),
			jwt.WithLeeway(Leeway), jwt.WithTimeFunc(now)}
	}
	return &Verifier{
		keys: keys,
		now:  now,
		hs:   jwt.NewParser(opts(jwt.SigningMethodHS256.Alg())...),
		pk:   jwt.NewParser(opts(jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg())...),
	}
}

// Keys returns the keys v checks with.
func (v *Verifier) Keys() Keys { return v.keys }

// maxKID bounds the kid a Verifier looks up at all: identity providers'
// ids are longer than voiceroom's own (KeyIDMax), never this long.
const maxKID = 256

// maxHeader bounds the encoded header a Verifier reads.
const maxHeader = 1024

// Verify checks raw (the token without "Bearer ") and returns what it
// says. ctx bounds a reload of keys. Errors wrap ErrExpired, ErrInvalid
// (with ErrNoKey when no usable key verifies it), ErrNoAppCode or
// ErrBadSubject.
func (v *Verifier) Verify(ctx context.Context, raw string) (Token, error) {
	alg, kid, err := peekHeader(raw)
	if err != nil {
		return Token{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(kid) > maxKID || !printable(kid) {
		return Token{}, fmt.Errorf("%w: %w: kid of %d bytes", ErrInvalid, ErrNoKey, len(kid))
	}
	switch alg {
	case jwt.SigningMethodHS256.Alg():
		return v.verifyOwn(ctx, raw, kid)
	case jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg():
		return v.verifyProvider(ctx, raw, kid)
	}
	return Token{}, fmt.Errorf("%w: algorithm %.16q", ErrInvalid, alg)
}

// verifyOwn checks a token signed with one of voiceroom's HS256 keys.
func (v *Verifier) verifyOwn(ctx context.Context, raw, kid string) (Token, error) {
	var c Claims
	t := Token{KeyID: kid}
	var keyUntil time.Time
	_, err := v.hs.ParseWithClaims(raw, &c, func(*jwt.Token) (any, error) {
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

// verifyProvider checks a user token of an app's identity provider.
func (v *Verifier) verifyProvider(ctx context.Context, raw, kid string) (Token, error) {
	if kid == "" {
		return Token{}, fmt.Errorf("%w: %w: no kid", ErrInvalid, ErrNoKey)
	}
	claims := jwt.MapClaims{}
	var p *Provider
	_, err := v.pk.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		iss, _ := claims.GetIssuer()
		for _, c := range v.keys.Providers(iss) {
			if app, _ := claims[c.appClaim()].(string); app == c.AppCode {
				p = c
				break
			}
		}
		if p == nil {
			return nil, ErrNoKey
		}
		key, err := p.Keyfunc(ctx)(t)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoKey, err)
		}
		return key, nil
	})
	if err != nil {
		return Token{}, refused(err)
	}
	aud, _ := claims.GetAudience()
	if !slices.Contains(aud, p.Audience) {
		return Token{}, fmt.Errorf("%w: audience", ErrInvalid)
	}
	sub, _ := claims.GetSubject()
	id, err := subject(sub, true)
	if err != nil {
		return Token{}, err
	}
	t := Token{AppCode: p.AppCode, UserID: id, KeyID: kid, Source: SourceJWKS}
	exp, _ := claims.GetExpirationTime()
	t.setTimes(exp, time.Time{})
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

// peekHeader reads a token's alg and kid before choosing how to verify
// it; a kid that is not a string is an error.
func peekHeader(raw string) (alg, kid string, err error) {
	enc, _, ok := strings.Cut(raw, ".")
	if !ok || len(enc) > maxHeader {
		return "", "", errors.New("malformed header")
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", "", errors.New("malformed header")
	}
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return "", "", errors.New("malformed header")
	}
	return h.Alg, h.Kid, nil
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
