package main

import (
	"context"
	"fmt"
	"time"

	"voiceroom/bus"
	"voiceroom/gateway"
	"voiceroom/outboxrelay"
)

// wireOutbox adds the outbox components of the roles serve runs:
//
//   - relay: the outbox relay (unless VOICEROOM_OUTBOX_ENABLED=false), a
//     worker, so it starts after HTTP serves and stops, with its batch in
//     flight recorded, before MySQL closes. Several processes may run it
//     side by side.
//   - rooms: the fast path, kept in d.fastPath for the rooms package to hand
//     its committed events to; it runs until after HTTP has drained.
//   - api: GET /admin/v1/outbox.
func wireOutbox(d *deps) error {
	if !d.cfg.hasRole(roleRelay) && !d.cfg.hasRole(roleRooms) && !d.cfg.hasRole(roleAPI) {
		return nil
	}
	m, err := outboxrelay.NewMetrics(d.reg)
	if err != nil {
		return err
	}
	var pub *bus.Publisher
	if d.cfg.hasRole(roleRelay) || d.cfg.hasRole(roleRooms) {
		if pub, err = bus.NewPublisher(d.nats.JetStream(), bus.PublisherConfig{}); err != nil {
			return fmt.Errorf("outbox publisher: %w", err)
		}
	}

	if d.cfg.hasRole(roleRelay) {
		if !d.cfg.OutboxEnabled {
			d.log.Warn("outbox relay disabled by VOICEROOM_OUTBOX_ENABLED=false; pending outbox rows wait for another relay")
		} else {
			relay, err := outboxrelay.New(d.db, pub, d.log, m, d.cfg.outbox())
			if err != nil {
				return fmt.Errorf("outbox relay: %w", err)
			}
			d.workers = append(d.workers, worker{name: "outbox-relay", run: relay.Run})
		}
	}

	if d.cfg.hasRole(roleRooms) {
		fcfg := d.cfg.fastPath()
		fcfg.Connected = d.nats.NATS().IsConnected
		fp, err := outboxrelay.NewFastPath(d.db, pub, d.log, m, fcfg)
		if err != nil {
			return fmt.Errorf("outbox fast path: %w", err)
		}
		d.fastPath = fp
		// Not a worker: room commands run until HTTP has drained, after the
		// workers stopped, and their events should still go out at once.
		// It stops after the rooms committer (closers run in reverse).
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- fp.Run(ctx) }()
		d.closers = append(d.closers, func() {
			d.log.Info("shutdown: outbox fast path")
			stop()
			select {
			case <-done:
			case <-time.After(d.cfg.ShutdownTimeout):
				d.log.Error("outbox fast path did not stop in time; its unpublished events stay pending for the relay")
			}
		})
	}

	if d.cfg.hasRole(roleAPI) {
		d.mounts = append(d.mounts, gateway.OutboxRoutes(outboxrelay.NewInspector(d.db, nil)))
	}
	return nil
}
