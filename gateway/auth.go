package gateway

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"

	"voiceroom"
	"voiceroom/apperr"
)

// RoleAdmin is the role claim of operators' tokens.
const RoleAdmin = "admin"

// Claims are the JWT claims voiceroom reads (docs/openapi.yaml, security
// scheme bearer): app_code, sub (a decimal
// user id; optional for admin tokens), exp, and role.
type Claims struct {
	AppCode string `json:"app_code"`
	Role    string `json:"role,omitempty"`
	jwt.RegisteredClaims
}

// Principal is who a request acts for. AppCode comes only from the token.
type Principal struct {
	AppCode string
	// UserID is the token's sub; 0 for an admin token without one.
	UserID int64
	Admin  bool
}

// Operator names the principal in audit rows: "admin:<sub>" or "admin".
func (p Principal) Operator() string {
	if p.UserID != 0 {
		return "admin:" + strconv.FormatInt(p.UserID, 10)
	}
	return "admin"
}

const localPrincipal = "voiceroom.principal"

// PrincipalOf returns the authenticated principal of a request under /api or
// /admin.
func PrincipalOf(c *fiber.Ctx) Principal {
	p, _ := c.Locals(localPrincipal).(Principal)
	return p
}

// IssueToken signs an HS256 token. userID 0 leaves sub out (admin only).
func IssueToken(secret []byte, appCode string, userID int64, role string, ttl time.Duration, now time.Time) (string, error) {
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

// authenticator checks bearer tokens.
type authenticator struct {
	secret []byte
	parser *jwt.Parser
	now    func() time.Time
	// verified skips the full check of a token accepted before and not
	// expired since.
	verified verifiedTokens
}

// tokenLeeway is the clock skew the parser allows on exp and nbf.
const tokenLeeway = 5 * time.Second

func newAuthenticator(secret []byte, now func() time.Time) *authenticator {
	return &authenticator{
		secret: secret,
		now:    now,
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithExpirationRequired(),
			jwt.WithLeeway(tokenLeeway),
			jwt.WithTimeFunc(now),
		),
	}
}

// principal parses and checks the Authorization header.
func (a *authenticator) principal(header string) (Principal, error) {
	raw, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || raw == "" {
		return Principal{}, apperr.New(apperr.Unauthenticated, "missing bearer token")
	}
	raw = strings.TrimSpace(raw)
	if p, ok := a.verified.get(raw, a.now()); ok {
		return p, nil
	}
	var claims Claims
	_, err := a.parser.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return a.secret, nil })
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Principal{}, apperr.New(apperr.Unauthenticated, "token expired")
	case err != nil:
		return Principal{}, apperr.New(apperr.Unauthenticated, "invalid token")
	}
	if !voiceroom.ValidAppCode(claims.AppCode) {
		return Principal{}, apperr.New(apperr.Unauthenticated, "token has no valid app_code")
	}
	p := Principal{AppCode: claims.AppCode, Admin: claims.Role == RoleAdmin}
	if claims.Subject != "" {
		id, err := strconv.ParseInt(claims.Subject, 10, 64)
		if err != nil || id <= 0 {
			return Principal{}, apperr.New(apperr.Unauthenticated, "token sub is not a user id")
		}
		p.UserID = id
	}
	if claims.ExpiresAt != nil { // required by the parser
		a.verified.put(raw, p, claims.ExpiresAt.Add(tokenLeeway))
	}
	return p, nil
}

// requireUser authenticates app routes: a token with app_code and sub.
func (a *authenticator) requireUser(c *fiber.Ctx) error {
	p, err := a.principal(c.Get(fiber.HeaderAuthorization))
	if err != nil {
		return err
	}
	if p.UserID == 0 {
		return apperr.New(apperr.Unauthenticated, "token has no sub")
	}
	c.Locals(localPrincipal, p)
	return c.Next()
}

// requireAdmin authenticates admin routes: a valid token with role admin.
func (a *authenticator) requireAdmin(c *fiber.Ctx) error {
	p, err := a.principal(c.Get(fiber.HeaderAuthorization))
	if err != nil {
		return err
	}
	if !p.Admin {
		return apperr.New(apperr.PermissionDenied, "admin role required")
	}
	c.Locals(localPrincipal, p)
	return c.Next()
}
