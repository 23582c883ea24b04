package main

import (
	"fmt"
	"time"

	"voiceroom/bus"
	"voiceroom/gateway"
)

// DLQSettings are the variables of the dead-letter components, a part of
// config.
type DLQSettings struct {
	GapCheckInterval time.Duration `env:"VOICEROOM_DLQ_GAP_CHECK_INTERVAL" envDefault:"30s"`
	MonitorInterval  time.Duration `env:"VOICEROOM_BUS_MONITOR_INTERVAL" envDefault:"15s"`
	MaxReplay        int           `env:"VOICEROOM_DLQ_MAX_REPLAY" envDefault:"10000"`
}

// validate returns one error per bad variable.
func (s DLQSettings) validate() []*configError {
	var errs []*configError
	bad := func(name, format string, args ...any) *configError {
		return &configError{Var: name, Msg: fmt.Sprintf(format, args...)}
	}
	if s.GapCheckInterval < time.Second || s.GapCheckInterval > time.Hour {
		errs = append(errs, bad("VOICEROOM_DLQ_GAP_CHECK_INTERVAL", "want 1s..1h, got %v", s.GapCheckInterval))
	}
	if s.MonitorInterval < time.Second || s.MonitorInterval > time.Hour {
		errs = append(errs, bad("VOICEROOM_BUS_MONITOR_INTERVAL", "want 1s..1h, got %v", s.MonitorInterval))
	}
	if s.MaxReplay < 1 || s.MaxReplay > 100_000 {
		errs = append(errs, bad("VOICEROOM_DLQ_MAX_REPLAY", "want 1..100000, got %d", s.MaxReplay))
	}
	return errs
}

// wireDLQ adds the dead-letter components of the roles serve runs:
//
//   - imbridge, projector: the gap check of that sink's durable, a worker
//     that dead-letters messages the server gave up on while no instance
//     heard its advisory;
//   - api: GET /admin/v1/dlq and POST /admin/v1/dlq/replay;
//   - any of these: the bus monitor, a worker that keeps each sink's
//     pending, ack-pending and dead-letter gauges (several processes
//     report the same server-side values).
func wireDLQ(d *deps) error {
	api := d.cfg.hasRole(roleAPI)
	var gapSinks []string
	if d.cfg.hasRole(roleIMBridge) {
		gapSinks = append(gapSinks, bus.DurableIMBridge)
	}
	if d.cfg.hasRole(roleProjector) {
		gapSinks = append(gapSinks, bus.DurableListProjector)
	}
	if !api && len(gapSinks) == 0 {
		return nil
	}
	var sinks []string
	for _, c := range d.cfg.consumers() {
		sinks = append(sinks, c.Durable)
	}
	js := d.nats.JetStream()
	log := d.log
	m, err := bus.NewDLQMetrics(d.reg, sinks...)
	if err != nil {
		return fmt.Errorf("dlq metrics: %w", err)
	}
	q, err := bus.NewDLQ(js, bus.DLQConfig{Sinks: sinks, MaxReplay: d.cfg.DLQSettings.MaxReplay}, log, m)
	if err != nil {
		return fmt.Errorf("dlq: %w", err)
	}
	mon, err := bus.NewMonitor(q, bus.MonitorConfig{Durables: sinks, Interval: d.cfg.DLQSettings.MonitorInterval}, log, m)
	if err != nil {
		return fmt.Errorf("bus monitor: %w", err)
	}
	d.workers = append(d.workers, worker{name: "bus-monitor", run: mon.Run})
	for _, s := range gapSinks {
		gc, err := bus.NewGapChecker(js, bus.GapCheckConfig{Durable: s, Interval: d.cfg.DLQSettings.GapCheckInterval}, log, m)
		if err != nil {
			return fmt.Errorf("gap check %s: %w", s, err)
		}
		d.workers = append(d.workers, worker{name: "gapcheck-" + s, run: gc.Run})
	}
	if api {
		d.mounts = append(d.mounts, gateway.DLQRoutes(q))
	}
	return nil
}
