package testenv

import (
	"os"
	"strconv"
	"syscall"
	"testing"
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

// ProcessCPU is the user and system CPU time this process has used so
// far: a benchmark reports the difference over its run.
func ProcessCPU(tb testing.TB) time.Duration {
	tb.Helper()
	return rusage(tb, syscall.RUSAGE_SELF)
}

// ThreadCPU is the user and system CPU time the calling OS thread has
// used so far (lock the goroutine to its thread around the measure).
func ThreadCPU(tb testing.TB) time.Duration {
	tb.Helper()
	return rusage(tb, syscall.RUSAGE_THREAD)
}

func rusage(tb testing.TB, who int) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
