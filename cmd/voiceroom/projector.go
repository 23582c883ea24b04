package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"voiceroom"
	"voiceroom/bus"
	"voiceroom/gateway"
	"voiceroom/listprojector"
	"voiceroom/regions"
	"voiceroom/roomevent"
	"voiceroom/roomlist"
	"voiceroom/rooms"
)

// listVars are the variables that set the fields of the room list's two
// Configs (listprojector.Config and roomlist.Config; no field name means
// two things).
var listVars = map[string]string{
	"FetchBatch": "VOICEROOM_PROJECTOR_FETCH_BATCH", "RedisTimeout": "VOICEROOM_LIST_REDIS_TIMEOUT",
	"CardTTL": "VOICEROOM_LIST_CARD_TTL", "ReconcileEvery": "VOICEROOM_LIST_RECONCILE_EVERY",
	"CursorSecret": "VOICEROOM_JWT_SECRET", "FreezeEvery": "VOICEROOM_LIST_FREEZE_EVERY",
	"ChainTTL": "VOICEROOM_LIST_CHAIN_TTL", "ChainDepth": "VOICEROOM_LIST_CHAIN_DEPTH",
	"MaxFrozenRooms": "VOICEROOM_LIST_MAX_FROZEN_ROOMS", "SearchMaxResults": "VOICEROOM_LIST_SEARCH_MAX_RESULTS",
	"NearCacheCards": "VOICEROOM_LIST_NEAR_CACHE_CARDS", "NearCacheMaxAge": "VOICEROOM_LIST_NEAR_CACHE_MAX_AGE",
	"CountsDelay": "VOICEROOM_LIST_COUNTS_DELAY", "MaxHeld": "VOICEROOM_PROJECTOR_MAX_HELD",
}

// listProjector is the configuration of the read model's writers: the
// projector, the reconcile job and the Redis mirror.
func (c *config) listProjector() listprojector.Config {
	countsDelay := c.ListCountsDelay
	if countsDelay <= 0 {
		countsDelay = -1 // off; the package's 0 is its default
	}
	return listprojector.Config{
		FetchBatch:     c.ProjectorFetchBatch,
		CountsDelay:    countsDelay,
		MaxHeld:        c.ProjectorMaxHeld,
		CardTTL:        c.ListCardTTL,
		ReconcileEvery: c.ListReconcileEvery,
	}
}

// roomList is the configuration of the list query; the cursor key is
// derived from the server's key (serverKey), so every api process shares
// it.
func (c *config) roomList(secret []byte) roomlist.Config {
	var cursorKey []byte
	if secret != nil {
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte("voiceroom room list cursor"))
		cursorKey = mac.Sum(nil)
	}
	return roomlist.Config{
		RedisTimeout:     c.ListRedisTimeout,
		CursorSecret:     cursorKey,
		FreezeEvery:      c.ListFreezeEvery,
		ChainTTL:         c.ListChainTTL,
		ChainDepth:       c.ListChainDepth,
		MaxFrozenRooms:   c.ListMaxFrozenRooms,
		SearchMaxResults: c.ListSearchMaxResult,
		NearCacheCards:   c.ListNearCacheCards,
		NearCacheMaxAge:  c.ListNearCacheMaxAge,
	}
}

// redisClient is d.redis, nil without Redis.
func (d *deps) redisClient() redis.UniversalClient { return d.redis }

// wireRoomList adds the room list of the roles serve runs:
//
//   - projector: the projector on the durable listprojector and the
//     reconcile job, workers both;
//   - api: GET /api/v1/rooms and the pin and hide routes (package
//     roomlist), reading the read model and writing Redis through its
//     mirror; regionSvc is the caller's region lookup.
//
// Both packages' series are registered in either role, so every room list
// series exists in every process that serves any part of the list.
func wireRoomList(d *deps, regionSvc *regions.Service) error {
	proj, api := d.cfg.hasRole(roleProjector), d.cfg.hasRole(roleAPI)
	if !proj && !api {
		return nil
	}
	pcfg := d.cfg.listProjector()
	pm, err := listprojector.NewMetrics(d.reg)
	if err != nil {
		return err
	}
	qm, err := roomlist.NewMetrics(d.reg)
	if err != nil {
		return err
	}
	log := d.log // each room list component names itself
	if proj {
		bm, err := bus.NewMetrics(d.reg)
		if err != nil {
			return err
		}
		p, err := listprojector.New(d.db, d.redisClient(), d.nats.JetStream(), d.cfg.consumerRun(bus.DurableListProjector),
			bm, pcfg, log, pm)
		if err != nil {
			return fmt.Errorf("list projector: %w", err)
		}
		d.workers = append(d.workers, worker{name: "list-projector", run: p.Run})
		r, err := listprojector.NewReconciler(d.db, d.redisClient(), pcfg, log, pm)
		if err != nil {
			return fmt.Errorf("list reconciler: %w", err)
		}
		d.workers = append(d.workers, worker{name: "list-reconcile", run: r.Run})
	}
	if api {
		mirror, err := listprojector.NewMirror(d.db, d.redisClient(), pcfg, pm)
		if err != nil {
			return fmt.Errorf("room list mirror: %w", err)
		}
		qcfg := d.cfg.roomList(d.serverKey)
		lister, err := roomlist.NewLister(d.db, mirror, qcfg, log, qm)
		if err != nil {
			return fmt.Errorf("room list: %w", err)
		}
		lister.SetReads(d.reads) // the MySQL path's order and pins may lag
		// Pins and hides count their actions in the rooms service's
		// voiceroom_rooms_moderation_actions_total (one collector on d.reg), whether
		// or not this process runs the rooms role.
		moderation, err := rooms.NewModerationCounter(d.reg)
		if err != nil {
			return err
		}
		pins, err := roomlist.NewPins(d.db, moderation, qcfg)
		if err != nil {
			return fmt.Errorf("room pins: %w", err)
		}
		pins.SetReads(d.reads)
		hides, err := roomlist.NewHides(d.db, lister, moderation, qcfg)
		if err != nil {
			return fmt.Errorf("room hides: %w", err)
		}
		hides.SetReads(d.reads)
		d.mounts = append(d.mounts, gateway.RoomListRoutes(lister, pins, regionSvc), gateway.HideRoutes(hides))
		d.workers = append(d.workers, worker{name: "list-near-cache", run: lister.Run})
	}
	return nil
}

// projectorCmd runs "projector rebuild [--app APP]": it regenerates
// room_list_entries (and the Redis cache, when VOICEROOM_REDIS_ADDR is
// set) from MySQL alone and prints what it did as JSON.
func projectorCmd(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "rebuild" {
		return fmt.Errorf("%w: projector rebuild [--app APP]", errUsage)
	}
	fs := flag.NewFlagSet("projector rebuild", flag.ContinueOnError)
	app := fs.String("app", "", "rebuild only this app (default: every app)")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *app != "" && !voiceroom.ValidAppCode(*app) {
		return fmt.Errorf("%w: --app %q is not a valid app code", errUsage, *app)
	}
	cfg, log, db, err := oneShot(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	rdb, err := cfg.redisClient()
	if err != nil {
		return err
	}
	if rdb != nil {
		defer rdb.Close()
	}
	res, err := listprojector.Rebuild(ctx, db, rdb, cfg.listProjector(), *app, roomCards(db), log)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// roomCards is the list rebuild's way to recover a room's card from MySQL
// (the rooms package's), wired here so the list never imports rooms.
func roomCards(db *sql.DB) listprojector.CardLoader {
	return func(ctx context.Context, app, room string) (roomevent.Card, error) {
		return rooms.LoadCard(ctx, db, app, room)
	}
}
