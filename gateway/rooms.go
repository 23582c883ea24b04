package gateway

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/rooms"
)

// Rooms runs room commands and reads rooms (rooms.Rooms), and serves the
// gift catalog and the audit trail: *rooms.Service, or a
// roomcluster.Router that sends each to the room's owner.
type Rooms interface {
	rooms.Rooms
	rooms.RecordKeeper
}

var _ Rooms = (*rooms.Service)(nil)

// RoomRoutes mounts the room commands (docs/openapi.yaml, tag rooms) with
// the hosts' tools (hosting.go), the gift catalog, ChangeRoomVisibleRegion,
// and the operators' room view, ban, restore and audit trail
// (moderation.go). The
// wallet has its own mount (WalletRoutes).
func RoomRoutes(svc Rooms) Mount {
	h := &roomHandlers{svc: svc, now: time.Now}
	return func(r Routers) {
		r.API.Post("/v1/rooms/create", h.create)
		r.API.Get("/v1/rooms/:room_id", h.get)
		r.API.Post("/v1/rooms/:room_id/join", h.join)
		r.API.Post("/v1/rooms/:room_id/leave", h.simple(rooms.KindLeaveRoom, false))
		r.API.Post("/v1/rooms/:room_id/heartbeat", h.simple(rooms.KindHeartbeat, false))
		r.API.Post("/v1/rooms/:room_id/mic/up", h.seat(rooms.KindMicUp))
		r.API.Post("/v1/rooms/:room_id/mic/down", h.simple(rooms.KindMicDown, true))
		r.API.Post("/v1/rooms/:room_id/mic/change", h.seat(rooms.KindChangeMicSeat))
		r.API.Post("/v1/rooms/:room_id/mic/lock", h.seatLock)
		r.API.Post("/v1/rooms/:room_id/host/transfer", h.transferHost)
		r.API.Post("/v1/rooms/:room_id/gift", h.gift)
		r.API.Post("/v1/rooms/:room_id/password", h.password)
		r.API.Post("/v1/rooms/:room_id/kick", h.kick)
		r.API.Post("/v1/rooms/:room_id/close", h.simple(rooms.KindCloseRoom, true))
		h.hostingRoutes(r)

		r.Admin.Post("/v1/gifts", h.upsertGift)
		r.Admin.Post("/v1/rooms/:room_id/region", h.changeRegion)
		r.Admin.Post("/v1/rooms/:room_id/close", h.adminClose)
		r.Admin.Post("/v1/rooms/:room_id/ban", h.moderate(rooms.KindBanRoom))
		r.Admin.Post("/v1/rooms/:room_id/restore", h.moderate(rooms.KindRestoreRoom))
		r.Admin.Get("/v1/rooms/:room_id", h.get)
		r.Admin.Get("/v1/rooms/:room_id/audit", h.audit)
	}
}

type roomHandlers struct {
	svc Rooms
	// now is the clock a member list hides ended chat mutes by.
	now func() time.Time
}

// command starts a command of the caller on the path's room. The room id
// must carry the caller's app_code prefix: another app's room is NOT_FOUND
// without a lookup.
func (h *roomHandlers) command(c *fiber.Ctx, kind rooms.Kind) (*rooms.Command, error) {
	p := PrincipalOf(c)
	roomID := c.Params("room_id")
	if len(roomID) > voiceroom.RoomIDMax || !strings.HasPrefix(roomID, p.AppCode+"_") {
		return nil, apperr.New(apperr.NotFound, "room not found")
	}
	cmd, err := newCommand(c, kind)
	if err != nil {
		return nil, err
	}
	cmd.RoomID = roomID
	return cmd, nil
}

// newCommand starts a command of the caller: its kind, app, actor, ids.
func newCommand(c *fiber.Ctx, kind rooms.Kind) (*rooms.Command, error) {
	p := PrincipalOf(c)
	// The answer is the room's view, written out as is (respond): a
	// routed command's stays the JSON its owner sent (ViewJSON).
	cmd := &rooms.Command{Kind: kind, AppCode: p.AppCode, RequestID: RequestID(c), ViewJSON: true}
	if p.Admin {
		cmd.Actor = rooms.Actor{UserID: p.UserID, Admin: true, Operator: p.Operator()}
	} else {
		cmd.Actor = rooms.Actor{UserID: p.UserID}
	}
	var err error
	cmd.CommandID, cmd.ClientKey, err = commandID(c)
	return cmd, err
}

// commandID is the Idempotency-Key, or a fresh id.
func commandID(c *fiber.Ctx) (id string, clientKey bool, err error) {
	if key := c.Get("Idempotency-Key"); key != "" {
		if err := rooms.ValidCommandID(key); err != nil {
			return "", false, err
		}
		return key, true, nil
	}
	return rooms.NewCommandID(), false, nil
}

func (h *roomHandlers) respond(c *fiber.Ctx, res rooms.Result, err error) error {
	if err != nil {
		return err
	}
	if res.Replayed {
		c.Set("Idempotent-Replayed", "true")
	}
	if res.ViewJSON != nil { // routed: written as its owner encoded it
		return OK(c, json.RawMessage(res.ViewJSON))
	}
	return OK(c, res.View)
}

func (h *roomHandlers) create(c *fiber.Ctx) error {
	var req struct {
		RoomName        string `json:"room_name"`
		RoomAvatar      string `json:"room_avatar"`
		RoomDescription string `json:"room_description"`
		SeatCount       int    `json:"seat_count"`
		Mode            string `json:"mode"`
		SeatMode        string `json:"seat_mode"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	cmd, err := newCommand(c, rooms.KindCreateRoom)
	if err != nil {
		return err
	}
	cmd.Actor = rooms.Actor{UserID: PrincipalOf(c).UserID} // a room's owner is a user
	// The room's id is chosen here (from the Idempotency-Key when there is
	// one): it names the room's partition.
	cmd.RoomID = rooms.NewRoomID(cmd.AppCode, cmd.Actor.UserID, cmd.CommandID, cmd.ClientKey)
	cmd.Args = rooms.Args{Title: req.RoomName, CoverURL: req.RoomAvatar, Description: req.RoomDescription, SeatCount: req.SeatCount,
		Mode: req.Mode, SeatMode: req.SeatMode}
	res, err := h.svc.Execute(c.UserContext(), cmd)
	return h.respond(c, res, err)
}

func (h *roomHandlers) get(c *fiber.Ctx) error {
	cmd, err := h.command(c, "")
	if err != nil {
		return err
	}
	snap, err := h.svc.Get(c.UserContext(), cmd.AppCode, cmd.RoomID)
	if err != nil {
		return err
	}
	return OK(c, snap)
}

// simple runs a command without arguments. withView false answers null
// data (leave, heartbeat: docs/openapi.yaml answers them with response Empty).
func (h *roomHandlers) simple(kind rooms.Kind, withView bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		cmd, err := h.command(c, kind)
		if err != nil {
			return err
		}
		cmd.NoView = !withView
		res, err := h.svc.Execute(c.UserContext(), cmd)
		if err != nil || withView {
			return h.respond(c, res, err)
		}
		return OK(c, nil)
	}
}

func (h *roomHandlers) join(c *fiber.Ctx) error {
	var req struct {
		Password string `json:"password"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	cmd, err := h.command(c, rooms.KindJoinRoom)
	if err != nil {
		return err
	}
	cmd.Password = req.Password
	res, err := h.svc.Execute(c.UserContext(), cmd)
	return h.respond(c, res, err)
}

// seatRequest is a body naming a seat; the index is required.
type seatRequest struct {
	SeatIndex *int  `json:"seat_index"`
	Locked    *bool `json:"locked"`
}

func (h *roomHandlers) seat(kind rooms.Kind) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var req seatRequest
		if err := Bind(c, &req); err != nil {
			return err
		}
		if req.SeatIndex == nil {
			return apperr.Invalid("seat_index", "is required")
		}
		cmd, err := h.command(c, kind)
		if err != nil {
			return err
		}
		cmd.Args.SeatIndex = *req.SeatIndex
		res, err := h.svc.Execute(c.UserContext(), cmd)
		return h.respond(c, res, err)
	}
}

func (h *roomHandlers) seatLock(c *fiber.Ctx) error {
	var req seatRequest
	if err := Bind(c, &req); err != nil {
		return err
	}
	if req.SeatIndex == nil {
		return apperr.Invalid("seat_index", "is required")
	}
	if req.Locked == nil {
		return apperr.Invalid("locked", "is required")
	}
	cmd, err := h.command(c, rooms.KindSetSeatLock)
	if err != nil {
		return err
	}
	cmd.Args.SeatIndex, cmd.Args.Locked = *req.SeatIndex, *req.Locked
	res, err := h.svc.Execute(c.UserContext(), cmd)
	return h.respond(c, res, err)
}

func (h *roomHandlers) transferHost(c *fiber.Ctx) error {
	var req struct {
		UserID int64 `json:"user_id"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	if req.UserID <= 0 {
		return apperr.Invalid("user_id", "must be a positive number")
	}
	cmd, err := h.command(c, rooms.KindTransferRoomHost)
	if err != nil {
		return err
	}
	cmd.Args.TargetUserID = req.UserID
	res, err := h.svc.Execute(c.UserContext(), cmd)
	return h.respond(c, res, err)
}

func (h *roomHandlers) gift(c *fiber.Ctx) error {
	var req struct {
		GiftID         int64 `json:"gift_id"`
		Count          int64 `json:"count"`
		ReceiverUserID int64 `json:"receiver_user_id"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	switch {
	case req.GiftID <= 0:
		return apperr.Invalid("gift_id", "must be a positive number")
	case req.Count < 1 || req.Count > rooms.MaxGiftCount:
		return apperr.Invalid("count", "must be 1..%d", rooms.MaxGiftCount)
	case req.ReceiverUserID <= 0:
		return apperr.Invalid("receiver_user_id", "must be a positive number")
	}
	cmd, err := h.command(c, rooms.KindSendGift)
	if err != nil {
		return err
	}
	cmd.Args.GiftID, cmd.Args.Count, cmd.Args.TargetUserID = req.GiftID, req.Count, req.ReceiverUserID
	res, err := h.svc.Execute(c.UserContext(), cmd)
	return h.respond(c, res, err)
}

func (h *roomHandlers) password(c *fiber.Ctx) error {
	var req struct {
		Password *string `json:"password"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	if req.Password == nil {
		return apperr.Invalid("password", "is required (empty unlocks)")
	}
	cmd, err := h.command(c, rooms.KindSetRoomPassword)
	if err != nil {
		return err
	}
	cmd.Password = *req.Password
	res, err := h.svc.Execute(c.UserContext(), cmd)
	return h.respond(c, res, err)
}

func (h *roomHandlers) kick(c *fiber.Ctx) error {
	var req struct {
		UserID     int64 `json:"user_id"`
		BanSeconds int64 `json:"ban_seconds"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	switch {
	case req.UserID <= 0:
		return apperr.Invalid("user_id", "must be a positive number")
	case req.BanSeconds < 0 || req.BanSeconds > rooms.MaxBanSeconds:
		return apperr.Invalid("ban_seconds", "must be 0..%d", rooms.MaxBanSeconds)
	}
	cmd, err := h.command(c, rooms.KindKickUser)
	if err != nil {
		return err
	}
	cmd.Args.TargetUserID, cmd.Args.BanSeconds = req.UserID, req.BanSeconds
	res, err := h.svc.Execute(c.UserContext(), cmd)
	return h.respond(c, res, err)
}

func (h *roomHandlers) upsertGift(c *fiber.Ctx) error {
	var req struct {
		GiftID  int64  `json:"gift_id"`
		Name    string `json:"name"`
		Price   int64  `json:"price"`
		Heat    int64  `json:"heat"`
		Enabled *bool  `json:"enabled"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	g := rooms.Gift{GiftID: req.GiftID, Name: req.Name, Price: req.Price, Heat: req.Heat, Enabled: req.Enabled == nil || *req.Enabled}
	if err := h.svc.UpsertGift(c.UserContext(), PrincipalOf(c).AppCode, g); err != nil {
		return err
	}
	return OK(c, g)
}

func (h *roomHandlers) changeRegion(c *fiber.Ctx) error {
	var req struct {
		VisibleRegionID *int64 `json:"visible_region_id"`
		Reason          string `json:"reason"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	if req.VisibleRegionID == nil || *req.VisibleRegionID < 0 {
		return apperr.Invalid("visible_region_id", "is required (0 = GLOBAL)")
	}
	cmd, err := h.command(c, rooms.KindChangeRoomVisibleRegion)
	if err != nil {
		return err
	}
	cmd.Args.RegionID, cmd.Args.Reason = *req.VisibleRegionID, req.Reason
	res, err := h.svc.Execute(c.UserContext(), cmd)
	return h.respond(c, res, err)
}

// adminClose closes a room, with an optional {reason} for its audit trail.
func (h *roomHandlers) adminClose(c *fiber.Ctx) error {
	var req reasonRequest
	if err := Bind(c, &req); err != nil {
		return err
	}
	cmd, err := h.command(c, rooms.KindCloseRoom)
	if err != nil {
		return err
	}
	cmd.Args.Reason = req.Reason
	res, err := h.svc.Execute(c.UserContext(), cmd)
	return h.respond(c, res, err)
}
