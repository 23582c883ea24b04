package gateway

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"voiceroom/roomlist"
)

// Hides are the operators' region hides; *roomlist.Hides is one.
type Hides interface {
	Create(ctx context.Context, appCode, operator string, in roomlist.NewHide) (roomlist.Hide, error)
	Delete(ctx context.Context, appCode, operator string, hideID int64, reason string) (roomlist.Hide, error)
	List(ctx context.Context, appCode string, regionID int64) ([]roomlist.Hide, error)
}

var _ Hides = (*roomlist.Hides)(nil)

// HideRoutes mounts the operators' hide routes: a hidden room leaves one
// region's lists and search (package roomlist, Hides). Every route is
// an admin route of the token's app; the operator recorded is the token's
// sub.
func HideRoutes(hides Hides) Mount {
	h := hideHandlers{hides: hides}
	return func(r Routers) {
		r.Admin.Post("/v1/hides", h.create)
		r.Admin.Delete("/v1/hides/:hide_id", h.remove)
		r.Admin.Get("/v1/hides", h.list)
	}
}

type hideHandlers struct {
	hides Hides
}

func (h hideHandlers) create(c *fiber.Ctx) error {
	var req struct {
		RoomID          string `json:"room_id"`
		VisibleRegionID int64  `json:"visible_region_id"`
		Reason          string `json:"reason"`
		ExpiresAtMs     int64  `json:"expires_at_ms"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	p := PrincipalOf(c)
	hide, err := h.hides.Create(c.UserContext(), p.AppCode, p.Operator(), roomlist.NewHide{
		RoomID: req.RoomID, VisibleRegionID: req.VisibleRegionID, Reason: req.Reason, ExpiresAtMs: req.ExpiresAtMs,
	})
	if err != nil {
		return err
	}
	return OK(c, hide)
}

// remove unhides; the reason recorded in the audit trail is optional, in a
// JSON body {reason} or the query parameter reason.
func (h hideHandlers) remove(c *fiber.Ctx) error {
	id, err := pathID(c, "hide_id")
	if err != nil {
		return err
	}
	reason, err := optionalReason(c)
	if err != nil {
		return err
	}
	p := PrincipalOf(c)
	hide, err := h.hides.Delete(c.UserContext(), p.AppCode, p.Operator(), id, reason)
	if err != nil {
		return err
	}
	return OK(c, hide)
}

func (h hideHandlers) list(c *fiber.Ctx) error {
	region, err := regionQuery(c)
	if err != nil {
		return err
	}
	list, err := h.hides.List(c.UserContext(), PrincipalOf(c).AppCode, region)
	if err != nil {
		return err
	}
	return OK(c, fiber.Map{"hides": list})
}

// optionalReason reads the optional reason of a DELETE: a JSON body
// {reason} wins over the query parameter reason. The store checks its
// length.
func optionalReason(c *fiber.Ctx) (string, error) {
	var body struct {
		Reason string `json:"reason"`
	}
	if err := Bind(c, &body); err != nil {
		return "", err
	}
	if body.Reason != "" {
		return body.Reason, nil
	}
	return c.Query("reason"), nil
}
