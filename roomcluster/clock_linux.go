package roomcluster

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootClock reads CLOCK_BOOTTIME: monotonic, and unlike Go's monotonic
// clock (CLOCK_MONOTONIC) it goes on while the machine is suspended.
func bootClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Duration(time.Now().UnixNano()) // never on Linux ≥ 2.6.39
	}
	return time.Duration(ts.Nano())
}
