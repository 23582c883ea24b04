package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"voiceroom/bus"
	"voiceroom/gateway"
	"voiceroom/pk"
	"voiceroom/rooms"
)

// wirePK adds the PK battles to the api role (package pk): their routes;
// the scorer on the durable pk (gifts into the battles' scores, each
// event once); and the clock (pk.Clock) that ends them once the scorer
// has passed their end, named by the node id and pid in
// pk_battles.clock_owner. Every api process runs one; each battle is
// advanced by the one holding its lease, so a battle's end survives the
// process that started it; it prunes the battles settled longer than
// VOICEROOM_PK_RETENTION ago. Rooms are told through rs, the rooms router.
func wirePK(d *deps, rs pk.Rooms) error {
	svc, err := pk.New(d.db, rs, time.Now, d.log)
	if err != nil {
		return fmt.Errorf("pk: %w", err)
	}
	moderation, err := rooms.NewModerationCounter(d.reg) // the one collector the rooms and hides count on
	if err != nil {
		return err
	}
	svc.CountActions(moderation)
	owner := d.cfg.NodeID + ":" + strconv.Itoa(os.Getpid())
	if len(owner) > 64 {
		owner = owner[len(owner)-64:]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := d.nats.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		return fmt.Errorf("pk: stream %s: %w", bus.StreamName, err)
	}
	bm, err := bus.NewMetrics(d.reg)
	if err != nil {
		return err
	}
	scorer, err := pk.NewScorer(d.db, d.nats.JetStream(), d.cfg.consumerRun(bus.DurablePK), bm, d.log)
	if err != nil {
		return fmt.Errorf("pk scorer: %w", err)
	}
	progress := bus.NewDurableProgress(d.db, stream, bus.DurablePK, time.Now)
	clock, err := pk.NewClock(svc, progress, pk.ClockConfig{Owner: owner, Retention: d.cfg.PKRetention})
	if err != nil {
		return fmt.Errorf("pk clock: %w", err)
	}
	d.mounts = append(d.mounts, gateway.PKRoutes(svc))
	d.workers = append(d.workers, worker{name: "pk-scorer", run: scorer.Run}, worker{name: "pk-clock", run: clock.Run})
	return nil
}
