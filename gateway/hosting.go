package gateway

import (
	"strconv"

	"github.com/gofiber/fiber/v2"

	"voiceroom/apperr"
	"voiceroom/roomevent"
	"voiceroom/rooms"
)

// The hosts' tools (docs/openapi.yaml, tag rooms): room admins, seat mute
// and self-mute, seat modes, requests to speak, invitations, the room's
// information, chat mute and the member list. Each command's rule is the
// room's (rooms/hosting.go, rooms/seating.go); the edge checks the shape
// of what is sent, so that bad input is a 400 that never reaches the
// room.

// hostingRoutes mounts the hosts' tools on r.
func (h *roomHandlers) hostingRoutes(r Routers) {
	r.API.Patch("/v1/rooms/:room_id", h.updateInfo)
	r.API.Get("/v1/rooms/:room_id/members", h.members)
	r.API.Post("/v1/rooms/:room_id/admins", h.withUser(rooms.KindAddRoomAdmin))
	r.API.Delete("/v1/rooms/:room_id/admins/:user_id", h.onPathUser(rooms.KindRemoveRoomAdmin, false))
	r.API.Post("/v1/rooms/:room_id/mic/mute", h.muteSeat)
	r.API.Post("/v1/rooms/:room_id/mic/self-mute", h.selfMute)
	r.API.Post("/v1/rooms/:room_id/mic/mode", h.seatMode)
	r.API.Get("/v1/rooms/:room_id/mic/requests", h.micRequests)
	r.API.Post("/v1/rooms/:room_id/mic/requests", h.requestMic)
	r.API.Delete("/v1/rooms/:room_id/mic/requests", h.simple(rooms.KindCancelMicRequest, true))
	r.API.Post("/v1/rooms/:room_id/mic/requests/:user_id/approve", h.onPathUser(rooms.KindApproveMicRequest, true))
	r.API.Post("/v1/rooms/:room_id/mic/requests/:user_id/reject", h.onPathUser(rooms.KindRejectMicRequest, false))
	r.API.Post("/v1/rooms/:room_id/mic/invitations", h.invite)
	r.API.Post("/v1/rooms/:room_id/mic/invitations/accept", h.simple(rooms.KindAcceptMicInvitation, true))
	r.API.Post("/v1/rooms/:room_id/mic/invitations/decline", h.simple(rooms.KindDeclineMicInvitation, true))
	r.API.Post("/v1/rooms/:room_id/chat/mute", h.muteChat)
}

// execute runs cmd and answers the room's view.
func (h *roomHandlers) execute(c *fiber.Ctx, cmd *rooms.Command) error {
	res, err := h.svc.Execute(c.UserContext(), cmd)
	return h.respond(c, res, err)
}

// positiveUser checks a user id a client named.
func positiveUser(id *int64) error {
	if id == nil {
		return apperr.Invalid("user_id", "is required")
	}
	if *id <= 0 {
		return apperr.Invalid("user_id", "must be a positive number")
	}
	return nil
}

// seatChoice is an optional seat_index: absent lets the room pick the
// lowest free seat (rooms.AnySeat).
func seatChoice(i *int) (int, error) {
	if i == nil {
		return rooms.AnySeat, nil
	}
	if *i < 0 || *i >= rooms.MaxSeatCount {
		return 0, apperr.Invalid("seat_index", "must be 0..%d, or absent for any free seat", rooms.MaxSeatCount-1)
	}
	return *i, nil
}

// withUser runs kind on the body's {user_id} (AddRoomAdmin).
func (h *roomHandlers) withUser(kind rooms.Kind) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var req struct {
			UserID *int64 `json:"user_id"`
		}
		if err := Bind(c, &req); err != nil {
			return err
		}
		if err := positiveUser(req.UserID); err != nil {
			return err
		}
		cmd, err := h.command(c, kind)
		if err != nil {
			return err
		}
		cmd.Args.TargetUserID = *req.UserID
		return h.execute(c, cmd)
	}
}

// onPathUser runs kind on the path's :user_id; withSeat reads an optional
// {seat_index} (ApproveMicRequest).
func (h *roomHandlers) onPathUser(kind rooms.Kind, withSeat bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		target, err := strconv.ParseInt(c.Params("user_id"), 10, 64)
		if err != nil || target <= 0 {
			return apperr.Invalid("user_id", "must be a positive number")
		}
		seat := rooms.AnySeat
		if withSeat {
			var req struct {
				SeatIndex *int `json:"seat_index"`
			}
			if err := Bind(c, &req); err != nil {
				return err
			}
			if seat, err = seatChoice(req.SeatIndex); err != nil {
				return err
			}
		}
		cmd, err := h.command(c, kind)
		if err != nil {
			return err
		}
		cmd.Args.TargetUserID = target
		if withSeat {
			cmd.Args.SeatIndex = seat
		}
		return h.execute(c, cmd)
	}
}

func (h *roomHandlers) muteSeat(c *fiber.Ctx) error {
	var req struct {
		SeatIndex *int  `json:"seat_index"`
		Muted     *bool `json:"muted"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	switch {
	case req.SeatIndex == nil:
		return apperr.Invalid("seat_index", "is required")
	case *req.SeatIndex < 0:
		return apperr.Invalid("seat_index", "must be 0..seat_count-1")
	case req.Muted == nil:
		return apperr.Invalid("muted", "is required")
	}
	cmd, err := h.command(c, rooms.KindMuteSeat)
	if err != nil {
		return err
	}
	cmd.Args.SeatIndex, cmd.Args.Muted = *req.SeatIndex, *req.Muted
	return h.execute(c, cmd)
}

func (h *roomHandlers) selfMute(c *fiber.Ctx) error {
	var req struct {
		Muted *bool `json:"muted"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	if req.Muted == nil {
		return apperr.Invalid("muted", "is required")
	}
	cmd, err := h.command(c, rooms.KindSelfMute)
	if err != nil {
		return err
	}
	cmd.Args.Muted = *req.Muted
	return h.execute(c, cmd)
}

func (h *roomHandlers) seatMode(c *fiber.Ctx) error {
	var req struct {
		SeatMode string `json:"seat_mode"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	if req.SeatMode != roomevent.SeatModeFree && req.SeatMode != roomevent.SeatModeApply {
		return apperr.Invalid("seat_mode", "must be %q or %q", roomevent.SeatModeFree, roomevent.SeatModeApply)
	}
	cmd, err := h.command(c, rooms.KindSetSeatMode)
	if err != nil {
		return err
	}
	cmd.Args.SeatMode = req.SeatMode
	return h.execute(c, cmd)
}

func (h *roomHandlers) requestMic(c *fiber.Ctx) error {
	var req struct {
		SeatIndex *int `json:"seat_index"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	seat, err := seatChoice(req.SeatIndex)
	if err != nil {
		return err
	}
	cmd, err := h.command(c, rooms.KindRequestMic)
	if err != nil {
		return err
	}
	cmd.Args.SeatIndex = seat
	return h.execute(c, cmd)
}

// micRequestList is the answer of GET .../mic/requests.
type micRequestList struct {
	Requests []rooms.MicRequest `json:"requests"`
}

func (h *roomHandlers) micRequests(c *fiber.Ctx) error {
	cmd, err := h.command(c, "")
	if err != nil {
		return err
	}
	reqs, err := h.svc.MicRequests(c.UserContext(), cmd.AppCode, cmd.RoomID, cmd.Actor)
	if err != nil {
		return err
	}
	if reqs == nil {
		reqs = []rooms.MicRequest{}
	}
	return OK(c, micRequestList{Requests: reqs})
}

func (h *roomHandlers) invite(c *fiber.Ctx) error {
	var req struct {
		UserID    *int64 `json:"user_id"`
		SeatIndex *int   `json:"seat_index"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	if err := positiveUser(req.UserID); err != nil {
		return err
	}
	seat, err := seatChoice(req.SeatIndex)
	if err != nil {
		return err
	}
	cmd, err := h.command(c, rooms.KindInviteToMic)
	if err != nil {
		return err
	}
	cmd.Args.TargetUserID, cmd.Args.SeatIndex = *req.UserID, seat
	return h.execute(c, cmd)
}

// updateInfo is PATCH /api/v1/rooms/:room_id: the fields given change,
// named like the create route's.
func (h *roomHandlers) updateInfo(c *fiber.Ctx) error {
	var req struct {
		RoomName        *string `json:"room_name"`
		Notice          *string `json:"notice"`
		RoomAvatar      *string `json:"room_avatar"`
		RoomDescription *string `json:"room_description"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	info := &rooms.RoomInfo{Title: req.RoomName, Notice: req.Notice, CoverURL: req.RoomAvatar, Description: req.RoomDescription}
	if err := rooms.CheckRoomInfo(info); err != nil {
		return err
	}
	cmd, err := h.command(c, rooms.KindUpdateRoomInfo)
	if err != nil {
		return err
	}
	cmd.Args.Info = info
	return h.execute(c, cmd)
}

func (h *roomHandlers) muteChat(c *fiber.Ctx) error {
	var req struct {
		UserID  *int64 `json:"user_id"`
		Seconds *int64 `json:"seconds"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	if err := positiveUser(req.UserID); err != nil {
		return err
	}
	switch {
	case req.Seconds == nil:
		return apperr.Invalid("seconds", "is required (0 lifts the mute)")
	case *req.Seconds < 0 || *req.Seconds > rooms.MaxMuteSeconds:
		return apperr.Invalid("seconds", "must be 0..%d", rooms.MaxMuteSeconds)
	}
	cmd, err := h.command(c, rooms.KindMuteChat)
	if err != nil {
		return err
	}
	cmd.Args.TargetUserID, cmd.Args.MuteSeconds = *req.UserID, *req.Seconds
	return h.execute(c, cmd)
}

// members answers GET .../members: a page of the member list, from the
// room's view, with the online count beside it.
func (h *roomHandlers) members(c *fiber.Ctx) error {
	limit := rooms.DefaultMemberLimit
	if s := c.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > rooms.MaxMemberLimit {
			return apperr.Invalid("limit", "must be 1..%d", rooms.MaxMemberLimit)
		}
		limit = n
	}
	cursor := c.Query("cursor")
	if len(cursor) > maxMemberCursor {
		return apperr.Invalid("cursor", "not a cursor of this list: start again without one")
	}
	cmd, err := h.command(c, "")
	if err != nil {
		return err
	}
	v, err := h.svc.Get(c.UserContext(), cmd.AppCode, cmd.RoomID)
	if err != nil {
		return err
	}
	page, err := v.Members(h.now().UnixMilli(), limit, cursor)
	if err != nil {
		return err
	}
	return OK(c, page)
}

// maxMemberCursor bounds a member list's cursor (base64 of three numbers).
const maxMemberCursor = 128
