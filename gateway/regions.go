package gateway

import (
	"context"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"voiceroom/apperr"
	"voiceroom/regions"
)

// Regions keeps users' profiles and regions and the operators' regions and
// countries; *regions.Service is one.
type Regions interface {
	Profile(ctx context.Context, appCode string, userID int64) (regions.Profile, error)
	PutProfile(ctx context.Context, appCode string, userID int64, upd regions.ProfileUpdate) (regions.Profile, error)
	CreateRegion(ctx context.Context, appCode, code, name string) (regions.Region, error)
	UpdateRegion(ctx context.Context, appCode string, regionID int64, patch regions.RegionPatch) (regions.Region, error)
	ListRegions(ctx context.Context, appCode string) (regions.RegionList, error)
	CreateCountry(ctx context.Context, appCode, code, name string, regionID int64) (regions.Country, error)
	UpdateCountry(ctx context.Context, appCode, code string, patch regions.CountryPatch) (regions.Country, error)
	Rebuild(ctx context.Context, appCode, operator string) (regions.RebuildResult, error)
	SetUserRegion(ctx context.Context, appCode string, userID, regionID int64, operator, reason string) (regions.Profile, error)
	UserRegionInfo(ctx context.Context, appCode string, userID int64) (regions.UserRegionInfo, error)
	ClearUserRegion(ctx context.Context, appCode string, userID int64, operator, reason string) (regions.Profile, error)
}

var _ Regions = (*regions.Service)(nil)

// RegionRoutes mounts the profile routes of app users and the operators'
// region, country and user-region routes (docs/openapi.yaml, tags users and
// admin regions). app_code and the user id
// come only from the token; an admin acts on the app of their token, so ids of
// another app are NOT_FOUND.
func RegionRoutes(svc Regions) Mount {
	h := regionHandlers{svc: svc}
	return func(r Routers) {
		r.API.Put("/v1/users/me", h.putMe)
		r.API.Get("/v1/users/me", h.getMe)

		r.Admin.Post("/v1/regions", h.createRegion)
		r.Admin.Patch("/v1/regions/:region_id", h.updateRegion)
		r.Admin.Get("/v1/regions", h.listRegions)
		r.Admin.Post("/v1/countries", h.createCountry)
		r.Admin.Patch("/v1/countries/:country_code", h.updateCountry)
		r.Admin.Post("/v1/users/region-rebuild", h.rebuild)
		r.Admin.Put("/v1/users/:user_id/region", h.setUserRegion)
		r.Admin.Get("/v1/users/:user_id/region", h.userRegionInfo)
		r.Admin.Delete("/v1/users/:user_id/region", h.clearUserRegion)
	}
}

type regionHandlers struct {
	svc Regions
}

// putMeRequest has no region field on purpose: a region_id a client sends is
// dropped by the decoder (Bind ignores unknown fields).
type putMeRequest struct {
	DisplayUserID *string `json:"display_user_id"`
	Country       *string `json:"country"`
}

func (h regionHandlers) putMe(c *fiber.Ctx) error {
	var req putMeRequest
	if err := Bind(c, &req); err != nil {
		return err
	}
	p := PrincipalOf(c)
	prof, err := h.svc.PutProfile(c.UserContext(), p.AppCode, p.UserID, regions.ProfileUpdate{
		DisplayUserID: req.DisplayUserID,
		Country:       req.Country,
	})
	if err != nil {
		return err
	}
	return OK(c, prof)
}

func (h regionHandlers) getMe(c *fiber.Ctx) error {
	p := PrincipalOf(c)
	prof, err := h.svc.Profile(c.UserContext(), p.AppCode, p.UserID)
	if err != nil {
		return err
	}
	return OK(c, prof)
}

func (h regionHandlers) createRegion(c *fiber.Ctx) error {
	var req struct {
		RegionCode string `json:"region_code"`
		Name       string `json:"name"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	r, err := h.svc.CreateRegion(c.UserContext(), PrincipalOf(c).AppCode, req.RegionCode, req.Name)
	if err != nil {
		return err
	}
	return OK(c, r)
}

func (h regionHandlers) updateRegion(c *fiber.Ctx) error {
	id, err := pathID(c, "region_id")
	if err != nil {
		return err
	}
	var req struct {
		Status *string `json:"status"` // a plain string, so a wrong type names no Go type
		Name   *string `json:"name"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	patch := regions.RegionPatch{Name: req.Name}
	if req.Status != nil {
		st := regions.RegionStatus(*req.Status)
		patch.Status = &st
	}
	r, err := h.svc.UpdateRegion(c.UserContext(), PrincipalOf(c).AppCode, id, patch)
	if err != nil {
		return err
	}
	return OK(c, r)
}

func (h regionHandlers) listRegions(c *fiber.Ctx) error {
	list, err := h.svc.ListRegions(c.UserContext(), PrincipalOf(c).AppCode)
	if err != nil {
		return err
	}
	return OK(c, list)
}

func (h regionHandlers) createCountry(c *fiber.Ctx) error {
	var req struct {
		CountryCode string `json:"country_code"`
		Name        string `json:"name"`
		RegionID    int64  `json:"region_id"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	country, err := h.svc.CreateCountry(c.UserContext(), PrincipalOf(c).AppCode, req.CountryCode, req.Name, req.RegionID)
	if err != nil {
		return err
	}
	return OK(c, country)
}

func (h regionHandlers) updateCountry(c *fiber.Ctx) error {
	var req struct {
		Enabled  *bool   `json:"enabled"`
		RegionID *int64  `json:"region_id"`
		Name     *string `json:"name"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	country, err := h.svc.UpdateCountry(c.UserContext(), PrincipalOf(c).AppCode, c.Params("country_code"),
		regions.CountryPatch{Enabled: req.Enabled, RegionID: req.RegionID, Name: req.Name})
	if err != nil {
		return err
	}
	return OK(c, country)
}

func (h regionHandlers) rebuild(c *fiber.Ctx) error {
	p := PrincipalOf(c)
	res, err := h.svc.Rebuild(c.UserContext(), p.AppCode, p.Operator())
	if err != nil {
		return err
	}
	return OK(c, res)
}

func (h regionHandlers) setUserRegion(c *fiber.Ctx) error {
	userID, err := pathID(c, "user_id")
	if err != nil {
		return err
	}
	var req struct {
		RegionID *int64 `json:"region_id"`
		Reason   string `json:"reason"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	if req.RegionID == nil {
		// Required, not defaulted: 0 is a real choice (GLOBAL), so an
		// omitted field must not silently mean it.
		return apperr.Invalid("region_id", "is required (0 for GLOBAL)")
	}
	p := PrincipalOf(c)
	prof, err := h.svc.SetUserRegion(c.UserContext(), p.AppCode, userID, *req.RegionID, p.Operator(), req.Reason)
	if err != nil {
		return err
	}
	return OK(c, prof)
}

func (h regionHandlers) userRegionInfo(c *fiber.Ctx) error {
	userID, err := pathID(c, "user_id")
	if err != nil {
		return err
	}
	info, err := h.svc.UserRegionInfo(c.UserContext(), PrincipalOf(c).AppCode, userID)
	if err != nil {
		return err
	}
	return OK(c, info)
}

func (h regionHandlers) clearUserRegion(c *fiber.Ctx) error {
	userID, err := pathID(c, "user_id")
	if err != nil {
		return err
	}
	var req struct {
		Reason string `json:"reason"`
	}
	if err := Bind(c, &req); err != nil {
		return err
	}
	p := PrincipalOf(c)
	prof, err := h.svc.ClearUserRegion(c.UserContext(), p.AppCode, userID, p.Operator(), req.Reason)
	if err != nil {
		return err
	}
	return OK(c, prof)
}

// pathID parses a positive int64 path parameter, naming it when it is not one.
func pathID(c *fiber.Ctx, name string) (int64, error) {
	id, err := strconv.ParseInt(c.Params(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, apperr.Invalid(name, "must be a positive integer")
	}
	return id, nil
}
