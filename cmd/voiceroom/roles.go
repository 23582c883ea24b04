package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"voiceroom/activity"
	"voiceroom/console"
	"voiceroom/gateway"
	"voiceroom/regions"
	"voiceroom/roomcluster"
	"voiceroom/rooms"
	"voiceroom/wallet"
)

// wireRoles builds the components of each role serve runs and adds their
// workers, routes and closers to d. The HTTP edge (health and readiness
// on both listeners, metrics on the operators') runs in every process; the
// api role adds the /api and /admin routes.
//
// Room commands reach the rooms role through a roomcluster.Router: in
// process for the partitions this process's rooms node serves (all of
// them when one process runs every role), over NATS to their owner for
// the others.
func wireRoles(ctx context.Context, d *deps) error {
	if err := wireAuth(ctx, d); err != nil {
		return err
	}
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
		d.mounts = append(d.mounts, gateway.RegionRoutes(regionSvc), gateway.WalletRoutes(wallet.New(d.db, time.Now)),
			gateway.ActivitySettlementRoutes(activity.NewSettlements(d.db, time.Now)))
		if err := wireActivityAPI(d, regionSvc); err != nil {
			return fmt.Errorf("activities: %w", err)
		}
		if d.cfg.Console {
			m, err := consoleMount(d)
			if err != nil {
				return err
			}
			d.mounts = append(d.mounts, m)
		}
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
	if err := wireRanks(d); err != nil {
		return err
	}
	if err := wireActivityScoring(d, regionSvc); err != nil {
		return err
	}
	var cm *roomcluster.Metrics
	if api || roomsRole {
		var err error
		if cm, err = roomcluster.NewMetrics(d.reg); err != nil {
			return err
		}
	}
	var svc *rooms.Service
	var node *roomcluster.Node
	if roomsRole {
		var err error
		if svc, node, err = wireRoomsNode(ctx, d, regionSvc, cm); err != nil {
			return err
		}
	}
	if api {
		var local rooms.Rooms
		rec := rooms.NewRecords(d.db, time.Now)
		rec.SetReads(d.reads) // the audit trail may lag
		var records rooms.RecordKeeper = rec
		if svc != nil {
			local, records = svc, svc
		}
		router, err := roomcluster.NewRouter(ctx, d.nats.JetStream(), d.cfg.roomCluster(), node, local, records, d.log, cm)
		if err != nil {
			return clusterErr("rooms router", err)
		}
		d.closers = append(d.closers, router.Close)
		d.mounts = append(d.mounts, gateway.RoomRoutes(router))
		if err := wirePK(d, router); err != nil {
			return err
		}
		cb, err := imCallbackMount(d, router)
		if err != nil {
			return err
		}
		d.mounts = append(d.mounts, cb)
	}
	if err := wireWebhooks(ctx, d); err != nil {
		return err
	}
	return wireIMBridge(d)
}

// consoleMount is the operators' console (package console) under
// /console: it acts only through the server's own /admin and /platform
// routes. Its form key is derived from the server's key (serverKey), so
// that every api process takes the forms another rendered.
func consoleMount(d *deps) (gateway.Mount, error) {
	mac := hmac.New(sha256.New, d.serverKey)
	mac.Write([]byte("voiceroom console form key"))
	cfg := console.Config{Key: mac.Sum(nil)}
	api := gateway.NewLoopback()
	c, err := console.New(api, cfg, d.log.With("component", "console"), time.Now)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	return gateway.ConsoleRoutes(c, api), nil
}

// wireRoomsNode builds the rooms service and the node that holds its
// partitions' leases and answers routed requests (the micro service).
// Workers: the node (leases; at shutdown it hands every partition over)
// and the service's sweeper. Closers, run after HTTP has stopped: the
// micro service, then the committer.
func wireRoomsNode(ctx context.Context, d *deps, regionSvc *regions.Service, cm *roomcluster.Metrics) (*rooms.Service, *roomcluster.Node, error) {
	svc, err := rooms.New(d.db, regionSvc, regionSvc, d.fastPath, d.cfg.rooms(), d.log, d.reg, time.Now)
	if err != nil {
		return nil, nil, fmt.Errorf("rooms: %w", err)
	}
	svc.SetReads(d.reads) // the audit trail may lag; commands and recovery read d.db
	node, err := roomcluster.NewNode(ctx, d.nats.JetStream(), d.cfg.roomCluster(), d.cfg.NodeID, svc, svc.Loaded, d.log, cm)
	if err != nil {
		svc.Close()
		return nil, nil, clusterErr("rooms node", err)
	}
	svc.SetOwnership(node)
	srv, err := roomcluster.Serve(d.nats.NATS(), node, svc, d.log, cm)
	if err != nil {
		svc.Close()
		return nil, nil, err
	}
	d.workers = append(d.workers, worker{name: "rooms", run: svc.Run}, worker{name: "rooms-node", run: node.Run})
	// Closers run in reverse order, after HTTP has stopped (no command in
	// flight) and before the fast path stops.
	d.closers = append(d.closers, func() {
		d.log.Info("shutdown: rooms committer")
		svc.Close()
	}, func() {
		d.log.Info("shutdown: rooms leases")
		node.Close()
	}, func() {
		d.log.Info("shutdown: rooms micro service")
		srv.Stop()
	})
	return svc, node, nil
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

// clusterErr names the variable of a setting the deployment records
// otherwise (a bad variable: exit 2), else wraps err with what failed.
func clusterErr(what string, err error) error {
	switch {
	case errors.Is(err, roomcluster.ErrPartitionsChanged):
		return badVar("VOICEROOM_ROOMS_PARTITIONS", "%v", err)
	case errors.Is(err, roomcluster.ErrLeaseTTLChanged):
		return badVar("VOICEROOM_ROOMS_LEASE_TTL", "%v", err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
