package gateway

import (
	"context"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"voiceroom/apperr"
	"voiceroom/roomlist"
)

// UserRegions finds a user's region (the regions service, through its
// cache). It fails closed: an error fails the request.
type UserRegions interface {
	UserRegion(ctx context.Context, appCode string, userID int64) (displayUserID string, regionID int64, err error)
}

// RoomList answers the list query; *roomlist.Lister is one.
type RoomList interface {
	List(ctx context.Context, req roomlist.ListRequest) (roomlist.Page, error)
}

var _ RoomList = (*roomlist.Lister)(nil)

// Pins are the operators' region pins; *roomlist.Pins is one.
type Pins interface {
	Create(ctx context.Context, appCode, operator string, in roomlist.NewPin) (roomlist.Pin, error)
	Delete(ctx context.Context, appCode, operator string, pinID int64, reason string) error
	List(ctx context.Context, appCode string, regionID int64) ([]roomlist.Pin, error)
}

var _ Pins = (*roomlist.Pins)(nil)

// RoomListRoutes mounts GET /api/v1/rooms (the caller's region list and
// search), GET /admin/v1/rooms (a region's list and search as its users
// get them, for operators) and the operators' pin routes. On /api the
// region is the caller's own, read through users from the token's app and
// user: no parameter chooses it, and a failed lookup fails the request.
func RoomListRoutes(lister RoomList, pins Pins, users UserRegions) Mount {
	h := roomListHandlers{lister: lister, pins: pins, users: users}
	return func(r Routers) {
		r.API.Get("/v1/rooms", h.list)
		r.Admin.Get("/v1/rooms", h.regionList)
		r.Admin.Post("/v1/pins", h.createPin)
		r.Admin.Delete("/v1/pins/:pin_id", h.deletePin)
		r.Admin.Get("/v1/pins", h.listPins)
	}
}

type roomListHandlers struct {
	lister RoomList
	pins   Pins
	users  UserRegions
}

func (h roomListHandlers) list(c *fiber.Ctx) error {
	p := PrincipalOf(c)
	_, region, err := h.users.UserRegion(c.UserContext(), p.AppCode, p.UserID)
	if err != nil {
		return err
	}
	return h.page(c, region)
}

// regionList answers the list of the region visible_region_id names,
// exactly as a user of that region gets it.
func (h roomListHandlers) regionList(c *fiber.Ctx) error {
	region, err := regionQuery(c)
	if err != nil {
		return err
	}
	return h.page(c, region)
}

// page answers one page of region's list, read from the query's tab,
// limit, cursor and search.
func (h roomListHandlers) page(c *fiber.Ctx, region int64) error {
	limit := 0
	if s := c.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return apperr.Invalid("limit", "must be an integer 1..%d", roomlist.MaxLimit)
		}
		limit = n
	}
	page, err := h.lister.List(c.UserContext(), roomlist.ListRequest{
		AppCode:  PrincipalOf(c).AppCode,
		RegionID: region,
		Tab:      c.Query("tab"),
		Limit:    limit,
		Cursor:   c.Query("cursor"),
		Query:    c.Query("query"),
	})
	if err != nil {
		return err
	}
	return OK(c, page)
}

// regionQuery reads the optional visible_region_id query parameter: 0
// (GLOBAL) when absent.
func regionQuery(c *fiber.Ctx) (int64, error) {
	region, err := strconv.ParseInt(c.Query("visible_region_id", "0"), 10, 64)
	if err != nil || region < 0 {
		return 0, apperr.Invalid("visible_region_id", "must be a region id (0 for GLOBAL)")
	}
	return region, nil
}

func (h roomListHandlers) createPin(c *fiber.Ctx) error {
	var req struct {
		RoomID          string `json:"room_id"`
		VisibleRegionID int64  `json:"visible_region_id"`
		Weight          int64  `json:"weight"`
		ExpiresAtMs     int64  `json:"expires_at_ms"`
		Reason          string `json:"reason"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	p := PrincipalOf(c)
	pin, err := h.pins.Create(c.UserContext(), p.AppCode, p.Operator(), roomlist.NewPin{
		RoomID: req.RoomID, VisibleRegionID: req.VisibleRegionID, Weight: req.Weight, ExpiresAtMs: req.ExpiresAtMs,
		Reason: req.Reason,
	})
	if err != nil {
		return err
	}
	return OK(c, pin)
}

func (h roomListHandlers) deletePin(c *fiber.Ctx) error {
	id, err := pathID(c, "pin_id")
	if err != nil {
		return err
	}
	reason, err := optionalReason(c)
	if err != nil {
		return err
	}
	p := PrincipalOf(c)
	if err := h.pins.Delete(c.UserContext(), p.AppCode, p.Operator(), id, reason); err != nil {
		return err
	}
	return OK(c, fiber.Map{"pin_id": id, "status": "removed"})
}

func (h roomListHandlers) listPins(c *fiber.Ctx) error {
	region, err := regionQuery(c)
	if err != nil {
		return err
	}
	list, err := h.pins.List(c.UserContext(), PrincipalOf(c).AppCode, region)
	if err != nil {
		return err
	}
	return OK(c, fiber.Map{"pins": list})
}
