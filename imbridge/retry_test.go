package imbridge_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/imbridge"
	"voiceroom/imemu"
	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
)

// TestDefaultRetryIsAFixedSecond: eight failed calls in a row for one
// room, then Tencent answers again. With the default configuration the
// room's events all arrive seconds later, in order, each shown once. A
// growing backoff (the old 1 s, 5 s, 30 s, 2 min, 5 min) would still hold
// them for minutes, and waitShown would give up.
func TestDefaultRetryIsAFixedSecond(t *testing.T) {
	skipShort(t)
	def := imbridge.Config{}.WithDefaults().RetryDelays
	if !slices.Equal(def, []time.Duration{time.Second}) {
		t.Fatalf("default retry delays %v, want a fixed 1s", def)
	}
	emu, url := newTestEmulator(t)
	js := newTestJetStream(t)
	r := newTestRoom("demo")
	publish(t, js, r.event(roomevent.RoomCreated, nil))
	runBridge(t, js, testApps(url), imbridge.Config{RetryDelays: def})
	testenv.Eventually(t, 10*time.Second, func() error {
		if len(emu.Groups()) != 1 {
			return fmt.Errorf("%d groups", len(emu.Groups()))
		}
		return nil
	})
	const failures = 8
	if err := emu.SetFault(imemu.Fault{Mode: "error", ErrorCode: 10002, API: imbridge.APISendGroupMsg, Calls: failures}); err != nil {
		t.Fatal(err)
	}
	var events []bus.Envelope
	for u := range int64(25) {
		events = append(events, r.joined(100+u))
	}
	start := time.Now()
	publish(t, js, events...)
	waitShown(t, emu, events...)
	assertRoomOrder(t, emu.Messages(r.groupID(), 0), events...)
	calls := emu.Stats().Calls[imbridge.APISendGroupMsg]
	if calls < failures+1 {
		t.Fatalf("%d send_group_msg calls, want at least %d (the failures, then the delivery)", calls, failures+1)
	}
	t.Logf("%d events shown %s after they were published, behind %d failed calls", len(events), time.Since(start).Round(time.Millisecond), failures)
}

// TestRetryDelaysAreCapped: a configured backoff may not wait longer than
// MaxRetryDelay between two tries.
func TestRetryDelaysAreCapped(t *testing.T) {
	for _, delays := range [][]time.Duration{{imbridge.MaxRetryDelay + time.Second}, {time.Second, 0}, {-time.Second}} {
		if err := (imbridge.Config{RetryDelays: delays}).Validate(); err == nil {
			t.Errorf("retry delays %v accepted", delays)
		}
	}
	if err := (imbridge.Config{RetryDelays: []time.Duration{time.Second, imbridge.MaxRetryDelay}}).Validate(); err != nil {
		t.Errorf("retry delays up to the cap refused: %v", err)
	}
}
