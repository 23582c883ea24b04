package imbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/imbridge"
	"voiceroom/imemu"
	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
)

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs JetStream")
	}
}

// TestGroupLifecycle: RoomCreated creates the group, events are shown once
// each in room order, RoomClosed is shown and then destroys the group;
// heat and rank changes are not sent.
func TestGroupLifecycle(t *testing.T) {
	skipShort(t)
	emu, url := newTestEmulator(t)
	js := newTestJetStream(t)
	runBridge(t, js, testApps(url), imbridge.Config{})

	r := newTestRoom("demo")
	envs := []bus.Envelope{
		r.event(roomevent.RoomCreated, nil),
		r.joined(2),
		r.event(roomevent.RoomMicUp, map[string]any{"user_id": 2, "seat_index": 0}),
		r.event(roomevent.RoomHeatChanged, map[string]any{"heat": 5}),
		r.event(roomevent.RoomRankChanged, nil),
		r.event(roomevent.RoomGiftSent, map[string]any{"sender_user_id": 2}),
	}
	publish(t, js, envs...)
	waitShown(t, emu, envs...)
	groups := emu.Groups()
	if len(groups) != 1 || groups[0].GroupID != r.groupID() || groups[0].Type != "AVChatRoom" || groups[0].Owner != "1001" || groups[0].Destroyed {
		t.Fatalf("groups %+v", groups)
	}
	for _, skipped := range envs[3:5] {
		if _, ok := emu.Event(skipped.EventID); ok {
			t.Fatalf("%s was sent", skipped.EventType)
		}
	}
	closed := r.event(roomevent.RoomClosed, nil)
	publish(t, js, closed)
	waitShown(t, emu, closed)
	testenv.Eventually(t, 10*time.Second, func() error {
		if g := emu.Groups(); !g[0].Destroyed {
			return fmt.Errorf("group not destroyed")
		}
		return nil
	})
	assertRoomOrder(t, emu.Messages(r.groupID(), 0), envs[1], envs[2], envs[5], closed)
	msgs := emu.Messages(r.groupID(), 0)
	if last := msgs[len(msgs)-1]; last.Priority != "High" {
		t.Fatalf("RoomClosed priority %q", last.Priority)
	}
	waitDrained(t, js)
}

// assertRoomOrder checks the messages show exactly want, in order.
func assertRoomOrder(tb testing.TB, msgs []imemu.Message, want ...bus.Envelope) {
	tb.Helper()
	var got []string
	for _, m := range msgs {
		got = append(got, m.EventIDs...)
	}
	if len(got) != len(want) {
		tb.Fatalf("shown %d events, want %d", len(got), len(want))
	}
	for i, e := range want {
		if got[i] != e.EventID {
			tb.Fatalf("event %d is %s, want %s (%s v%d)", i, got[i], e.EventID, e.EventType, e.RoomVersion)
		}
	}
}

// TestMissingGroupIsCreatedBeforeAMessage: a room whose RoomCreated never
// reached IM (older than the bridge) gets its group on its first message.
func TestMissingGroupIsCreatedBeforeAMessage(t *testing.T) {
	skipShort(t)
	emu, url := newTestEmulator(t)
	js := newTestJetStream(t)
	runBridge(t, js, testApps(url), imbridge.Config{})
	r := newTestRoom(strings.Repeat("a", 32))
	r.version = 41
	e := r.joined(7)
	publish(t, js, e)
	waitShown(t, emu, e)
	if g := emu.Groups(); len(g) != 1 || g[0].GroupID != r.groupID() || len(g[0].GroupID) > 48 {
		t.Fatalf("groups %+v", g)
	}
	st := emu.Stats()
	if st.Errors["10010"] != 1 || st.Calls[imbridge.APICreateGroup] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRetryableErrorsThenSuccess: Tencent errors, HTTP 500s and timeouts
// are retried until IM answers, and each event is shown once.
func TestRetryableErrorsThenSuccess(t *testing.T) {
	skipShort(t)
	for _, f := range []imemu.Fault{
		{Mode: "error", ErrorCode: 90994},
		{Mode: "http500"},
		{Mode: "timeout"},
	} {
		t.Run(f.Mode, func(t *testing.T) {
			emu, url := newTestEmulator(t)
			js := newTestJetStream(t)
			r := newTestRoom("demo")
			created := r.event(roomevent.RoomCreated, nil)
			publish(t, js, created)
			runBridge(t, js, testApps(url), imbridge.Config{Client: imbridge.ClientConfig{CallTimeout: 200 * time.Millisecond}})
			testenv.Eventually(t, 10*time.Second, func() error {
				if len(emu.Groups()) != 1 {
					return fmt.Errorf("no group")
				}
				return nil
			})
			if err := emu.SetFault(f); err != nil {
				t.Fatal(err)
			}
			envs := []bus.Envelope{r.joined(2), r.joined(3)}
			publish(t, js, envs...)
			testenv.Eventually(t, 10*time.Second, func() error {
				st := emu.Stats()
				if st.Calls[imbridge.APISendGroupMsg] < 3 {
					return fmt.Errorf("%d sends", st.Calls[imbridge.APISendGroupMsg])
				}
				return nil
			})
			emu.ClearFault()
			waitShown(t, emu, envs...)
			assertRoomOrder(t, emu.Messages(r.groupID(), 0), envs...)
			waitDrained(t, js)
		})
	}
}

// TestPermanentErrorIsDeadLettered: a refused event goes to the DLQ with
// its code, and the room's later events still flow.
func TestPermanentErrorIsDeadLettered(t *testing.T) {
	skipShort(t)
	emu, url := newTestEmulator(t)
	js := newTestJetStream(t)
	r := newTestRoom("demo")
	publish(t, js, r.event(roomevent.RoomCreated, nil))
	stop := runBridge(t, js, testApps(url), imbridge.Config{})
	testenv.Eventually(t, 10*time.Second, func() error {
		if len(emu.Groups()) != 1 {
			return fmt.Errorf("no group")
		}
		return nil
	})
	if err := emu.SetFault(imemu.Fault{Mode: "error", ErrorCode: 80001, API: imbridge.APISendGroupMsg}); err != nil {
		t.Fatal(err)
	}
	bad := r.joined(2)
	publish(t, js, bad)
	letters := testenv.WaitDeadLetters(t, js, 1)
	if l := letters[0]; l.Consumer != bus.DurableIMBridge || !strings.Contains(l.Reason, "80001") {
		t.Fatalf("letter %+v", l)
	}
	emu.ClearFault()
	good := r.joined(3)
	publish(t, js, good)
	waitShown(t, emu, good)
	if _, ok := emu.Event(bad.EventID); ok {
		t.Fatal("refused event shown")
	}
	stop()
}

// TestGroupRateUnderBurst: a burst into one room never exceeds 40
// messages/s in the emulator, nothing is dropped, each event shown once,
// in order.
func TestGroupRateUnderBurst(t *testing.T) {
	skipShort(t)
	emu, url := newTestEmulator(t)
	js := newTestJetStream(t)
	runBridge(t, js, testApps(url), imbridge.Config{MaxBatchEvents: 1, GroupMessagesPerSecond: 40, GroupBurst: 40})
	// MaxBatchEvents 1 and a limiter at Tencent's own limit: the emulator's
	// rule is what is tested; the bridge's defaults stay well under it.
	r := newTestRoom("demo")
	envs := []bus.Envelope{r.event(roomevent.RoomCreated, nil)}
	for i := range 60 {
		envs = append(envs, r.joined(int64(100+i)))
	}
	publish(t, js, envs...)
	waitShown(t, emu, envs...)
	st := emu.Stats()
	if st.RateDropped > 0 {
		// A dropped message is retried with the same Random: still shown
		// once (checked above); but the defaults must not hit the limit.
		t.Logf("rate dropped %d at the edge (retried)", st.RateDropped)
	}
	assertRoomOrder(t, emu.Messages(r.groupID(), 0), envs[1:]...)

	emu.Reset()
	js2 := newTestJetStream(t)
	runBridge(t, js2, testApps(url), imbridge.Config{MaxBatchEvents: 1})
	r2 := newTestRoom("demo")
	envs2 := []bus.Envelope{r2.event(roomevent.RoomCreated, nil)}
	for i := range 60 {
		envs2 = append(envs2, r2.joined(int64(100+i)))
	}
	publish(t, js2, envs2...)
	waitShown(t, emu, envs2...)
	if st := emu.Stats(); st.RateDropped != 0 {
		t.Fatalf("default limits: %d messages dropped by the 40/s rule", st.RateDropped)
	}
}

// TestBacklogIsBatched: a backlog offered faster than the call rate goes
// out in batched messages within 12 KB, in room order, each event once.
func TestBacklogIsBatched(t *testing.T) {
	skipShort(t)
	emu, url := newTestEmulator(t)
	js := newTestJetStream(t)
	var all []bus.Envelope
	var rms []*testRoom
	for range 5 {
		r := newTestRoom("demo")
		rms = append(rms, r)
		all = append(all, r.event(roomevent.RoomCreated, nil))
	}
	perRoom := map[*testRoom][]bus.Envelope{}
	for i := range 80 {
		for _, r := range rms {
			e := r.event(roomevent.RoomGiftSent, map[string]any{"sender_user_id": i, "gift_name": strings.Repeat("g", 100)})
			perRoom[r] = append(perRoom[r], e)
			all = append(all, e)
		}
	}
	publish(t, js, all...)
	runBridge(t, js, testApps(url), imbridge.Config{CallsPerSecond: 20, CallBurst: 1})
	waitShown(t, emu, all...)
	batched := 0
	for _, r := range rms {
		msgs := emu.Messages(r.groupID(), 0)
		assertRoomOrder(t, msgs, perRoom[r]...)
		for _, m := range msgs {
			if len(m.EventIDs) > 1 {
				batched++
				if m.Desc != imbridge.DescBatch {
					t.Fatalf("batch desc %q", m.Desc)
				}
				var d struct {
					Events []json.RawMessage `json:"events"`
				}
				if err := json.Unmarshal([]byte(m.Data), &d); err != nil || len(d.Events) != len(m.EventIDs) {
					t.Fatalf("batch data: %v", err)
				}
			}
		}
	}
	if batched == 0 {
		t.Fatal("no batched message")
	}
	// A call that timed out after the emulator took it is sent again with
	// the same Random and dropped there as a duplicate: still shown once
	// (waitShown above).
	if st := emu.Stats(); st.Errors["80002"] != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestShutdownLetsTheCallInFlightFinish: cancelling the bridge during a
// slow call waits for its answer and acks its events.
func TestShutdownLetsTheCallInFlightFinish(t *testing.T) {
	skipShort(t)
	emu, err := imemu.New(imemu.Config{Apps: []imbridge.Application{{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: testKey}}})
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 16)
	release := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "send_group_msg") {
			entered <- struct{}{}
			<-release
		}
		emu.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	js := newTestJetStream(t)
	r := newTestRoom("demo")
	e := r.joined(2)
	publish(t, js, r.event(roomevent.RoomCreated, nil), e)
	stop := runBridge(t, js, testApps(srv.URL), imbridge.Config{Client: imbridge.ClientConfig{CallTimeout: 5 * time.Second}})
	<-entered
	stopped := make(chan struct{})
	go func() {
		stop()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("bridge stopped before its call finished")
	case <-time.After(200 * time.Millisecond):
	}
	once.Do(func() { close(release) })
	<-stopped
	if ev, ok := emu.Event(e.EventID); !ok || ev.Shown != 1 {
		t.Fatalf("event after shutdown: %+v %v", ev, ok)
	}
	waitDrained(t, js)
}

// TestNoApplicationDoesNotConsume: without any Tencent configuration the
// bridge leaves the events in the durable.
func TestNoApplicationDoesNotConsume(t *testing.T) {
	skipShort(t)
	js := newTestJetStream(t)
	r := newTestRoom("demo")
	publish(t, js, r.event(roomevent.RoomCreated, nil), r.joined(2))
	reg, m := newTestMetrics(t)
	b, err := imbridge.New(js, imbridge.Apps{}, imbridge.Config{}, testenv.Logger(t), m, nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(runCtx) }()
	// Only time can show that nothing is consumed: while Run runs, the
	// durable is watched for a while, and nobody pulls from it.
	for range 5 {
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := js.Consumer(ctx, bus.StreamName, bus.DurableIMBridge)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if info := c.CachedInfo(); info.NumWaiting != 0 || info.Delivered.Consumer != 0 || info.NumPending != 2 {
			t.Fatalf("waiting pulls %d, delivered %d, pending %d", info.NumWaiting, info.Delivered.Consumer, info.NumPending)
		}
	}
	if v, ok := testenv.Metric(t, reg, "voiceroom_imbridge_configured"); !ok || v != 0 {
		t.Fatalf("configured gauge %v (exists %v)", v, ok)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, bus.StreamName, bus.DurableIMBridge)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 2 || info.Delivered.Consumer != 0 {
		t.Fatalf("pending %d, delivered %d", info.NumPending, info.Delivered.Consumer)
	}
}

// TestRunFailsWithoutDurable: a bridge that cannot start says so and
// returns, instead of waiting for its context.
func TestRunFailsWithoutDurable(t *testing.T) {
	skipShort(t)
	_, url := newTestEmulator(t)
	js := newTestJetStream(t)
	b, err := imbridge.New(js, testApps(url), imbridge.Config{Consumer: bus.ConsumerRunConfig{Durable: "missing"}}, testenv.Logger(t), nil, nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run without its durable returned nil")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run without its durable did not return")
	}
}
