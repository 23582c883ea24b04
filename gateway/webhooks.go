package gateway

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"

	"voiceroom/apperr"
	"voiceroom/webhooks"
)

// Webhooks are each app's webhook endpoints; *webhooks.Endpoints is one.
type Webhooks interface {
	Create(ctx context.Context, appCode, operator string, n webhooks.NewEndpoint) (webhooks.WithSecret, error)
	List(ctx context.Context, appCode string) ([]webhooks.Endpoint, error)
	Get(ctx context.Context, appCode string, id int64) (webhooks.Endpoint, error)
	Update(ctx context.Context, appCode, operator string, id int64, p webhooks.Patch) (webhooks.Endpoint, error)
	Delete(ctx context.Context, appCode string, id int64) (webhooks.Endpoint, error)
	RotateSecret(ctx context.Context, appCode string, id int64, window *time.Duration) (webhooks.WithSecret, error)
	Deliveries(ctx context.Context, appCode string, id int64, limit int) ([]webhooks.Delivery, error)
}

var _ Webhooks = (*webhooks.Endpoints)(nil)

// defaultDeliveries is the page of GET .../deliveries without a limit.
const defaultDeliveries = 20

// WebhookRoutes mounts the admins' webhook routes, within the token's app:
//
//   - POST /admin/v1/webhooks {url, event_types?} creates an endpoint and
//     answers it with its signing secret, shown this once;
//   - GET /admin/v1/webhooks lists them, GET .../{webhook_id} one (never a
//     secret);
//   - PATCH .../{webhook_id} {url?, event_types?, enabled?} changes,
//     pauses or resumes one;
//   - DELETE .../{webhook_id} removes one;
//   - POST .../{webhook_id}/rotate-secret {previous_secret_ttl_seconds?}
//     answers a new secret, the previous one signing on for the window;
//   - GET .../{webhook_id}/deliveries?limit= its last deliveries.
func WebhookRoutes(w Webhooks) Mount {
	h := webhookHandlers{w: w}
	return func(r Routers) {
		r.Admin.Post("/v1/webhooks", h.create)
		r.Admin.Get("/v1/webhooks", h.list)
		r.Admin.Get("/v1/webhooks/:webhook_id", h.get)
		r.Admin.Patch("/v1/webhooks/:webhook_id", h.update)
		r.Admin.Delete("/v1/webhooks/:webhook_id", h.remove)
		r.Admin.Post("/v1/webhooks/:webhook_id/rotate-secret", h.rotate)
		r.Admin.Get("/v1/webhooks/:webhook_id/deliveries", h.deliveries)
	}
}

type webhookHandlers struct {
	w Webhooks
}

func (h webhookHandlers) create(c *fiber.Ctx) error {
	var req struct {
		URL        string   `json:"url"`
		EventTypes []string `json:"event_types"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	p := PrincipalOf(c)
	out, err := h.w.Create(c.UserContext(), p.AppCode, p.Operator(), webhooks.NewEndpoint{URL: req.URL, EventTypes: req.EventTypes})
	if err != nil {
		return err
	}
	return OK(c, out)
}

func (h webhookHandlers) list(c *fiber.Ctx) error {
	list, err := h.w.List(c.UserContext(), PrincipalOf(c).AppCode)
	if err != nil {
		return err
	}
	return OK(c, fiber.Map{"webhooks": list})
}

func (h webhookHandlers) get(c *fiber.Ctx) error {
	id, err := pathID(c, "webhook_id")
	if err != nil {
		return err
	}
	e, err := h.w.Get(c.UserContext(), PrincipalOf(c).AppCode, id)
	if err != nil {
		return err
	}
	return OK(c, e)
}

func (h webhookHandlers) update(c *fiber.Ctx) error {
	id, err := pathID(c, "webhook_id")
	if err != nil {
		return err
	}
	var req struct {
		URL        *string   `json:"url"`
		EventTypes *[]string `json:"event_types"`
		Enabled    *bool     `json:"enabled"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	if req.EventTypes != nil && *req.EventTypes == nil {
		return apperr.Invalid("event_types", "must be a list ([] for every type)")
	}
	p := PrincipalOf(c)
	e, err := h.w.Update(c.UserContext(), p.AppCode, p.Operator(), id,
		webhooks.Patch{URL: req.URL, EventTypes: req.EventTypes, Enabled: req.Enabled})
	if err != nil {
		return err
	}
	return OK(c, e)
}

func (h webhookHandlers) remove(c *fiber.Ctx) error {
	id, err := pathID(c, "webhook_id")
	if err != nil {
		return err
	}
	e, err := h.w.Delete(c.UserContext(), PrincipalOf(c).AppCode, id)
	if err != nil {
		return err
	}
	return OK(c, e)
}

func (h webhookHandlers) rotate(c *fiber.Ctx) error {
	id, err := pathID(c, "webhook_id")
	if err != nil {
		return err
	}
	var req struct {
		PreviousSecretTTLSeconds *int64 `json:"previous_secret_ttl_seconds"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	var window *time.Duration
	if s := req.PreviousSecretTTLSeconds; s != nil {
		if *s < 0 || *s > int64(webhooks.MaxRotationWindow/time.Second) {
			return apperr.Invalid("previous_secret_ttl_seconds", "must be 0 to %d", int64(webhooks.MaxRotationWindow/time.Second))
		}
		d := time.Duration(*s) * time.Second
		window = &d
	}
	out, err := h.w.RotateSecret(c.UserContext(), PrincipalOf(c).AppCode, id, window)
	if err != nil {
		return err
	}
	return OK(c, out)
}

func (h webhookHandlers) deliveries(c *fiber.Ctx) error {
	id, err := pathID(c, "webhook_id")
	if err != nil {
		return err
	}
	limit, err := queryUint(c, "limit", webhooks.MaxDeliveriesKept)
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = defaultDeliveries
	}
	list, err := h.w.Deliveries(c.UserContext(), PrincipalOf(c).AppCode, id, int(limit))
	if err != nil {
		return err
	}
	return OK(c, fiber.Map{"deliveries": list})
}
