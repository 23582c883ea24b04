package roomranks

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// Sources of a read and Redis operations, as labelled in the metrics.
const (
	sourceRedis = "redis"
	sourceMySQL = "mysql"

	opRead  = "read"  // a read or a fill by the reader
	opApply = "apply" // the consumer's write of an event
)

// Metrics are the ranks' series: the consumer's events by outcome, the
// reads by source, the fills and the failures. A nil *Metrics records
// nothing.
type Metrics struct {
	events    *prometheus.CounterVec
	reads     *prometheus.CounterVec
	refills   *prometheus.CounterVec
	redisErrs *prometheus.CounterVec
	mysqlErrs prometheus.Counter
}

// NewMetrics creates the series and registers them on reg (none when reg
// is nil). Series already registered on reg by an earlier NewMetrics are
// shared. Every labelled series exists from the start at 0.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := promreg.On(reg)
	s := r.Sub("ranks")
	m := &Metrics{
		events: s.CounterVec("events_total",
			"RoomGiftSent events the ranks consumer handled, by result: applied (added to the sets in Redis), uncached (none of its sets is in Redis: journaled only), duplicate (counted already: a repeat, or in a set filled after it), invalidated (too old to tell: its sets were dropped and are filled again from MySQL), zero_value (a gift of price 0 counts nothing).", "result"),
		reads: s.CounterVec("reads_total",
			"Rank reads answered, by source: redis (the set), mysql (the set missing or Redis down).", "source"),
		refills: s.CounterVec("refills_total",
			"Sets filled in Redis from MySQL, by result: filled, exists (another fill came first), behind (gifts after the MySQL read had left the journal: tried again on the next read).", "result"),
		redisErrs: s.CounterVec("redis_failures_total",
			"Failed Redis calls, by op: read (a read, fill or probe of the reader), apply (the consumer's write of an event, retried).", "op"),
		mysqlErrs: s.Counter("mysql_failures_total",
			"Failed MySQL reads of ranks."),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("ranks metrics: %w", err)
	}
	for _, l := range []string{resultApplied, resultUncached, resultDuplicate, resultInvalidated, resultZero} {
		m.events.WithLabelValues(l)
	}
	for _, l := range []string{sourceRedis, sourceMySQL} {
		m.reads.WithLabelValues(l)
	}
	for _, l := range []string{fillFilled, fillExists, fillBehind} {
		m.refills.WithLabelValues(l)
	}
	for _, l := range []string{opRead, opApply} {
		m.redisErrs.WithLabelValues(l)
	}
	return m, nil
}

func (m *Metrics) event(result string) {
	if m != nil {
		m.events.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) read(source string) {
	if m != nil {
		m.reads.WithLabelValues(source).Inc()
	}
}

func (m *Metrics) refill(result string) {
	if m != nil {
		m.refills.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) redisFailed(op string) {
	if m != nil {
		m.redisErrs.WithLabelValues(op).Inc()
	}
}

func (m *Metrics) mysqlFailed() {
	if m != nil {
		m.mysqlErrs.Inc()
	}
}
