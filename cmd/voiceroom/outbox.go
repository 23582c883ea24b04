package main

import (
	"fmt"

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
//   - rooms: the fast path, a worker too, kept in d.fastPath for the rooms
//     package to hand its committed events to.
//   - api: GET /admin/v1/outbox.
func wireOutbox(d *deps) error {
	if !d.cfg.hasRole(roleRelay) && !d.cfg.hasRole(roleRooms) && !d.cfg.hasRole(roleAPI) {
		return nil
	}
	m := outboxrelay.NewMetrics(d.reg)
	var pub *bus.Publisher
	if d.cfg.hasRole(roleRelay) || d.cfg.hasRole(roleRooms) {
		var err error
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
		d.workers = append(d.workers, worker{name: "outbox-fastpath", run: fp.Run})
	}

	if d.cfg.hasRole(roleAPI) {
		d.mounts = append(d.mounts, gateway.Outbox(outboxrelay.NewInspector(d.db, nil)))
	}
	return nil
}
