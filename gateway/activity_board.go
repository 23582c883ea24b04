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
	OperatorBoard(ctx context.Context, app string, id int64, periodStartMs int64, limit int, cursor string) (activity.Board, error)
	Completions(ctx context.Context, app string, id int64) (activity.Completions, error)
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
// NOT_FOUND. And an app's operators' reads of the same (operations
// getAdminActivityBoard and getActivityCompletions), whatever regions the
// activity names:
//
//   - GET /admin/v1/activities/:activity_id/board?limit=&cursor=&period_start_ms=:
//     the board of the current period, or of the one starting at
//     period_start_ms (a task's past day or week), without a place of the
//     caller's;
//   - GET /admin/v1/activities/:activity_id/completions: a task's counts
//     per period (participants, reached, paid, coins paid).
func ActivityBoardRoutes(b ActivityBoards) Mount {
	h := &activityBoardHandlers{b: b}
	return func(rt Routers) {
		rt.API.Get("/v1/activities/:activity_id/board", h.board)
		rt.API.Get("/v1/activities/:activity_id/progress", h.progress)
		rt.Admin.Get("/v1/activities/:activity_id/board", h.operatorBoard)
		rt.Admin.Get("/v1/activities/:activity_id/completions", h.completions)
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
	limit, err := boardLimit(c)
	if err != nil {
		return err
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

// boardLimit reads ?limit= of a board read: 1..activity.MaxBoardLimit,
// default activity.DefaultBoardLimit.
func boardLimit(c *fiber.Ctx) (int, error) {
	s := c.Query("limit")
	if s == "" {
		return activity.DefaultBoardLimit, nil
	}
	limit, err := strconv.Atoi(s)
	if err != nil || limit < 1 || limit > activity.MaxBoardLimit {
		return 0, apperr.Invalid("limit", "must be 1..%d", activity.MaxBoardLimit)
	}
	return limit, nil
}

func (h *activityBoardHandlers) operatorBoard(c *fiber.Ctx) error {
	id, err := settlementActivityID(c)
	if err != nil {
		return err
	}
	limit, err := boardLimit(c)
	if err != nil {
		return err
	}
	cursor := c.Query("cursor")
	if len(cursor) > 512 {
		return apperr.Invalid("cursor", "at most 512 characters")
	}
	var period int64
	if s := c.Query("period_start_ms"); s != "" {
		if period, err = strconv.ParseInt(s, 10, 64); err != nil || period <= 0 {
			return apperr.Invalid("period_start_ms", "must be a period's start, Unix ms (periods of the completions)")
		}
	}
	board, err := h.b.OperatorBoard(c.UserContext(), PrincipalOf(c).AppCode, id, period, limit, cursor)
	if err != nil {
		return err
	}
	return OK(c, board)
}

func (h *activityBoardHandlers) completions(c *fiber.Ctx) error {
	id, err := settlementActivityID(c)
	if err != nil {
		return err
	}
	out, err := h.b.Completions(c.UserContext(), PrincipalOf(c).AppCode, id)
	if err != nil {
		return err
	}
	return OK(c, out)
}
