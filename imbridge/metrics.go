package imbridge

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// Outcomes of an event, the "outcome" label of voiceroom_imbridge_events_total.
const (
	outcomeDelivered    = "delivered"
	outcomeRetried      = "retried"
	outcomeDeadLettered = "dead_lettered"
	outcomeSkipped      = "skipped"
	outcomeDuplicate    = "duplicate"
)

// Metrics are the bridge's and the callback guard's metrics. A nil
// *Metrics records nothing.
type Metrics struct {
	events       *prometheus.CounterVec
	calls        *prometheus.HistogramVec
	commitToIM   prometheus.Histogram
	batchEvents  prometheus.Histogram
	configured   prometheus.Gauge
	callbacks    *prometheus.CounterVec
	callbackTime prometheus.Histogram
}

// NewMetrics creates the metrics and registers them on reg (none when reg
// is nil). Collectors an earlier NewMetrics registered on reg are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := promreg.On(reg)
	s := r.Sub("imbridge")
	m := &Metrics{
		events: s.CounterVec("events_total",
			"Room events by type and outcome: delivered to Tencent IM, retried (one failed attempt), dead_lettered, skipped (not an IM event), duplicate (delivered again after Tencent accepted it, or while the bridge held it: acked without a call).", "event_type", "outcome"),
		calls: s.HistogramVec("call_duration_seconds",
			"Tencent IM REST calls by API and result code (0 = OK, transport = no answer, dropped = MsgDropReason).",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, "api", "code"),
		commitToIM: s.Histogram("commit_to_im_seconds",
			"From the command's commit (occurred_at_ms) to Tencent IM accepting the event's message.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}),
		batchEvents: s.Histogram("message_events",
			"Events carried per group message (1 = single form).",
			[]float64{1, 2, 3, 5, 8, 12, 16, 24, 32}),
		configured: s.Gauge("configured",
			"1 when a Tencent IM application is configured and the bridge consumes, 0 when it waits."),
		callbacks: s.CounterVec("callbacks_total",
			"Tencent IM callbacks by command (join or other) and result (allow, deny, bad_sign, stale, unknown_app, ok).", "command", "result"),
		callbackTime: s.Histogram("callback_duration_seconds",
			"Time to answer a Tencent IM callback.",
			[]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .05, .25, 1}),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("imbridge metrics: %w", err)
	}
	for _, t := range knownTypes() {
		for _, o := range []string{outcomeDelivered, outcomeRetried, outcomeDeadLettered, outcomeSkipped, outcomeDuplicate} {
			m.events.WithLabelValues(t, o)
		}
	}
	for _, api := range []string{APICreateGroup, APISendGroupMsg, APIDestroyGroup, APIForbidSendMsg} {
		m.calls.WithLabelValues(api, "0")
	}
	for _, r := range []string{"allow", "deny", "bad_sign", "stale", "unknown_app"} {
		m.callbacks.WithLabelValues("join", r)
	}
	return m, nil
}

func (m *Metrics) event(eventType, outcome string, n int) {
	if m == nil {
		return
	}
	m.events.WithLabelValues(typeLabel(eventType), outcome).Add(float64(n))
}

func (m *Metrics) call(api string, err error, seconds float64) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(api, errorCode(err)).Observe(seconds)
}

func (m *Metrics) delivered(seconds float64) {
	if m == nil {
		return
	}
	m.commitToIM.Observe(seconds)
}

func (m *Metrics) batch(events int) {
	if m == nil {
		return
	}
	m.batchEvents.Observe(float64(events))
}

func (m *Metrics) setConfigured(on bool) {
	if m == nil {
		return
	}
	v := 0.0
	if on {
		v = 1
	}
	m.configured.Set(v)
}

func (m *Metrics) callback(command, result string, seconds float64) {
	if m == nil {
		return
	}
	m.callbacks.WithLabelValues(command, result).Inc()
	m.callbackTime.Observe(seconds)
}
