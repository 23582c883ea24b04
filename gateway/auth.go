package gateway

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"voiceroom/apperr"
	"voiceroom/authtoken"
)

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

// authenticator checks bearer tokens.
type authenticator struct {
	verifier *authtoken.Verifier
	now      func() time.Time
	// verified skips the full check of a token accepted before and not
	// expired since.
	verified verifiedTokens
}

func newAuthenticator(secret []byte, now func() time.Time) *authenticator {
	return &authenticator{verifier: authtoken.NewVerifier(secret, now), now: now}
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
	t, err := a.verifier.Verify(raw)
	if err != nil {
		return Principal{}, refusal(err)
	}
	p := Principal{AppCode: t.AppCode, UserID: t.UserID, Admin: t.Admin()}
	a.verified.put(raw, p, t.ExpiresAt.Add(authtoken.Leeway))
	return p, nil
}

// refusal is the answer to a token the verifier refused: UNAUTHENTICATED,
// saying why only as far as the client can act on it.
func refusal(err error) error {
	switch {
	case errors.Is(err, authtoken.ErrExpired):
		return apperr.New(apperr.Unauthenticated, "token expired")
	case errors.Is(err, authtoken.ErrNoAppCode):
		return apperr.New(apperr.Unauthenticated, "token has no valid app_code")
	case errors.Is(err, authtoken.ErrBadSubject):
		return apperr.New(apperr.Unauthenticated, "token sub is not a user id")
	}
	return apperr.New(apperr.Unauthenticated, "invalid token")
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
