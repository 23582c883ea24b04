package gateway

import (
	"strconv"

	"github.com/gofiber/fiber/v2"

	"voiceroom/apperr"
	"voiceroom/rooms"
)

// reasonRequest is the body of an operator's action on a room.
type reasonRequest struct {
	Reason string `json:"reason"`
}

// moderate serves POST /admin/v1/rooms/:room_id/ban and /restore {reason}:
// BanRoom or RestoreRoom, a room command like the others (Idempotency-Key,
// the room snapshot as the answer), recorded in the room's audit trail.
func (h *roomHandlers) moderate(kind rooms.Kind) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var req reasonRequest
		if err := Bind(c, &req); err != nil {
			return err
		}
		cmd, err := h.command(c, kind)
		if err != nil {
			return err
		}
		cmd.Args.Reason = req.Reason
		res, err := h.svc.Execute(c.UserContext(), cmd)
		return h.respond(c, res, err)
	}
}

// audit serves GET /admin/v1/rooms/:room_id/audit?limit=&cursor=: the
// room's operator actions, newest first, {items, next_cursor}.
func (h *roomHandlers) audit(c *fiber.Ctx) error {
	cmd, err := h.command(c, "")
	if err != nil {
		return err
	}
	limit := 0
	if s := c.Query("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > rooms.MaxAuditLimit {
			return apperr.Invalid("limit", "must be 1..%d", rooms.MaxAuditLimit)
		}
	}
	cursor := c.Query("cursor")
	if len(cursor) > 20 {
		return apperr.Invalid("cursor", "is not a cursor this route returned")
	}
	page, err := h.svc.Audit(c.UserContext(), cmd.AppCode, cmd.RoomID, limit, cursor)
	if err != nil {
		return err
	}
	return OK(c, page)
}
