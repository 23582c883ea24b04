package imbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/imbridge"
	"voiceroom/imemu"
	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
)

const (
	testSDKAppID = 1400000001
	testAdmin    = "administrator"
	testKey      = "test-secret-key"
)

// newTestEmulator serves an emulator accepting apps (the test app when
// none) and returns it with its base URL.
func newTestEmulator(tb testing.TB, apps ...imbridge.Application) (*imemu.Emulator, string) {
	tb.Helper()
	if len(apps) == 0 {
		apps = []imbridge.Application{{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: testKey}}
	}
	emu, err := imemu.New(imemu.Config{Apps: apps})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(emu)
	tb.Cleanup(srv.Close)
	return emu, srv.URL
}

// testApps is one default application at url.
func testApps(url string) imbridge.Apps {
	return imbridge.Apps{Default: &imbridge.Application{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: testKey, Domain: url}}
}

// newTestJetStream is an embedded JetStream with the imbridge durable as
// the product provisions it: no delivery limit.
func newTestJetStream(tb testing.TB) jetstream.JetStream {
	tb.Helper()
	conn := testenv.NewJetStream(tb)
	js := conn.JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.StreamConfig{}, bus.ConsumerConfig{Durable: bus.DurableIMBridge, MaxDeliver: -1, MaxAckPending: 20000}); err != nil {
		tb.Fatal(err)
	}
	return js
}

// testRoom builds events of one room in room order.
type testRoom struct {
	app, id string
	version int64
	owner   int64
	status  string
}

func newTestRoom(app string) *testRoom {
	return &testRoom{app: app, id: app + "_" + uuid.NewString(), owner: 1001, status: roomevent.StatusActive}
}

func (r *testRoom) groupID() string { return roomevent.IMGroupID(r.app, r.id) }

// event returns the room's next event of type t with body fields and the
// room card in its payload.
func (r *testRoom) event(t string, body map[string]any) bus.Envelope {
	r.version++
	if t == roomevent.RoomClosed {
		r.status = roomevent.StatusClosed
	}
	p := map[string]any{}
	for k, v := range body {
		p[k] = v
	}
	p["room"] = map[string]any{"room_id": r.id, "im_group_id": r.groupID(), "owner_user_id": r.owner,
		"title": "Room " + r.id[:8], "status": r.status, "room_version": r.version}
	payload, _ := json.Marshal(p)
	return bus.Envelope{EventID: uuid.NewString(), AppCode: r.app, RoomID: r.id, RoomVersion: r.version, EventType: t,
		CommandID: uuid.NewString(), OccurredAtMs: time.Now().UnixMilli(), Payload: payload}
}

func (r *testRoom) joined(user int64) bus.Envelope {
	return r.event(roomevent.RoomUserJoined, map[string]any{"user_id": user})
}

func publish(tb testing.TB, js jetstream.JetStream, envs ...bus.Envelope) {
	tb.Helper()
	p, err := bus.NewPublisher(js, bus.PublisherConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range p.PublishEnvelopes(ctx, envs) {
		if r.Err != nil {
			tb.Fatal(r.Err)
		}
	}
}

// runBridge runs a bridge until the test ends (or stop is called) and
// returns stop, which waits for Run and returns how long it took.
func runBridge(tb testing.TB, js jetstream.JetStream, apps imbridge.Apps, cfg imbridge.Config) (stop func() time.Duration) {
	tb.Helper()
	return runBridgeMetrics(tb, js, apps, cfg, nil)
}

// runBridgeMetrics is runBridge recording into m.
func runBridgeMetrics(tb testing.TB, js jetstream.JetStream, apps imbridge.Apps, cfg imbridge.Config, m *imbridge.Metrics) (stop func() time.Duration) {
	tb.Helper()
	return runBridgeClock(tb, js, apps, cfg, m, time.Now)
}

// runBridgeClock is runBridgeMetrics on the clock now.
func runBridgeClock(tb testing.TB, js jetstream.JetStream, apps imbridge.Apps, cfg imbridge.Config, m *imbridge.Metrics, now func() time.Time) (stop func() time.Duration) {
	tb.Helper()
	if cfg.StatsInterval == 0 {
		cfg.StatsInterval = time.Second
	}
	if cfg.RetryDelays == nil {
		cfg.RetryDelays = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}
	}
	if cfg.Client.CallTimeout == 0 {
		cfg.Client.CallTimeout = 500 * time.Millisecond
	}
	b, err := imbridge.New(js, apps, cfg, testenv.Logger(tb), m, nil, now)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	var stopped atomic.Bool
	stop = func() time.Duration {
		if !stopped.CompareAndSwap(false, true) {
			return 0
		}
		start := time.Now()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("bridge run: %v", err)
			}
		case <-time.After(30 * time.Second):
			tb.Fatal("bridge did not stop")
		}
		return time.Since(start)
	}
	tb.Cleanup(func() { stop() })
	return stop
}

// waitShown waits until every event was shown exactly once.
func waitShown(tb testing.TB, emu *imemu.Emulator, envs ...bus.Envelope) {
	tb.Helper()
	testenv.Eventually(tb, 20*time.Second, func() error {
		for _, e := range envs {
			if _, ok := eventKind(e.EventType); !ok {
				continue
			}
			ev, ok := emu.Event(e.EventID)
			if !ok {
				return fmt.Errorf("event %s (%s v%d) not shown", e.EventID, e.EventType, e.RoomVersion)
			}
			if ev.Shown != 1 {
				return fmt.Errorf("event %s shown %d times", e.EventID, ev.Shown)
			}
		}
		return nil
	})
}

// eventKind reports whether an event type is shown as a message.
func eventKind(t string) (string, bool) {
	switch t {
	case roomevent.RoomCreated, roomevent.RoomHeatChanged, roomevent.RoomRankChanged, roomevent.RoomVisibleRegionChanged:
		return t, false
	}
	return t, true
}

// waitDrained waits until the durable has nothing unacknowledged and
// nothing pending.
func waitDrained(tb testing.TB, js jetstream.JetStream) {
	tb.Helper()
	testenv.Eventually(tb, 20*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := js.Consumer(ctx, bus.StreamName, bus.DurableIMBridge)
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("pending %d, ack pending %d", info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

// newTestMetrics is the bridge's metrics on a registry of their own.
func newTestMetrics(tb testing.TB) (*prometheus.Registry, *imbridge.Metrics) {
	tb.Helper()
	reg := prometheus.NewRegistry()
	m, err := imbridge.NewMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	return reg, m
}
