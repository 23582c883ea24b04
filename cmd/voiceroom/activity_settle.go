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
	owner := d.cfg.NodeID + ":" + strconv.Itoa(os.Getpid())
	if len(owner) > 64 {
		owner = owner[len(owner)-64:]
	}
	progress := activity.NewDurableProgress(d.db, stream, durable, time.Now)
	s, err := activity.NewSettler(d.db, d.redisClient(), progress, activity.SettleConfig{Owner: owner, Grace: grace, Lease: lease,
		Score: d.cfg.activityScore()}, time.Now, d.log, m)
	if err != nil {
		return worker{}, fmt.Errorf("activity settlement: %w", err)
	}
	return worker{name: "activity-settler", run: s.Run}, nil
}
