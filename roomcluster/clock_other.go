//go:build !linux

package roomcluster

import "time"

var clockStart = time.Now()

// bootClock is Go's monotonic clock where CLOCK_BOOTTIME does not exist; it
// may stop while the machine is suspended.
func bootClock() time.Duration { return time.Since(clockStart) }
