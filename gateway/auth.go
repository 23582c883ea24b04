package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/authtoken"
	"voiceroom/promreg"
)

// Principal is who a request acts for. AppCode comes only from the token.
type Principal struct {
	// AppCode is the token's app; empty for a platform operator.
	AppCode string
	// UserID is the token's sub; 0 for an admin or platform token without
	// one.
	UserID int64
	Admin  bool
	// Platform marks a platform operator: no app, only /platform routes.
	Platform bool
	// source is what verified the token.
	source authtoken.Source
}

// Operator names the principal in audit rows: "admin:<sub>" or "admin",
// and "platform:<sub>" or "platform" for a platform operator.
func (p Principal) Operator() string {
	who := "admin"
	if p.Platform {
		who = "platform"
	}
	if p.UserID != 0 {
		return who + ":" + strconv.FormatInt(p.UserID, 10)
	}
	return who
}

const localPrincipal = "voiceroom.principal"

// PrincipalOf returns the authenticated principal of a request under /api,
// /admin or /platform.
func PrincipalOf(c *fiber.Ctx) Principal {
	p, _ := c.Locals(localPrincipal).(Principal)
	return p
}

// authenticator checks bearer tokens.
type authenticator struct {
	verifier *authtoken.Verifier
	keys     authtoken.Keys
	now      func() time.Time
	metrics  *authMetrics
	// verified skips the full check of a token accepted before, not
	// expired since, and accepted under the keys' current generation.
	verified verifiedTokens
}

func newAuthenticator(keys authtoken.Keys, now func() time.Time, m *authMetrics) *authenticator {
	return &authenticator{verifier: authtoken.NewVerifier(keys, now), keys: keys, now: now, metrics: m}
}

// principal parses and checks the Authorization header.
func (a *authenticator) principal(ctx context.Context, header string) (Principal, error) {
	raw, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || raw == "" {
		a.metrics.refused("missing")
		return Principal{}, apperr.New(apperr.Unauthenticated, "missing bearer token")
	}
	raw = strings.TrimSpace(raw)
	gen := a.keys.Generation()
	p, ok := a.verified.get(raw, gen, a.now())
	if !ok {
		t, err := a.verifier.Verify(ctx, raw)
		if err != nil {
			return Principal{}, a.refusal(err)
		}
		p = Principal{AppCode: t.AppCode, UserID: t.UserID, Admin: t.Admin(), Platform: t.Platform(), source: t.Source}
		a.verified.put(raw, p, gen, t.Until)
	}
	if p.source == authtoken.SourceSecret {
		a.metrics.legacy(p.AppCode)
	}
	return p, nil
}

// refusal is the answer to a token the verifier refused: UNAUTHENTICATED,
// saying why only as far as the client can act on it, and never which
// key check failed (unknown kid, another app's key, a retired key, a
// disabled app: all "invalid token").
func (a *authenticator) refusal(err error) error {
	switch {
	case errors.Is(err, authtoken.ErrExpired):
		a.metrics.refused("expired")
		return apperr.New(apperr.Unauthenticated, "token expired")
	case errors.Is(err, authtoken.ErrNoAppCode):
		a.metrics.refused("claims")
		return apperr.New(apperr.Unauthenticated, "token has no valid app_code")
	case errors.Is(err, authtoken.ErrBadSubject):
		a.metrics.refused("claims")
		return apperr.New(apperr.Unauthenticated, "token sub is not a user id")
	case errors.Is(err, authtoken.ErrNoKey):
		a.metrics.refused("no_key")
	default:
		a.metrics.refused("invalid")
	}
	return apperr.New(apperr.Unauthenticated, "invalid token")
}

// authenticate runs principal on the request and keeps the result.
func (a *authenticator) authenticate(c *fiber.Ctx) (Principal, error) {
	p, err := a.principal(c.UserContext(), c.Get(fiber.HeaderAuthorization))
	if err != nil {
		return Principal{}, err
	}
	c.Locals(localPrincipal, p)
	return p, nil
}

// requireUser authenticates app routes: an app's token with a sub.
func (a *authenticator) requireUser(c *fiber.Ctx) error {
	p, err := a.authenticate(c)
	if err != nil {
		return err
	}
	switch {
	case p.Platform:
		return apperr.New(apperr.Unauthenticated, "not an app's token")
	case p.UserID == 0:
		return apperr.New(apperr.Unauthenticated, "token has no sub")
	}
	return c.Next()
}

// requireAdmin authenticates admin routes: an app's token with role admin.
func (a *authenticator) requireAdmin(c *fiber.Ctx) error {
	p, err := a.authenticate(c)
	if err != nil {
		return err
	}
	switch {
	case p.Platform:
		return apperr.New(apperr.PermissionDenied, "an app's admin token required: platform operators act on apps under /platform")
	case !p.Admin:
		return apperr.New(apperr.PermissionDenied, "admin role required")
	}
	return c.Next()
}

// requirePlatform authenticates platform routes: a platform operator's
// token, which no app's key can sign.
func (a *authenticator) requirePlatform(c *fiber.Ctx) error {
	p, err := a.authenticate(c)
	if err != nil {
		return err
	}
	if !p.Platform {
		return apperr.New(apperr.PermissionDenied, "platform operator token required")
	}
	return c.Next()
}

// authMetrics count what authentication did.
type authMetrics struct {
	legacyRequests *prometheus.CounterVec
	refusals       *prometheus.CounterVec
}

// refusalReasons are the label values of voiceroom_auth_refused_total.
var refusalReasons = []string{"missing", "invalid", "no_key", "expired", "claims"}

func newAuthMetrics(reg prometheus.Registerer) (*authMetrics, error) {
	r := promreg.On(reg)
	s := r.Sub("auth")
	m := &authMetrics{
		legacyRequests: s.CounterVec("secret_requests_total",
			"Requests authenticated by the single secret VOICEROOM_JWT_SECRET (a token without kid), by app: "+
				"what still has to move to the app's own key before the upgrade window ends.",
			"app_code"),
		refusals: s.CounterVec("refused_total",
			"Bearer tokens refused, by reason: missing, invalid, no_key (unknown kid, another app's key, a retired key, "+
				"a disabled app), expired, claims (app_code or sub).",
			"reason"),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("auth metrics: %w", err)
	}
	for _, reason := range refusalReasons {
		m.refusals.WithLabelValues(reason)
	}
	return m, nil
}

func (m *authMetrics) refused(reason string) { m.refusals.WithLabelValues(reason).Inc() }

func (m *authMetrics) legacy(app string) { m.legacyRequests.WithLabelValues(app).Inc() }
