package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
	_ "time/tzdata" // the apps' time zones resolve in images without a zone database

	"voiceroom"
	"voiceroom/bus"
	"voiceroom/gateway"
	"voiceroom/roomranks"
)

// RanksSettings are the variables of the rooms' contribution ranks, a
// part of config.
type RanksSettings struct {
	// AppTimeZones is "app=Zone,app=Zone" (IANA names); other apps use UTC.
	AppTimeZones      string          `env:"VOICEROOM_APP_TIMEZONES"`
	RanksExpireAfter  time.Duration   `env:"VOICEROOM_RANKS_EXPIRE_AFTER" envDefault:"24h"`
	RanksRedisTimeout time.Duration   `env:"VOICEROOM_RANKS_REDIS_TIMEOUT" envDefault:"100ms"`
	RanksAckWait      time.Duration   `env:"VOICEROOM_RANKS_ACK_WAIT" envDefault:"30s"`
	RanksBackOff      []time.Duration `env:"VOICEROOM_RANKS_BACKOFF" envDefault:"1s" envSeparator:","`
	RanksMaxDeliver   int             `env:"VOICEROOM_RANKS_MAX_DELIVER" envDefault:"-1"`
	RanksMaxAckPend   int             `env:"VOICEROOM_RANKS_MAX_ACK_PENDING" envDefault:"5000"`
	RanksConcurrency  int             `env:"VOICEROOM_RANKS_CONCURRENCY" envDefault:"4"`
}

// ranksVars are the variables that set roomranks.Config's fields.
var ranksVars = map[string]string{
	"TimeZones": "VOICEROOM_APP_TIMEZONES", "ExpireAfter": "VOICEROOM_RANKS_EXPIRE_AFTER",
	"RedisTimeout": "VOICEROOM_RANKS_REDIS_TIMEOUT",
}

// timeZones reads VOICEROOM_APP_TIMEZONES: comma-separated app=Zone pairs,
// spaces around each part ignored, each app named once.
func (s RanksSettings) timeZones() (map[string]string, error) {
	zones := map[string]string{}
	for _, pair := range strings.Split(s.AppTimeZones, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		app, zone, ok := strings.Cut(pair, "=")
		app, zone = strings.TrimSpace(app), strings.TrimSpace(zone)
		if !ok || app == "" || zone == "" {
			return nil, badVar("VOICEROOM_APP_TIMEZONES", "want app=Zone pairs separated by commas (demo=Asia/Shanghai), got %q", pair)
		}
		if _, dup := zones[app]; dup {
			return nil, badVar("VOICEROOM_APP_TIMEZONES", "app %s named twice", app)
		}
		zones[app] = zone
	}
	return zones, nil
}

// ranks is the configuration of the ranks' reader, projector and rebuild.
func (s RanksSettings) ranks() roomranks.Config {
	zones, _ := s.timeZones() // validate reports the error
	return roomranks.Config{TimeZones: zones, ExpireAfter: s.RanksExpireAfter, RedisTimeout: s.RanksRedisTimeout}
}

// validate checks the variables without changing s; errors go to errs.
func (s RanksSettings) validate(errs *varErrors) {
	if _, err := s.timeZones(); err != nil {
		var ce *configError
		if errors.As(err, &ce) {
			errs.add(ce)
		}
		return
	}
	errs.of(s.ranks().Validate(), "ranks", ranksVars)
	if s.RanksAckWait < time.Second {
		errs.add(&configError{Var: "VOICEROOM_RANKS_ACK_WAIT", Msg: fmt.Sprintf("want at least 1s, got %v", s.RanksAckWait)})
	}
	if s.RanksMaxDeliver != -1 && s.RanksMaxDeliver <= 0 {
		errs.add(&configError{Var: "VOICEROOM_RANKS_MAX_DELIVER", Msg: fmt.Sprintf("want -1 (no limit) or a positive count, got %d", s.RanksMaxDeliver)})
	}
}

// wireRanks adds the rooms' ranks of the roles serve runs:
//
//   - projector: the projector on the durable roomranks, a worker that
//     keeps the Redis sets current (without Redis it only acks);
//   - api: GET /api/v1/rooms/:room_id/ranks, read from Redis, else MySQL.
//
// The series are registered in either role.
func wireRanks(d *deps) error {
	proj, api := d.cfg.hasRole(roleProjector), d.cfg.hasRole(roleAPI)
	if !proj && !api {
		return nil
	}
	m, err := roomranks.NewMetrics(d.reg)
	if err != nil {
		return err
	}
	cfg := d.cfg.ranks()
	if proj {
		bm, err := bus.NewMetrics(d.reg)
		if err != nil {
			return err
		}
		p, err := roomranks.NewProjector(d.redisClient(), d.nats.JetStream(), d.cfg.consumerRun(bus.DurableRoomRanks), bm, cfg, d.log, m)
		if err != nil {
			return fmt.Errorf("ranks projector: %w", err)
		}
		d.workers = append(d.workers, worker{name: "ranks-projector", run: p.Run})
	}
	if api {
		r, err := roomranks.NewReader(d.reads, d.redisClient(), cfg, d.log, m)
		if err != nil {
			return fmt.Errorf("ranks: %w", err)
		}
		d.mounts = append(d.mounts, gateway.RankRoutes(r))
	}
	return nil
}

// ranksCmd runs "ranks rebuild --app APP [--room ROOM]": it writes the
// current day's and week's sets of the app's rooms with a gift this week
// (or of one room) from MySQL into Redis and prints what it did as JSON.
func ranksCmd(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "rebuild" {
		return fmt.Errorf("%w: ranks rebuild --app APP [--room ROOM]", errUsage)
	}
	fs := flag.NewFlagSet("ranks rebuild", flag.ContinueOnError)
	app := fs.String("app", "", "the app whose ranks to rebuild (required)")
	room := fs.String("room", "", "rebuild only this room (default: every room with a gift this week)")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if !voiceroom.ValidAppCode(*app) {
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
	if rdb == nil {
		return badVar("VOICEROOM_REDIS_ADDR", "empty: there are no ranks in Redis to rebuild")
	}
	defer rdb.Close()
	res, err := roomranks.Rebuild(ctx, db, rdb, cfg.ranks(), *app, *room, log)
	if errors.Is(err, roomranks.ErrNoRoom) {
		return fmt.Errorf("%w: --room: %v", errUsage, err)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
