package imbridge_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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

// chatMuted is the room's next RoomChatMuted of user until untilMs (0
// lifts it).
func (r *testRoom) chatMuted(user, untilMs int64) bus.Envelope {
	return r.event(roomevent.RoomChatMuted, map[string]any{"user_id": user, "by_user_id": r.owner, "until_ms": untilMs})
}

// letterEventID is the event id of a dead letter's original.
func letterEventID(tb testing.TB, l bus.DeadLetter) string {
	tb.Helper()
	e, err := bus.DecodeEnvelope(l.Data)
	if err != nil {
		tb.Fatal(err)
	}
	return e.EventID
}

// TestChatMuteAppliedBeforeItsMessage: a RoomChatMuted mutes the user in
// the room's group with MuteTime the seconds left at delivery (rounded up),
// then its message is shown (High) in room order; one whose until_ms is 0
// lifts the mute and one already past sends MuteTime 0 too. The mute is
// applied after the events before it are shown and before its own message
// (a backlog's batch stops in front of it), and the calls count under
// their API.
func TestChatMuteAppliedBeforeItsMessage(t *testing.T) {
	skipShort(t)
	emu, err := imemu.New(imemu.Config{Apps: []imbridge.Application{{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: testKey}}})
	if err != nil {
		t.Fatal(err)
	}
	r := newTestRoom("demo")
	clk := testenv.NewClock(time.Now())
	nowMs := clk.Now().UnixMilli()
	envs := []bus.Envelope{r.event(roomevent.RoomCreated, nil), r.joined(7), r.joined(8), r.chatMuted(7, nowMs+90_500), r.joined(9)}
	muted := envs[3]
	// What the emulator held when calls arrived: the events shown at each
	// forbid_send_msg, the mutes at each message carrying the mute's event.
	var mu sync.Mutex
	var shownAtMute, mutesAtItsMessage []int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		mu.Lock()
		switch {
		case strings.HasSuffix(req.URL.Path, "/forbid_send_msg"):
			shown := 0
			for _, m := range emu.Messages(r.groupID(), 0) {
				shown += len(m.EventIDs)
			}
			shownAtMute = append(shownAtMute, shown)
		case strings.HasSuffix(req.URL.Path, "/send_group_msg") && bytes.Contains(body, []byte(muted.EventID)):
			mutesAtItsMessage = append(mutesAtItsMessage, len(emu.Mutes(r.groupID())))
		}
		mu.Unlock()
		emu.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	js := newTestJetStream(t)
	reg, m := newTestMetrics(t)
	publish(t, js, envs...) // a backlog: the events before the mute may go in one message
	runBridgeClock(t, js, testApps(srv.URL), imbridge.Config{}, m, clk.Now)
	waitShown(t, emu, envs...)
	want := []imemu.Mute{{GroupID: r.groupID(), Account: "7", MuteTime: 91, Muted: true}}
	assertMutes(t, emu, r.groupID(), want)
	msgs := emu.Messages(r.groupID(), 0)
	assertRoomOrder(t, msgs, envs[1:]...)
	for _, msg := range msgs {
		if i := slices.Index(msg.EventIDs, muted.EventID); i >= 0 && (i != 0 || msg.Priority != "High") {
			t.Fatalf("the mute's message %+v: want the mute first, High", msg)
		}
	}
	mu.Lock()
	if !slices.Equal(shownAtMute, []int{2}) || !slices.Equal(mutesAtItsMessage, []int{1}) {
		t.Fatalf("events shown at the mute %v (want [2]), mutes at its message %v (want [1])", shownAtMute, mutesAtItsMessage)
	}
	mu.Unlock()

	lifted, past := r.chatMuted(7, 0), r.chatMuted(8, nowMs-1)
	publish(t, js, lifted, past)
	waitShown(t, emu, lifted, past)
	want = []imemu.Mute{{GroupID: r.groupID(), Account: "7"}, {GroupID: r.groupID(), Account: "8"}}
	assertMutes(t, emu, r.groupID(), want)
	assertRoomOrder(t, emu.Messages(r.groupID(), 0), append(envs[1:], lifted, past)...)
	waitDrained(t, js)
	if n := testenv.MustMetric(t, reg, "voiceroom_imbridge_call_duration_seconds", "api", imbridge.APIForbidSendMsg, "code", "0"); n != 3 {
		t.Fatalf("forbid_send_msg calls counted OK: %v, want 3", n)
	}
	if n := testenv.MustMetric(t, reg, "voiceroom_imbridge_events_total", "event_type", roomevent.RoomChatMuted, "outcome", "delivered"); n != 3 {
		t.Fatalf("RoomChatMuted delivered: %v, want 3", n)
	}
}

// assertMutes checks the emulator's mutes in group, ignoring when they
// were set.
func assertMutes(tb testing.TB, emu *imemu.Emulator, group string, want []imemu.Mute) {
	tb.Helper()
	got := emu.Mutes(group)
	for i := range got {
		got[i].SetAtMs, got[i].UntilMs = 0, 0
	}
	if !slices.Equal(got, want) {
		tb.Fatalf("mutes %+v, want %+v", got, want)
	}
}

// TestChatMuteCreatesAMissingGroup: a mute for a room whose group does not
// exist (10010) creates the group, then mutes.
func TestChatMuteCreatesAMissingGroup(t *testing.T) {
	skipShort(t)
	emu, url := newTestEmulator(t)
	js := newTestJetStream(t)
	clk := testenv.NewClock(time.Now())
	runBridgeClock(t, js, testApps(url), imbridge.Config{}, nil, clk.Now)
	r := newTestRoom("demo")
	r.version = 9
	e := r.chatMuted(7, clk.Now().UnixMilli()+60_000)
	publish(t, js, e)
	waitShown(t, emu, e)
	assertMutes(t, emu, r.groupID(), []imemu.Mute{{GroupID: r.groupID(), Account: "7", MuteTime: 60, Muted: true}})
	if st := emu.Stats(); st.Errors["10010"] != 1 || st.Calls[imbridge.APICreateGroup] != 1 || st.Calls[imbridge.APIForbidSendMsg] != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestChatMuteRefusedIsDeadLettered: a mute Tencent refuses (a permanent
// code) and a RoomChatMuted without a user are dead-lettered without their
// message, and the room's later events carry on.
func TestChatMuteRefusedIsDeadLettered(t *testing.T) {
	skipShort(t)
	emu, url := newTestEmulator(t)
	js := newTestJetStream(t)
	reg, m := newTestMetrics(t)
	clk := testenv.NewClock(time.Now())
	r := newTestRoom("demo")
	created := r.event(roomevent.RoomCreated, nil)
	publish(t, js, created)
	runBridgeClock(t, js, testApps(url), imbridge.Config{}, m, clk.Now)
	testenv.Eventually(t, 10*time.Second, func() error {
		if len(emu.Groups()) != 1 {
			return fmt.Errorf("no group")
		}
		return nil
	})
	if err := emu.SetFault(imemu.Fault{Mode: "error", ErrorCode: imbridge.CodeNoPermission, API: imbridge.APIForbidSendMsg}); err != nil {
		t.Fatal(err)
	}
	refused := r.chatMuted(7, clk.Now().UnixMilli()+60_000)
	noUser := r.event(roomevent.RoomChatMuted, map[string]any{"until_ms": clk.Now().UnixMilli() + 60_000})
	later := r.joined(8)
	publish(t, js, refused, noUser, later)
	waitShown(t, emu, later)
	letters := testenv.WaitDeadLetters(t, js, 2)
	for i, want := range []struct {
		id, reason string
	}{{refused.EventID, "error 10007"}, {noUser.EventID, imbridge.ErrBadEvent.Error()}} {
		l := letters[i]
		if got := letterEventID(t, l); got != want.id || l.Consumer != bus.DurableIMBridge || !strings.Contains(l.Reason, want.reason) {
			t.Fatalf("letter %d: event %s, consumer %s, reason %q; want event %s, reason with %q", i, got, l.Consumer, l.Reason, want.id, want.reason)
		}
	}
	for _, e := range []bus.Envelope{refused, noUser} {
		if _, ok := emu.Event(e.EventID); ok {
			t.Fatalf("dead-lettered %s shown", e.EventID)
		}
	}
	assertRoomOrder(t, emu.Messages(r.groupID(), 0), later)
	if got := emu.Mutes(r.groupID()); len(got) != 0 {
		t.Fatalf("mutes %+v", got)
	}
	if n := testenv.MustMetric(t, reg, "voiceroom_imbridge_call_duration_seconds", "api", imbridge.APIForbidSendMsg, "code", "10007"); n != 1 {
		t.Fatalf("forbid_send_msg calls counted 10007: %v, want 1", n)
	}
	if n := testenv.MustMetric(t, reg, "voiceroom_imbridge_events_total", "event_type", roomevent.RoomChatMuted, "outcome", "dead_lettered"); n != 2 {
		t.Fatalf("RoomChatMuted dead-lettered: %v, want 2", n)
	}
	waitDrained(t, js)
}

// TestChatMuteRetriedHoldsTheRoom: a retryable failure of the mute is
// retried, the room's later events wait behind it (none shown, though
// another room flows), and once Tencent answers the mute is applied and
// everything is shown once, in room order.
func TestChatMuteRetriedHoldsTheRoom(t *testing.T) {
	skipShort(t)
	emu, url := newTestEmulator(t)
	js := newTestJetStream(t)
	reg, m := newTestMetrics(t)
	clk := testenv.NewClock(time.Now())
	r, other := newTestRoom("demo"), newTestRoom("demo")
	publish(t, js, r.event(roomevent.RoomCreated, nil), other.event(roomevent.RoomCreated, nil))
	runBridgeClock(t, js, testApps(url), imbridge.Config{}, m, clk.Now)
	testenv.Eventually(t, 10*time.Second, func() error {
		if len(emu.Groups()) != 2 {
			return fmt.Errorf("%d groups", len(emu.Groups()))
		}
		return nil
	})
	if err := emu.SetFault(imemu.Fault{Mode: "error", ErrorCode: 10002, API: imbridge.APIForbidSendMsg}); err != nil {
		t.Fatal(err)
	}
	muted := r.chatMuted(7, clk.Now().UnixMilli()+120_000)
	held := []bus.Envelope{r.joined(8), r.event(roomevent.RoomMicUp, map[string]any{"user_id": 8, "seat_index": 0})}
	publish(t, js, append([]bus.Envelope{muted}, held...)...)
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := emu.Stats().Calls[imbridge.APIForbidSendMsg]; n < 3 {
			return fmt.Errorf("%d forbid_send_msg calls", n)
		}
		return nil
	})
	flowing := other.joined(9)
	publish(t, js, flowing)
	waitShown(t, emu, flowing)
	for _, e := range append([]bus.Envelope{muted}, held...) {
		if _, ok := emu.Event(e.EventID); ok {
			t.Fatalf("%s v%d shown while the mute before it fails", e.EventType, e.RoomVersion)
		}
	}
	emu.ClearFault()
	waitShown(t, emu, append([]bus.Envelope{muted}, held...)...)
	assertRoomOrder(t, emu.Messages(r.groupID(), 0), append([]bus.Envelope{muted}, held...)...)
	assertMutes(t, emu, r.groupID(), []imemu.Mute{{GroupID: r.groupID(), Account: "7", MuteTime: 120, Muted: true}})
	waitDrained(t, js)
	if n := testenv.MustMetric(t, reg, "voiceroom_imbridge_call_duration_seconds", "api", imbridge.APIForbidSendMsg, "code", "10002"); n < 3 {
		t.Fatalf("forbid_send_msg calls counted 10002: %v, want at least 3", n)
	}
	if n := testenv.MustMetric(t, reg, "voiceroom_imbridge_events_total", "event_type", roomevent.RoomChatMuted, "outcome", "retried"); n < 3 {
		t.Fatalf("RoomChatMuted retried: %v, want at least 3", n)
	}
	if n := testenv.MustMetric(t, reg, "voiceroom_imbridge_call_duration_seconds", "api", imbridge.APIForbidSendMsg, "code", "0"); n != 1 {
		t.Fatalf("forbid_send_msg calls counted OK: %v, want 1", n)
	}
}
