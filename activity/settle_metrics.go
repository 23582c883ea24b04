package activity

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// SettleMetrics are settlement's series: payouts and coins paid (by
// reason), settlements moved into a state, activities by settlement state
// and failed rounds. A nil *SettleMetrics records nothing.
type SettleMetrics struct {
	payouts  *prometheus.CounterVec
	coins    *prometheus.CounterVec
	moves    *prometheus.CounterVec
	states   *prometheus.GaugeVec
	failures prometheus.Counter
}

// NewSettleMetrics creates the series and registers them on reg (none when
// reg is nil); every labelled series exists from the start at 0.
func NewSettleMetrics(reg prometheus.Registerer) (*SettleMetrics, error) {
	r := promreg.On(reg)
	s := r.Sub("activity")
	m := &SettleMetrics{
		payouts: s.CounterVec("payouts_paid_total",
			"Activity rewards paid into wallets, by reason: rank (a leaderboard's rank) or task (a task's target reached).", "reason"),
		coins: s.CounterVec("coins_paid_total",
			"Coins paid by activity rewards, by reason (rank, task).", "reason"),
		moves: s.CounterVec("settlements_total",
			"Activity settlements that reached a state in this process, by state: frozen (ranks written), settled (every reward paid).", "state"),
		states: s.GaugeVec("settlement_state_activities",
			"Activities by settlement state (open, frozen, paying, settled, cancelled), as the last settlement round read them.", "state"),
		failures: s.Counter("settlement_failures_total",
			"Settlement steps that failed (MySQL, the scoring progress); the next round tries again."),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("activity settlement metrics: %w", err)
	}
	for _, l := range []string{ReasonRank, ReasonTask} {
		m.payouts.WithLabelValues(l)
		m.coins.WithLabelValues(l)
	}
	for _, l := range []SettleState{StateFrozen, StateSettled} {
		m.moves.WithLabelValues(string(l))
	}
	for _, l := range allStates {
		m.states.WithLabelValues(string(l))
	}
	return m, nil
}

var allStates = []SettleState{StateOpen, StateFrozen, StatePaying, StateSettled, StateCancelled}

func (m *SettleMetrics) paid(reason string, coins int64) {
	if m == nil {
		return
	}
	m.payouts.WithLabelValues(reason).Inc()
	m.coins.WithLabelValues(reason).Add(float64(coins))
}

func (m *SettleMetrics) moved(state SettleState) {
	if m != nil {
		m.moves.WithLabelValues(string(state)).Inc()
	}
}

func (m *SettleMetrics) failed() {
	if m != nil {
		m.failures.Inc()
	}
}

// observeStates sets the gauge of activities by state from MySQL.
func (m *SettleMetrics) observeStates(ctx context.Context, db *sql.DB) {
	if m == nil {
		return
	}
	rows, err := db.QueryContext(ctx, `SELECT settle_state, COUNT(*) FROM activities GROUP BY settle_state`)
	if err != nil {
		return
	}
	defer rows.Close()
	counts := map[string]float64{}
	for rows.Next() {
		var state string
		var n float64
		if rows.Scan(&state, &n) == nil {
			counts[state] = n
		}
	}
	if rows.Err() != nil {
		return
	}
	for _, st := range allStates {
		m.states.WithLabelValues(string(st)).Set(counts[string(st)])
	}
}
