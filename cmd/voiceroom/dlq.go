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

// dlqVars are the variables that set the dead-letter components'
// Config fields (bus.DLQConfig, bus.MonitorConfig, bus.GapCheckConfig).
var dlqVars = map[string]string{
	"MaxReplay": "VOICEROOM_DLQ_MAX_REPLAY",
}

// validate checks the variables without changing s: the packages' rules
// through their Configs, reported under the variable that set the field,
// and the operators' lower bounds on the intervals, tighter than the
// packages' (whose tests run them faster). Errors go to errs.
func (s DLQSettings) validate(errs *varErrors) {
	if s.GapCheckInterval < time.Second {
		errs.add(&configError{Var: "VOICEROOM_DLQ_GAP_CHECK_INTERVAL", Msg: fmt.Sprintf("want at least 1s, got %v", s.GapCheckInterval)})
	}
	if s.MonitorInterval < time.Second {
		errs.add(&configError{Var: "VOICEROOM_BUS_MONITOR_INTERVAL", Msg: fmt.Sprintf("want at least 1s, got %v", s.MonitorInterval)})
	}
	errs.of(s.dlq(nil).Validate(), "dlq", dlqVars)
	errs.of(s.monitor(nil).Validate(), "bus monitor", map[string]string{"Interval": "VOICEROOM_BUS_MONITOR_INTERVAL"})
	errs.of(s.gapCheck(bus.DurableIMBridge).Validate(), "gap check", map[string]string{"Interval": "VOICEROOM_DLQ_GAP_CHECK_INTERVAL"})
}

// dlq is the configuration of the dead-letter queue of sinks.
func (s DLQSettings) dlq(sinks []string) bus.DLQConfig {
	return bus.DLQConfig{Sinks: sinks, MaxReplay: s.MaxReplay}
}

// monitor is the configuration of the bus monitor of sinks.
func (s DLQSettings) monitor(sinks []string) bus.MonitorConfig {
	return bus.MonitorConfig{Durables: sinks, Interval: s.MonitorInterval}
}

// gapCheck is the configuration of the gap check of durable.
func (s DLQSettings) gapCheck(durable string) bus.GapCheckConfig {
	return bus.GapCheckConfig{Durable: durable, Interval: s.GapCheckInterval}
}

// wireDLQ adds the dead-letter components of the roles serve runs:
//
//   - imbridge, projector, webhooks: the gap check of each sink's durable
//     the role consumes (projector: listprojector and roomranks), a worker
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
		gapSinks = append(gapSinks, bus.DurableListProjector, bus.DurableRoomRanks)
	}
	if d.cfg.hasRole(roleWebhooks) {
		gapSinks = append(gapSinks, bus.DurableWebhooks)
	}
	if d.cfg.hasRole(roleActivity) {
		gapSinks = append(gapSinks, bus.DurableActivity)
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
	q, err := bus.NewDLQ(js, d.cfg.DLQSettings.dlq(sinks), log, m)
	if err != nil {
		return fmt.Errorf("dlq: %w", err)
	}
	mon, err := bus.NewMonitor(q, d.cfg.DLQSettings.monitor(sinks), log, m)
	if err != nil {
		return fmt.Errorf("bus monitor: %w", err)
	}
	d.workers = append(d.workers, worker{name: "bus-monitor", run: mon.Run})
	for _, s := range gapSinks {
		gc, err := bus.NewGapChecker(js, d.cfg.DLQSettings.gapCheck(s), log, m)
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
