package main

import (
	"fmt"
	"time"

	"voiceroom/activity"
	"voiceroom/bus"
	"voiceroom/gateway"
	"voiceroom/regions"
)

// ActivityScoreSettings are the variables of the activities' scoring
// (the activity role's durable consumer) and of their boards' reads, a
// part of config. The days and weeks are VOICEROOM_APP_TIMEZONES'.
type ActivityScoreSettings struct {
	ActivityAckWait      time.Duration   `env:"VOICEROOM_ACTIVITY_ACK_WAIT" envDefault:"30s"`
	ActivityBackOff      []time.Duration `env:"VOICEROOM_ACTIVITY_BACKOFF" envDefault:"1s" envSeparator:","`
	ActivityMaxAckPend   int             `env:"VOICEROOM_ACTIVITY_MAX_ACK_PENDING" envDefault:"5000"`
	ActivityConcurrency  int             `env:"VOICEROOM_ACTIVITY_CONCURRENCY" envDefault:"4"`
	ActivityRefresh      time.Duration   `env:"VOICEROOM_ACTIVITY_REFRESH" envDefault:"5s"`
	ActivityExpireAfter  time.Duration   `env:"VOICEROOM_ACTIVITY_BOARD_EXPIRE_AFTER" envDefault:"168h"`
	ActivityRedisTimeout time.Duration   `env:"VOICEROOM_ACTIVITY_REDIS_TIMEOUT" envDefault:"100ms"`
	// ActivitySettleGrace is how long after an activity's end its
	// settlement waits before it may freeze (activity.SettleConfig.Grace).
	ActivitySettleGrace time.Duration `env:"VOICEROOM_ACTIVITY_SETTLE_GRACE" envDefault:"30s"`
	// ActivityCatchupMaxRate bounds the events a retroactive activity's
	// read back reads per second (activity.CatchupConfig.MaxRate; 0: no
	// bound). Default 2,000: a read back held to it took 17 % of the live
	// scorer's rate on the 2-core development machine, against a third to
	// a half unbounded (docs/activities.md, "A start in the past"), and
	// reads 1,000,000 events in under 9 minutes.
	ActivityCatchupMaxRate int `env:"VOICEROOM_ACTIVITY_CATCHUP_MAX_RATE" envDefault:"2000"`
	// ActivitySettleLease is how long an activity's settlement stays with
	// the process that took it without a renewal; another process takes
	// it over once it lapses (activity.SettleConfig.Lease).
	ActivitySettleLease time.Duration `env:"VOICEROOM_ACTIVITY_SETTLE_LEASE" envDefault:"30s"`
}

// activityScoreVars are the variables that set activity.ScoreConfig's
// fields (the consumer's by sinkVars).
var activityScoreVars = map[string]string{
	"TimeZones": "VOICEROOM_APP_TIMEZONES", "Refresh": "VOICEROOM_ACTIVITY_REFRESH",
	"ExpireAfter": "VOICEROOM_ACTIVITY_BOARD_EXPIRE_AFTER", "RedisTimeout": "VOICEROOM_ACTIVITY_REDIS_TIMEOUT",
}

// activityScore is the configuration of the scorer and the boards.
func (c *config) activityScore() activity.ScoreConfig {
	zones, _ := c.timeZones() // validate reports the error
	return activity.ScoreConfig{TimeZones: zones, Refresh: c.ActivityRefresh, ExpireAfter: c.ActivityExpireAfter,
		RedisTimeout: c.ActivityRedisTimeout}
}

// validate checks the variables without changing s; errors go to errs.
func (s ActivityScoreSettings) validate(errs *varErrors) {
	if s.ActivityAckWait < time.Second {
		errs.add(&configError{Var: "VOICEROOM_ACTIVITY_ACK_WAIT", Msg: fmt.Sprintf("want at least 1s, got %v", s.ActivityAckWait)})
	}
	if s.ActivityCatchupMaxRate < 0 || s.ActivityCatchupMaxRate > 10_000_000 {
		errs.add(&configError{Var: "VOICEROOM_ACTIVITY_CATCHUP_MAX_RATE", Msg: fmt.Sprintf("want 0 (no bound) to 10000000 events/s, got %d", s.ActivityCatchupMaxRate)})
	}
	if s.ActivitySettleGrace < 0 || s.ActivitySettleGrace > 24*time.Hour {
		errs.add(&configError{Var: "VOICEROOM_ACTIVITY_SETTLE_GRACE", Msg: fmt.Sprintf("want 0 to 24h, got %v", s.ActivitySettleGrace)})
	}
	// The settlement loop runs a round a second: a lease renewed in time
	// is at least two rounds long.
	if s.ActivitySettleLease < 2*time.Second || s.ActivitySettleLease > time.Hour {
		errs.add(&configError{Var: "VOICEROOM_ACTIVITY_SETTLE_LEASE", Msg: fmt.Sprintf("want 2s to 1h, got %v", s.ActivitySettleLease)})
	}
	zones := map[string]string{} // the zones are checked with the ranks' variables
	errs.of(activity.ScoreConfig{TimeZones: zones, Refresh: s.ActivityRefresh, ExpireAfter: s.ActivityExpireAfter,
		RedisTimeout: s.ActivityRedisTimeout}.Validate(), "activity", activityScoreVars)
}

// wireActivityScoring adds the activities' scoring and boards of the
// roles serve runs:
//
//   - activity: the scorer on the durable activity, a worker that scores
//     each event once per activity in MySQL and keeps the boards in Redis,
//     the settlement loop (activitySettler), and the read backs of
//     activities created after their start (activityCatchUp);
//   - api: GET /api/v1/activities/:activity_id/board and .../progress,
//     read from Redis, else MySQL.
//
// The series are registered in either role.
func wireActivityScoring(d *deps, regionSvc *regions.Service) error {
	role, api := d.cfg.hasRole(roleActivity), d.cfg.hasRole(roleAPI)
	if !role && !api {
		return nil
	}
	m, err := activity.NewScoreMetrics(d.reg)
	if err != nil {
		return err
	}
	cfg := d.cfg.activityScore()
	if role {
		bm, err := bus.NewMetrics(d.reg)
		if err != nil {
			return err
		}
		s, err := activity.NewScorer(d.db, d.redisClient(), d.nats.JetStream(), d.cfg.consumerRun(bus.DurableActivity), bm, cfg, d.log, m)
		if err != nil {
			return fmt.Errorf("activity scorer: %w", err)
		}
		d.workers = append(d.workers, worker{name: "activity-scorer", run: s.Run})
		settler, err := activitySettler(d, bus.DurableActivity, d.cfg.ActivitySettleGrace, d.cfg.ActivitySettleLease)
		if err != nil {
			return err
		}
		d.workers = append(d.workers, settler)
		catchUp, err := activityCatchUp(d, bus.DurableActivity)
		if err != nil {
			return err
		}
		d.workers = append(d.workers, catchUp)
	}
	if api {
		b, err := activity.NewBoards(d.db, d.redisClient(), regionSvc, cfg, d.log, m)
		if err != nil {
			return fmt.Errorf("activity boards: %w", err)
		}
		b.SetReads(d.reads) // a page read from MySQL while Redis is down may lag
		d.mounts = append(d.mounts, gateway.ActivityBoardRoutes(b))
	}
	return nil
}
