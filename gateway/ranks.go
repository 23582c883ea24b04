package gateway

import (
	"context"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"voiceroom/apperr"
	"voiceroom/roomranks"
)

// Ranks reads rooms' contribution ranks; *roomranks.Reader is one.
type Ranks interface {
	Read(ctx context.Context, q roomranks.Query) (roomranks.Page, error)
}

var _ Ranks = (*roomranks.Reader)(nil)

// RankRoutes returns the Mount of GET /api/v1/rooms/:room_id/ranks: a
// room's daily or weekly rank by sender or by receiver, with the caller's
// place (docs/openapi.yaml, operation getRoomRanks). It needs no room
// cell: ranks are read from Redis or MySQL.
func RankRoutes(r Ranks) Mount {
	h := &rankHandlers{r: r}
	return func(rt Routers) {
		rt.API.Get("/v1/rooms/:room_id/ranks", h.ranks)
	}
}

type rankHandlers struct {
	r Ranks
}

func (h *rankHandlers) ranks(c *fiber.Ctx) error {
	by, err := roomranks.ParseBy(c.Query("by"))
	if err != nil {
		return err
	}
	period, err := roomranks.ParsePeriod(c.Query("period"))
	if err != nil {
		return err
	}
	limit := roomranks.DefaultLimit
	if s := c.Query("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > roomranks.MaxLimit {
			return apperr.Invalid("limit", "must be 1..%d", roomranks.MaxLimit)
		}
	}
	p := PrincipalOf(c)
	page, err := h.r.Read(c.UserContext(), roomranks.Query{AppCode: p.AppCode, RoomID: c.Params("room_id"), UserID: p.UserID,
		By: by, Period: period, Limit: limit})
	if err != nil {
		return err
	}
	return OK(c, page)
}
