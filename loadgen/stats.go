package loadgen

import (
	"slices"
	"sync"
	"time"
)

// OpStats is one operation's figures over a phase.
type OpStats struct {
	Count  int64            `json:"count"`
	OK     int64            `json:"ok"`
	PerSec float64          `json:"per_sec"`
	P50Ms  float64          `json:"p50_ms"`
	P99Ms  float64          `json:"p99_ms"`
	P999Ms float64          `json:"p999_ms"`
	MaxMs  float64          `json:"max_ms"`
	Errors map[string]int64 `json:"errors,omitempty"` // by error code (HTTP envelope code, or "transport")
}

// Latency is a distribution of delays.
type Latency struct {
	Samples int64   `json:"samples"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	P999Ms  float64 `json:"p999_ms"`
	MaxMs   float64 `json:"max_ms"`
}

func latencyOf(d []time.Duration) *Latency {
	if len(d) == 0 {
		return nil
	}
	slices.Sort(d)
	return &Latency{Samples: int64(len(d)), P50Ms: ms(pct(d, 0.50)), P99Ms: ms(pct(d, 0.99)), P999Ms: ms(pct(d, 0.999)), MaxMs: ms(d[len(d)-1])}
}

// pct is the q-quantile of sorted d (nearest rank).
func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(q*float64(len(d))+0.999999) - 1
	return d[max(0, min(i, len(d)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// recorder collects the outcome of every operation of a phase, by name.
type recorder struct {
	mu  sync.Mutex
	ops map[string]*opLog
	// window is the last progress interval's latencies and counts.
	win      []time.Duration
	winOK    int64
	winErr   int64
	winRejct int64
}

type opLog struct {
	lat    []time.Duration
	ok     int64
	errors map[string]int64
}

func newRecorder() *recorder { return &recorder{ops: map[string]*opLog{}} }

// add records one operation: code "" is success; a code is the answer's
// error code. server is true when the failure is the server's (5xx,
// transport), false for a rejection by the rules (4xx).
func (r *recorder) add(op string, d time.Duration, code string, server bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.ops[op]
	if l == nil {
		l = &opLog{errors: map[string]int64{}}
		r.ops[op] = l
	}
	l.lat = append(l.lat, d)
	r.win = append(r.win, d)
	switch {
	case code == "":
		l.ok++
		r.winOK++
	default:
		l.errors[code]++
		if server {
			r.winErr++
		} else {
			r.winRejct++
		}
	}
}

// window returns and resets the interval's figures.
func (r *recorder) window() (n, errs, rejected int64, p99 time.Duration) {
	r.mu.Lock()
	w := r.win
	n, errs, rejected = r.winOK+r.winErr+r.winRejct, r.winErr, r.winRejct
	r.win, r.winOK, r.winErr, r.winRejct = nil, 0, 0, 0
	r.mu.Unlock()
	slices.Sort(w)
	return n, errs, rejected, pct(w, 0.99)
}

// stats returns every operation's figures over elapsed, plus "all" when
// withAll.
func (r *recorder) stats(elapsed time.Duration, withAll bool) map[string]OpStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]OpStats{}
	var all []time.Duration
	total := &opLog{errors: map[string]int64{}}
	for name, l := range r.ops {
		out[name] = opStats(l, elapsed)
		if withAll {
			all = append(all, l.lat...)
			total.ok += l.ok
			for k, v := range l.errors {
				total.errors[k] += v
			}
		}
	}
	if withAll && len(all) > 0 {
		total.lat = all
		out["all"] = opStats(total, elapsed)
	}
	return out
}

func opStats(l *opLog, elapsed time.Duration) OpStats {
	lat := slices.Clone(l.lat)
	s := OpStats{Count: int64(len(lat)), OK: l.ok}
	if len(l.errors) > 0 {
		s.Errors = map[string]int64{}
		for k, v := range l.errors {
			s.Errors[k] = v
		}
	}
	if elapsed > 0 {
		s.PerSec = float64(len(lat)) / elapsed.Seconds()
	}
	if L := latencyOf(lat); L != nil {
		s.P50Ms, s.P99Ms, s.P999Ms, s.MaxMs = L.P50Ms, L.P99Ms, L.P999Ms, L.MaxMs
	}
	return s
}
