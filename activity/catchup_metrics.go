package activity

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// Results of an event read back for a retroactive activity
// (voiceroom_activity_catchup_events_total).
const (
	catchupScored    = "scored"    // counted now for the activity
	catchupDuplicate = "duplicate" // counted already (the seam: the live durable got there first)
	catchupSkipped   = "skipped"   // the activity does not count it (type, filters, window, an unreadable payload)
)

// CatchupMetrics are the read back's series. A nil *CatchupMetrics
// records nothing.
type CatchupMetrics struct {
	events *prometheus.CounterVec
	lag    *prometheus.GaugeVec
	gaps   prometheus.Counter
	lost   prometheus.Counter
}

// NewCatchupMetrics creates the series and registers them on reg (none
// when reg is nil). Series already registered on reg are shared.
func NewCatchupMetrics(reg prometheus.Registerer) (*CatchupMetrics, error) {
	r := promreg.On(reg)
	s := r.Sub("activity")
	m := &CatchupMetrics{
		events: s.CounterVec("catchup_events_total",
			"Room events read back from ROOM_EVENTS for retroactive activities, by result: scored, duplicate (counted already, at the seam with the live durable), skipped (the activity does not count it).", "result"),
		lag: s.GaugeVec("catchup_lag",
			"Events of its app the read back of a retroactive activity has still to read, by activity (this process's read backs; the series goes when one ends).", "activity_id"),
		gaps: s.Counter("catchup_gaps_total",
			"Gaps a read back found: events deleted from ROOM_EVENTS (retention) before it read them. The activity's catchup shows incomplete and the sequences lost; its scores are a lower bound."),
		lost: s.Counter("catchup_lost_seqs_total",
			"Stream sequences in the gaps read backs found (an upper bound of the events lost: other apps' events deleted among them count too)."),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("activity catch-up metrics: %w", err)
	}
	for _, l := range []string{catchupScored, catchupDuplicate, catchupSkipped} {
		m.events.WithLabelValues(l)
	}
	return m, nil
}

func (m *CatchupMetrics) read(result string, n int) {
	if m != nil && n > 0 {
		m.events.WithLabelValues(result).Add(float64(n))
	}
}

func (m *CatchupMetrics) setLag(id int64, pending uint64) {
	if m != nil {
		m.lag.WithLabelValues(strconv.FormatInt(id, 10)).Set(float64(pending))
	}
}

func (m *CatchupMetrics) done(id int64) {
	if m != nil {
		m.lag.DeleteLabelValues(strconv.FormatInt(id, 10))
	}
}

func (m *CatchupMetrics) gap(seqs uint64) {
	if m != nil {
		m.gaps.Inc()
		m.lost.Add(float64(seqs))
	}
}
