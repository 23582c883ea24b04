package testenv

import (
	"os"
	"strconv"
	"time"
)

// EnvInt is the positive integer in the environment variable name, or def:
// how a benchmark lets VOICEROOM_BENCH_* variables size its workload.
func EnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// Percentile is the p-quantile (0..1) of sorted durations; 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// Millis is d in milliseconds, for a benchmark's reported metrics.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
