package authtoken

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"voiceroom"
)

// RoleAdmin is the role claim of operators' tokens.
const RoleAdmin = "admin"

// Leeway is the clock skew a Verifier allows on exp and nbf.
const Leeway = 5 * time.Second

// Claims are the JWT claims of a voiceroom token: app_code, role, and the
// registered sub (a decimal user id; optional for admin tokens), iat and
// exp.
type Claims struct {
	AppCode string `json:"app_code"`
	Role    string `json:"role,omitempty"`
	jwt.RegisteredClaims
}

// Issue signs an HS256 token for userID of appCode with role, valid for
// ttl from now. userID 0 leaves sub out, which only an admin token may.
// It returns an error for an app code that breaks the app_code rule, a
// negative or missing user id, or a ttl that is not positive.
func Issue(secret []byte, appCode string, userID int64, role string, ttl time.Duration, now time.Time) (string, error) {
	if !voiceroom.ValidAppCode(appCode) {
		return "", fmt.Errorf("app code %q: want %s", appCode, voiceroom.AppCodeRule)
	}
	if userID < 0 || (userID == 0 && role != RoleAdmin) {
		return "", errors.New("user id must be a positive number")
	}
	if ttl <= 0 {
		return "", errors.New("ttl must be positive")
	}
	claims := Claims{AppCode: appCode, Role: role, RegisteredClaims: jwt.RegisteredClaims{
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	if userID > 0 {
		claims.Subject = strconv.FormatInt(userID, 10)
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// Token is what a verified token says.
type Token struct {
	AppCode string
	// UserID is the token's sub; 0 when it has none.
	UserID int64
	// Role is the role claim: RoleAdmin or empty.
	Role string
	// ExpiresAt is the token's exp.
	ExpiresAt time.Time
}

// Admin reports whether the token carries the admin role.
func (t Token) Admin() bool { return t.Role == RoleAdmin }

// Verifier checks tokens signed with one secret. It is safe for concurrent
// use.
type Verifier struct {
	secret []byte
	parser *jwt.Parser
}

// NewVerifier returns a Verifier of tokens signed with secret, reading the
// time from now.
func NewVerifier(secret []byte, now func() time.Time) *Verifier {
	return &Verifier{
		secret: secret,
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithExpirationRequired(),
			jwt.WithLeeway(Leeway),
			jwt.WithTimeFunc(now),
		),
	}
}

// Verify checks raw (the token without "Bearer ") and returns what it
// says. Errors wrap ErrExpired, ErrInvalid, ErrNoAppCode or ErrBadSubject.
func (v *Verifier) Verify(raw string) (Token, error) {
	var claims Claims
	_, err := v.parser.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return v.secret, nil })
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Token{}, ErrExpired
	case err != nil:
		return Token{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !voiceroom.ValidAppCode(claims.AppCode) {
		return Token{}, ErrNoAppCode
	}
	t := Token{AppCode: claims.AppCode, Role: claims.Role}
	if claims.ExpiresAt != nil { // required by the parser
		t.ExpiresAt = claims.ExpiresAt.Time
	}
	if claims.Subject != "" {
		id, err := strconv.ParseInt(claims.Subject, 10, 64)
		if err != nil || id <= 0 {
			return Token{}, ErrBadSubject
		}
		t.UserID = id
	}
	return t, nil
}
