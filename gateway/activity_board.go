package gateway

import (
	"context"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"voiceroom/activity"
	"voiceroom/apperr"
)

// ActivityBoards reads activities' boards and task progress;
// *activity.Boards is one.
type ActivityBoards interface {
	Board(ctx context.Context, q activity.BoardQuery) (activity.Board, error)
	Progress(ctx context.Context, q activity.ProgressQuery) (activity.Progress, error)
}

var _ ActivityBoards = (*activity.Boards)(nil)

// ActivityBoardRoutes returns the Mount of a user's reads of an activity
// (docs/openapi.yaml, operations getActivityBoard and
// getActivityProgress):
//
//   - GET /api/v1/activities/:activity_id/board?limit=&around=me&cursor=&room_id=
//   - GET /api/v1/activities/:activity_id/progress?room_id=
//
// An activity of another app or of regions the caller is not in is
// NOT_FOUND.
func ActivityBoardRoutes(b ActivityBoards) Mount {
	h := &activityBoardHandlers{b: b}
	return func(rt Routers) {
		rt.API.Get("/v1/activities/:activity_id/board", h.board)
		rt.API.Get("/v1/activities/:activity_id/progress", h.progress)
	}
}

type activityBoardHandlers struct {
	b ActivityBoards
}

// activityID reads the path's activity id; not a positive number is
// NOT_FOUND, as for any id nobody has.
func activityID(c *fiber.Ctx) (int64, error) {
	id, err := strconv.ParseInt(c.Params("activity_id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, apperr.New(apperr.NotFound, "activity not found")
	}
	return id, nil
}

func (h *activityBoardHandlers) board(c *fiber.Ctx) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	limit := activity.DefaultBoardLimit
	if s := c.Query("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > activity.MaxBoardLimit {
			return apperr.Invalid("limit", "must be 1..%d", activity.MaxBoardLimit)
		}
	}
	around := false
	switch c.Query("around") {
	case "":
	case "me":
		around = true
	default:
		return apperr.Invalid("around", "must be me")
	}
	cursor := c.Query("cursor")
	if len(cursor) > 512 {
		return apperr.Invalid("cursor", "at most 512 characters")
	}
	p := PrincipalOf(c)
	board, err := h.b.Board(c.UserContext(), activity.BoardQuery{AppCode: p.AppCode, UserID: p.UserID, ActivityID: id,
		RoomID: c.Query("room_id"), Limit: limit, Around: around, Cursor: cursor})
	if err != nil {
		return err
	}
	return OK(c, board)
}

func (h *activityBoardHandlers) progress(c *fiber.Ctx) error {
	id, err := activityID(c)
	if err != nil {
		return err
	}
	p := PrincipalOf(c)
	progress, err := h.b.Progress(c.UserContext(), activity.ProgressQuery{AppCode: p.AppCode, UserID: p.UserID, ActivityID: id,
		RoomID: c.Query("room_id")})
	if err != nil {
		return err
	}
	return OK(c, progress)
}
