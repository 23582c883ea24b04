package gateway

import (
	"context"
	"strings"

	"github.com/gofiber/fiber/v2"

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/pk"
)

// Battles are the PK battles between rooms (package pk); *pk.Service is one.
type Battles interface {
	Invite(ctx context.Context, app string, userID int64, roomID string, inv pk.Invitation) (pk.Battle, error)
	Accept(ctx context.Context, app string, userID int64, battleID string) (pk.Battle, error)
	Decline(ctx context.Context, app string, userID int64, battleID string) (pk.Battle, error)
	End(ctx context.Context, app string, userID int64, battleID, roomID string) (pk.Battle, error)
	Get(ctx context.Context, app, battleID string) (pk.Battle, error)
	SetScore(ctx context.Context, app, operator, battleID string, ch pk.ScoreChange) (pk.Battle, error)
}

var _ Battles = (*pk.Service)(nil)

// PKRoutes mounts the PK battles' routes (docs/pk.md):
//
//   - POST /api/v1/rooms/{room_id}/pk {opponent_room_id, duration_seconds}
//     invites another room of the app, by the room's owner, host or a room
//     admin;
//   - POST /api/v1/pk/{battle_id}/accept and .../decline answer it, by the
//     invited room's owner, host or a room admin, within 30 s;
//   - POST /api/v1/pk/{battle_id}/end {room_id?} ends a running battle
//     early: the caller's room forfeits;
//   - GET /api/v1/pk/{battle_id}: any battle of the caller's app;
//   - POST /admin/v1/pk/{battle_id}/score {room_id, score, reason?}: an
//     admin sets one side's total of a running battle (audited in that
//     room's trail).
//
// Each answers the battle.
func PKRoutes(b Battles) Mount {
	h := pkHandlers{b: b}
	return func(r Routers) {
		r.API.Post("/v1/rooms/:room_id/pk", h.invite)
		r.API.Post("/v1/pk/:battle_id/accept", h.answer(b.Accept))
		r.API.Post("/v1/pk/:battle_id/decline", h.answer(b.Decline))
		r.API.Post("/v1/pk/:battle_id/end", h.end)
		r.API.Get("/v1/pk/:battle_id", h.get)
		r.Admin.Post("/v1/pk/:battle_id/score", h.setScore)
	}
}

type pkHandlers struct{ b Battles }

// pkRoomID checks a room id the caller sent for field: another app's room
// is NOT_FOUND without a lookup.
func pkRoomID(p Principal, field, roomID string) error {
	if roomID == "" {
		return apperr.Invalid(field, "is required")
	}
	if len(roomID) > voiceroom.RoomIDMax || !strings.HasPrefix(roomID, p.AppCode+"_") {
		return apperr.New(apperr.NotFound, "%s: room %s not found in this app", field, roomID)
	}
	return nil
}

func (h pkHandlers) invite(c *fiber.Ctx) error {
	p := PrincipalOf(c)
	roomID := c.Params("room_id")
	if err := pkRoomID(p, "room_id", roomID); err != nil {
		return err
	}
	var req pk.Invitation
	if err := Bind(c, &req); err != nil {
		return err
	}
	if err := pkRoomID(p, "opponent_room_id", req.OpponentRoomID); err != nil {
		return err
	}
	out, err := h.b.Invite(c.UserContext(), p.AppCode, p.UserID, roomID, req)
	if err != nil {
		return err
	}
	return OK(c, out)
}

func (h pkHandlers) answer(fn func(ctx context.Context, app string, userID int64, battleID string) (pk.Battle, error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		p := PrincipalOf(c)
		out, err := fn(c.UserContext(), p.AppCode, p.UserID, c.Params("battle_id"))
		if err != nil {
			return err
		}
		return OK(c, out)
	}
}

func (h pkHandlers) end(c *fiber.Ctx) error {
	p := PrincipalOf(c)
	var req struct {
		RoomID string `json:"room_id"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	if req.RoomID != "" {
		if err := pkRoomID(p, "room_id", req.RoomID); err != nil {
			return err
		}
	}
	out, err := h.b.End(c.UserContext(), p.AppCode, p.UserID, c.Params("battle_id"), req.RoomID)
	if err != nil {
		return err
	}
	return OK(c, out)
}

func (h pkHandlers) get(c *fiber.Ctx) error {
	p := PrincipalOf(c)
	out, err := h.b.Get(c.UserContext(), p.AppCode, c.Params("battle_id"))
	if err != nil {
		return err
	}
	return OK(c, out)
}

func (h pkHandlers) setScore(c *fiber.Ctx) error {
	p := PrincipalOf(c)
	var req pk.ScoreChange
	if err := Bind(c, &req); err != nil {
		return err
	}
	if req.RoomID != "" {
		if err := pkRoomID(p, "room_id", req.RoomID); err != nil {
			return err
		}
	}
	out, err := h.b.SetScore(c.UserContext(), p.AppCode, p.Operator(), c.Params("battle_id"), req)
	if err != nil {
		return err
	}
	return OK(c, out)
}
