package gateway

import (
	"context"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"voiceroom/activity"
	"voiceroom/apperr"
)

// Activities are each app's campaigns (package activity);
// *activity.Definer is one.
type Activities interface {
	Create(ctx context.Context, app, operator string, def activity.Definition) (activity.Activity, error)
	List(ctx context.Context, app string, limit int, cursor string) (activity.Page, error)
	Get(ctx context.Context, app string, id int64) (activity.Activity, error)
	Cancel(ctx context.Context, app, operator string, id int64) (activity.Activity, error)
	Visible(ctx context.Context, app string, region int64) ([]activity.Activity, error)
}

var _ Activities = (*activity.Definer)(nil)

// maxActivityCursor bounds a cursor of GET /admin/v1/activities (an id in
// decimal).
const maxActivityCursor = 20

// ActivityRoutes mounts the activities' definition routes (docs/activities.md):
//
//   - POST /admin/v1/activities defines one in the token's app (every
//     refusal a 400 naming its field, nothing created);
//   - GET /admin/v1/activities?limit=&cursor= pages the app's, oldest
//     first, {items, next_cursor}; GET .../{activity_id} one;
//   - POST .../{activity_id}/cancel cancels one before its settlement pays;
//   - GET /api/v1/activities: the scheduled and running activities of the
//     caller's region (read through users, as the room list does; a
//     failed lookup fails the request), {activities}.
func ActivityRoutes(a Activities, users UserRegions) Mount {
	h := activityHandlers{a: a, users: users}
	return func(r Routers) {
		r.Admin.Post("/v1/activities", h.create)
		r.Admin.Get("/v1/activities", h.list)
		r.Admin.Get("/v1/activities/:activity_id", h.get)
		r.Admin.Post("/v1/activities/:activity_id/cancel", h.cancel)
		r.API.Get("/v1/activities", h.visible)
	}
}

type activityHandlers struct {
	a     Activities
	users UserRegions
}

func (h activityHandlers) create(c *fiber.Ctx) error {
	var def activity.Definition
	if err := Bind(c, &def); err != nil {
		return err
	}
	p := PrincipalOf(c)
	out, err := h.a.Create(c.UserContext(), p.AppCode, p.Operator(), def)
	if err != nil {
		return err
	}
	return OK(c, out)
}

func (h activityHandlers) list(c *fiber.Ctx) error {
	limit := 0
	if s := c.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > activity.MaxListLimit {
			return apperr.Invalid("limit", "must be 1..%d", activity.MaxListLimit)
		}
		limit = n
	}
	cursor := c.Query("cursor")
	if len(cursor) > maxActivityCursor {
		return apperr.Invalid("cursor", "is not a cursor this route returned")
	}
	page, err := h.a.List(c.UserContext(), PrincipalOf(c).AppCode, limit, cursor)
	if err != nil {
		return err
	}
	return OK(c, page)
}

func (h activityHandlers) get(c *fiber.Ctx) error {
	id, err := pathID(c, "activity_id")
	if err != nil {
		return err
	}
	out, err := h.a.Get(c.UserContext(), PrincipalOf(c).AppCode, id)
	if err != nil {
		return err
	}
	return OK(c, out)
}

func (h activityHandlers) cancel(c *fiber.Ctx) error {
	id, err := pathID(c, "activity_id")
	if err != nil {
		return err
	}
	p := PrincipalOf(c)
	out, err := h.a.Cancel(c.UserContext(), p.AppCode, p.Operator(), id)
	if err != nil {
		return err
	}
	return OK(c, out)
}

func (h activityHandlers) visible(c *fiber.Ctx) error {
	p := PrincipalOf(c)
	_, region, err := h.users.UserRegion(c.UserContext(), p.AppCode, p.UserID)
	if err != nil {
		return err
	}
	list, err := h.a.Visible(c.UserContext(), p.AppCode, region)
	if err != nil {
		return err
	}
	out := make([]activity.UserActivity, 0, len(list))
	for _, a := range list {
		out = append(out, a.ForUser())
	}
	return OK(c, fiber.Map{"activities": out})
}
