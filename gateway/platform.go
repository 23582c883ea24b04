package gateway

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"

	"voiceroom/apperr"
	"voiceroom/apps"
	"voiceroom/authtoken"
)

// Apps are the registered apps and their keys; *apps.Store is one.
type Apps interface {
	Create(ctx context.Context, app, operator string) (apps.WithNewKey, error)
	List(ctx context.Context) ([]apps.App, error)
	Get(ctx context.Context, app string) (apps.App, error)
	SetStatus(ctx context.Context, app, status, operator string) (apps.App, error)
	Rotate(ctx context.Context, app string, grace *time.Duration, operator string) (apps.WithNewKey, error)
	Revoke(ctx context.Context, app, kid, operator string) (apps.App, error)
	SetJWKS(ctx context.Context, app string, j apps.JWKS, operator string) (apps.App, error)
	RemoveJWKS(ctx context.Context, app, operator string) (apps.App, error)
}

var _ Apps = (*apps.Store)(nil)

// PlatformRoutes mounts the platform operators' routes, which no app's
// token reaches:
//
//   - POST /platform/v1/apps {app_code} registers an app with a first key,
//     whose secret is answered this once;
//   - GET /platform/v1/apps lists the apps, GET .../{app_code} one (never a
//     secret);
//   - PATCH .../{app_code} {status} disables or enables one;
//   - POST .../{app_code}/keys/rotate {grace_seconds?} answers a new key,
//     the others verifying on for the grace period;
//   - DELETE .../{app_code}/keys/{key_id} revokes a key now;
//   - PUT .../{app_code}/jwks {url, issuer, audience, app_claim?} sets the
//     app's identity provider, DELETE .../{app_code}/jwks removes it.
func PlatformRoutes(a Apps) Mount {
	h := platformHandlers{a: a}
	return func(r Routers) {
		r.Platform.Post("/v1/apps", h.create)
		r.Platform.Get("/v1/apps", h.list)
		r.Platform.Get("/v1/apps/:app_code", h.get)
		r.Platform.Patch("/v1/apps/:app_code", h.update)
		r.Platform.Post("/v1/apps/:app_code/keys/rotate", h.rotate)
		r.Platform.Delete("/v1/apps/:app_code/keys/:key_id", h.revoke)
		r.Platform.Put("/v1/apps/:app_code/jwks", h.setJWKS)
		r.Platform.Delete("/v1/apps/:app_code/jwks", h.removeJWKS)
	}
}

type platformHandlers struct {
	a Apps
}

func (h platformHandlers) create(c *fiber.Ctx) error {
	var req struct {
		AppCode string `json:"app_code"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	if req.AppCode == "" {
		return apperr.Invalid("app_code", "is required")
	}
	out, err := h.a.Create(c.UserContext(), req.AppCode, PrincipalOf(c).Operator())
	if err != nil {
		return err
	}
	return OK(c, out)
}

func (h platformHandlers) list(c *fiber.Ctx) error {
	list, err := h.a.List(c.UserContext())
	if err != nil {
		return err
	}
	return OK(c, fiber.Map{"apps": list})
}

func (h platformHandlers) get(c *fiber.Ctx) error {
	return answerApp(c)(h.a.Get(c.UserContext(), c.Params("app_code")))
}

func (h platformHandlers) update(c *fiber.Ctx) error {
	var req struct {
		Status string `json:"status"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	return answerApp(c)(h.a.SetStatus(c.UserContext(), c.Params("app_code"), req.Status, PrincipalOf(c).Operator()))
}

// maxGraceSeconds is apps.MaxGrace in the request's unit.
const maxGraceSeconds = int64(apps.MaxGrace / time.Second)

func (h platformHandlers) rotate(c *fiber.Ctx) error {
	var req struct {
		GraceSeconds *int64 `json:"grace_seconds"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	var grace *time.Duration
	if req.GraceSeconds != nil {
		if *req.GraceSeconds < 0 || *req.GraceSeconds > maxGraceSeconds {
			return apperr.Invalid("grace_seconds", "want 0..%d", maxGraceSeconds)
		}
		g := time.Duration(*req.GraceSeconds) * time.Second
		grace = &g
	}
	out, err := h.a.Rotate(c.UserContext(), c.Params("app_code"), grace, PrincipalOf(c).Operator())
	if err != nil {
		return err
	}
	return OK(c, out)
}

func (h platformHandlers) revoke(c *fiber.Ctx) error {
	kid := c.Params("key_id")
	if !authtoken.ValidKeyID(kid) {
		return apperr.Invalid("key_id", "want %s", authtoken.KeyIDRule)
	}
	return answerApp(c)(h.a.Revoke(c.UserContext(), c.Params("app_code"), kid, PrincipalOf(c).Operator()))
}

func (h platformHandlers) setJWKS(c *fiber.Ctx) error {
	var req apps.JWKS
	if err := Bind(c, &req); err != nil {
		return err
	}
	return answerApp(c)(h.a.SetJWKS(c.UserContext(), c.Params("app_code"), req, PrincipalOf(c).Operator()))
}

func (h platformHandlers) removeJWKS(c *fiber.Ctx) error {
	return answerApp(c)(h.a.RemoveJWKS(c.UserContext(), c.Params("app_code"), PrincipalOf(c).Operator()))
}

// answerApp answers an app, or the error that came instead.
func answerApp(c *fiber.Ctx) func(apps.App, error) error {
	return func(a apps.App, err error) error {
		if err != nil {
			return err
		}
		return OK(c, a)
	}
}
