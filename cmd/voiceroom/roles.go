package main

import (
	"context"
	"fmt"
	"time"

	"voiceroom/gateway"
	"voiceroom/regions"
	"voiceroom/rooms"
	"voiceroom/wallet"
)

// wireRoles builds the components of each role serve runs and adds their
// workers, routes and closers to d. The HTTP edge (health and readiness
// on both listeners, metrics on the operators') runs in every process; the
// api role adds the /api and /admin routes.
//
// Room commands are served by the process that owns the rooms: the room
// routes are mounted where api and rooms run together (routing commands
// between nodes comes with room partitioning).
func wireRoles(ctx context.Context, d *deps) error {
	api, roomsRole := d.cfg.hasRole(roleAPI), d.cfg.hasRole(roleRooms)
	var regionSvc *regions.Service
	if api || roomsRole {
		var err error
		if regionSvc, err = newRegions(ctx, d); err != nil {
			return err
		}
		d.closers = append(d.closers, regionSvc.Close)
	}
	if api {
		d.mounts = append(d.mounts, gateway.RegionRoutes(regionSvc), gateway.WalletRoutes(wallet.New(d.db, time.Now)))
	}
	if err := wireOutbox(d); err != nil {
		return err
	}
	if err := wireDLQ(d); err != nil {
		return err
	}
	if err := wireRoomList(d, regionSvc); err != nil {
		return err
	}
	if roomsRole {
		svc, err := rooms.New(d.db, regionSvc, regionSvc, d.fastPath, d.cfg.rooms(), d.log, d.reg, time.Now)
		if err != nil {
			return fmt.Errorf("rooms: %w", err)
		}
		d.workers = append(d.workers, worker{name: "rooms", run: svc.Run})
		// After HTTP has stopped (no command in flight), before the fast
		// path stops: closers run in reverse order.
		d.closers = append(d.closers, func() {
			d.log.Info("shutdown: rooms committer")
			svc.Close()
		})
		if api {
			d.mounts = append(d.mounts, gateway.RoomRoutes(svc))
			cb, err := imCallbackMount(d, svc)
			if err != nil {
				return err
			}
			d.mounts = append(d.mounts, cb)
		}
	}
	return wireIMBridge(d)
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
