package main

import (
	"context"
	"fmt"

	"voiceroom/gateway"
	"voiceroom/regions"
)

// wireRoles builds the components of each role serve runs and adds their
// workers, routes and closers to d. The HTTP edge (health, readiness,
// metrics) runs in every process; the api role adds the /api and /admin routes.
func wireRoles(ctx context.Context, d *deps) error {
	if d.cfg.hasRole(roleAPI) {
		regionSvc, err := newRegions(ctx, d)
		if err != nil {
			return err
		}
		d.mounts = append(d.mounts, gateway.RegionRoutes(regionSvc))
		d.closers = append(d.closers, regionSvc.Close)
	}
	return nil
}

// newRegions builds the regions service: countries, regions and the cached
// user → region lookup that room creation and listing use.
func newRegions(ctx context.Context, d *deps) (*regions.Service, error) {
	svc, err := regions.New(ctx, d.db, d.log.With("component", "regions"), d.reg, d.cfg.regions())
	if err != nil {
		return nil, fmt.Errorf("regions: %w", err)
	}
	return svc, nil
}
