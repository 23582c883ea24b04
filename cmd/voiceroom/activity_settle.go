package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"voiceroom/activity"
	"voiceroom/bus"
)

// activitySettler returns the settlement loop of the activity role
// (activity.Settler): each process of the role runs one, named by its node
// id and pid in activities.settle_owner; durable is the scoring consumer
// whose progress holds a settlement until the window's events are scored,
// grace VOICEROOM_ACTIVITY_SETTLE_GRACE (0: the default, 30s), lease
// VOICEROOM_ACTIVITY_SETTLE_LEASE (0: the default, 30s).
func activitySettler(d *deps, durable string, grace, lease time.Duration) (worker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := d.nats.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		return worker{}, fmt.Errorf("activity settlement: stream %s: %w", bus.StreamName, err)
	}
	m, err := activity.NewSettleMetrics(d.reg)
	if err != nil {
		return worker{}, err
	}
	owner := processOwner(d)
	progress := bus.NewDurableProgress(d.db, stream, durable, time.Now)
	s, err := activity.NewSettler(d.db, d.redisClient(), progress, activity.SettleConfig{Owner: owner, Grace: grace, Lease: lease,
		Score: d.cfg.activityScore()}, time.Now, d.log, m)
	if err != nil {
		return worker{}, fmt.Errorf("activity settlement: %w", err)
	}
	return worker{name: "activity-settler", run: s.Run}, nil
}

// activityCatchUp returns the read backs of retroactive activities
// (activity.CatchUp), run by the activity role beside the scorer: each
// process of the role runs one, named as its settler; durable is the
// live scoring consumer whose delivered sequence ends each seam.
func activityCatchUp(d *deps, durable string) (worker, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := d.nats.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		return worker{}, fmt.Errorf("activity catch-up: stream %s: %w", bus.StreamName, err)
	}
	m, err := activity.NewCatchupMetrics(d.reg)
	if err != nil {
		return worker{}, err
	}
	c, err := activity.NewCatchUp(d.db, d.redisClient(), stream, activity.CatchupConfig{Owner: processOwner(d), Durable: durable,
		MaxRate: d.cfg.ActivityCatchupMaxRate, Score: d.cfg.activityScore()}, d.log, m)
	if err != nil {
		return worker{}, fmt.Errorf("activity catch-up: %w", err)
	}
	return worker{name: "activity-catchup", run: c.Run}, nil
}

// processOwner names this process in the activities' leases: its node id
// and pid, at most 64 characters.
func processOwner(d *deps) string {
	owner := d.cfg.NodeID + ":" + strconv.Itoa(os.Getpid())
	if len(owner) > 64 {
		owner = owner[len(owner)-64:]
	}
	return owner
}
