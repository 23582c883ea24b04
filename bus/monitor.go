package bus

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/internal/every"
	"voiceroom/promreg"
)

// DLQMetrics are the series operators alert on for each sink: its
// durable's backlog, its dead letters, the letters the gap check made and
// the letters replayed. Every series of the sinks named at construction
// exists from the start at 0. A nil *DLQMetrics records nothing.
type DLQMetrics struct {
	pending     *prometheus.GaugeVec
	ackPending  *prometheus.GaugeVec
	depth       *prometheus.GaugeVec
	gap         *prometheus.CounterVec
	replayed    *prometheus.CounterVec
	refreshFail prometheus.Counter
}

// NewDLQMetrics creates the series for sinks and registers them with reg
// (none if reg is nil). Series registered by an earlier NewDLQMetrics on
// the same registry are shared. It returns an error if reg holds other
// collectors under the same names.
func NewDLQMetrics(reg prometheus.Registerer, sinks ...string) (*DLQMetrics, error) {
	r := promreg.On(reg)
	s := r.Sub("bus")
	m := &DLQMetrics{
		pending: s.GaugeVec("consumer_pending",
			"Messages of ROOM_EVENTS a durable has not been delivered yet (consumer info num_pending), as of the last refresh.", "consumer"),
		ackPending: s.GaugeVec("consumer_ack_pending",
			"Messages delivered to a durable and not yet acked (consumer info num_ack_pending), as of the last refresh.", "consumer"),
		depth: s.GaugeVec("dlq_depth",
			"Dead letters of a sink in ROOM_EVENTS_DLQ, all apps, as of the last refresh.", "sink"),
		gap: s.CounterVec("gap_dead_lettered_total",
			"Dead letters the gap check made for messages the server gave up on while no instance heard its advisory.", "consumer"),
		replayed: s.CounterVec("dlq_replayed_total",
			"Dead letters replayed to their sink.", "sink"),
		refreshFail: s.Counter("monitor_refresh_failures_total",
			"Refreshes of the consumer and dead-letter gauges that failed; the gauges keep their last values."),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("bus dlq metrics: %w", err)
	}
	for _, s := range sinks {
		m.pending.WithLabelValues(s)
		m.ackPending.WithLabelValues(s)
		m.depth.WithLabelValues(s)
		m.gap.WithLabelValues(s)
		m.replayed.WithLabelValues(s)
	}
	return m, nil
}

func (m *DLQMetrics) gapLettered(consumer string) {
	if m != nil {
		m.gap.WithLabelValues(consumer).Inc()
	}
}

func (m *DLQMetrics) replay(sink string, n int) {
	if m != nil && n > 0 {
		m.replayed.WithLabelValues(sink).Add(float64(n))
	}
}

// MonitorConfig configures a Monitor. Zero fields take their defaults
// (see WithDefaults).
type MonitorConfig struct {
	// Durables are the sinks whose consumer state and dead letters are
	// watched. Default imbridge, listprojector, roomranks, webhooks and activity.
	Durables []string
	// Interval is the time between two refreshes. Default 15s.
	Interval time.Duration
	// Timeout bounds one refresh. Default 10s.
	Timeout time.Duration
}

// WithDefaults returns c with zero fields set to their defaults.
func (c MonitorConfig) WithDefaults() MonitorConfig {
	if len(c.Durables) == 0 {
		c.Durables = []string{DurableIMBridge, DurableListProjector, DurableRoomRanks, DurableWebhooks, DurableActivity}
	}
	if c.Interval == 0 {
		c.Interval = 15 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	return c
}

// Validate checks c after defaults are applied; it never changes c.
// Errors are *apperr.ConfigError naming the field and wrap
// ErrInvalidConfig.
func (c MonitorConfig) Validate() error {
	c = c.WithDefaults()
	for _, d := range c.Durables {
		if err := checkToken("durable", d); err != nil {
			return apperr.BadConfig("Durables", "%w: monitor: %w", ErrInvalidConfig, err)
		}
	}
	if c.Interval < 0 || c.Interval > time.Hour {
		return apperr.BadConfig("Interval", "%w: monitor: interval %s: want more than 0, at most 1h", ErrInvalidConfig, c.Interval)
	}
	if c.Timeout < 0 {
		return apperr.BadConfig("Timeout", "%w: monitor: timeout %s: must be positive", ErrInvalidConfig, c.Timeout)
	}
	return nil
}

// Monitor refreshes the gauges of DLQMetrics from the server: each
// durable's pending and ack-pending counts (consumer info) and each sink's
// dead-letter count. Any process may run one; the values are the
// server's, so several monitors report the same.
type Monitor struct {
	dlq     *DLQ
	cfg     MonitorConfig
	log     *slog.Logger
	metrics *DLQMetrics
}

// NewMonitor returns a Monitor that writes into m.
func NewMonitor(dlq *DLQ, cfg MonitorConfig, log *slog.Logger, m *DLQMetrics) (*Monitor, error) {
	if dlq == nil || m == nil {
		return nil, fmt.Errorf("%w: monitor: nil dlq or metrics", ErrInvalidConfig)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Durables = slices.Clone(cfg.Durables)
	return &Monitor{dlq: dlq, cfg: cfg, log: log.With("component", "bus-monitor"), metrics: m}, nil
}

// Run refreshes at once and then every Interval until ctx ends, then
// returns nil. A failed refresh is logged and counted.
func (mo *Monitor) Run(ctx context.Context) error {
	every.Now(ctx, mo.cfg.Interval, func() {
		rctx, cancel := context.WithTimeout(ctx, mo.cfg.Timeout)
		err := mo.Refresh(rctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			mo.metrics.refreshFail.Inc()
			mo.log.Warn("refresh bus gauges", "error", err)
		}
	})
	return nil
}

// Refresh reads the server's state once into the gauges. It goes on past
// a failing durable and returns the first error.
func (mo *Monitor) Refresh(ctx context.Context) error {
	var first error
	for _, d := range mo.cfg.Durables {
		if err := mo.refresh(ctx, d); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (mo *Monitor) refresh(ctx context.Context, durable string) error {
	b, err := mo.dlq.Backlog(ctx, durable)
	if err != nil {
		return err
	}
	mo.metrics.pending.WithLabelValues(durable).Set(float64(b.Pending))
	mo.metrics.ackPending.WithLabelValues(durable).Set(float64(b.AckPending))
	depth, err := mo.dlq.Depth(ctx, durable)
	if err != nil {
		return err
	}
	mo.metrics.depth.WithLabelValues(durable).Set(float64(depth))
	return nil
}
