package imbridge_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
	"voiceroom/imbridge"
	"voiceroom/imemu"
	"voiceroom/roomevent"
)

// benchEnv is an emulator that records every call and every shown event,
// JetStream, and rooms whose groups already exist.
type benchEnv struct {
	emu   *imemu.Emulator
	url   string
	js    jetstream.JetStream
	rooms []*testRoom

	mu       sync.Mutex
	calls    map[string][]time.Time // api → call times
	sentAt   map[string]time.Time   // event_id → publish time
	latency  []time.Duration        // publish → shown
	batches  []int                  // events per shown message
	shown    map[string]int
	expected int
	done     chan struct{}
}

func newBenchEnv(b *testing.B, nRooms int) *benchEnv {
	b.Helper()
	e := &benchEnv{calls: map[string][]time.Time{}, sentAt: map[string]time.Time{}, shown: map[string]int{}, done: make(chan struct{})}
	emu, err := imemu.New(imemu.Config{
		Apps: []imbridge.Application{{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: testKey}},
		OnShown: func(ids []string, at time.Time) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.batches = append(e.batches, len(ids))
			for _, id := range ids {
				e.shown[id]++
				if t, ok := e.sentAt[id]; ok && e.shown[id] == 1 {
					e.latency = append(e.latency, at.Sub(t))
				}
			}
			if e.expected > 0 && len(e.latency) >= e.expected {
				select {
				case <-e.done:
				default:
					close(e.done)
				}
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	e.emu = emu
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if api, ok := strings.CutPrefix(r.URL.Path, "/v4/"); ok {
			e.mu.Lock()
			e.calls[api] = append(e.calls[api], time.Now())
			e.mu.Unlock()
		}
		emu.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	e.url = srv.URL
	e.js = newTestJetStream(b)

	// Active rooms: their groups exist before the clock starts.
	c, err := imbridge.NewClient(imbridge.Application{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: testKey, Domain: srv.URL},
		imbridge.ClientConfig{}, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for range nRooms {
		r := newTestRoom("bench")
		e.rooms = append(e.rooms, r)
		if err := c.Call(context.Background(), imbridge.APICreateGroup,
			map[string]any{"Type": "AVChatRoom", "GroupId": r.groupID(), "Name": "bench"}, nil); err != nil {
			b.Fatal(err)
		}
	}
	e.mu.Lock()
	e.calls = map[string][]time.Time{}
	e.mu.Unlock()
	return e
}

// event is a realistic shown event of room i: a gift with its room card.
func (e *benchEnv) event(i, n int) bus.Envelope {
	r := e.rooms[i%len(e.rooms)]
	return r.event(roomevent.RoomGiftSent, map[string]any{"sender_user_id": 1000 + n, "receiver_user_id": 1001,
		"gift_id": 7, "gift_name": "rose", "count": 1, "value": 10, "heat_delta": 10})
}

// publish stores envs, recording when each left.
func (e *benchEnv) publish(b *testing.B, p *bus.Publisher, envs []bus.Envelope) {
	now := time.Now()
	e.mu.Lock()
	for i := range envs {
		envs[i].OccurredAtMs = now.UnixMilli()
		e.sentAt[envs[i].EventID] = now
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range p.PublishEnvelopes(ctx, envs) {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}

// report adds the run's figures to b and returns them as a line.
func (e *benchEnv) report(b *testing.B, elapsed time.Duration, want int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	lost, twice := 0, 0
	for id := range e.sentAt {
		switch n := e.shown[id]; {
		case n == 0:
			lost++
		case n > 1:
			twice++
		}
	}
	sends := e.calls[imbridge.APISendGroupMsg]
	maxWindow := 0
	for i, j := 0, 0; i < len(sends); i++ {
		for sends[i].Sub(sends[j]) >= time.Second {
			j++
		}
		maxWindow = max(maxWindow, i-j+1)
	}
	slices.Sort(e.latency)
	slices.Sort(e.batches)
	pct := func(p float64) time.Duration {
		if len(e.latency) == 0 {
			return 0
		}
		return e.latency[min(len(e.latency)-1, int(p*float64(len(e.latency))))]
	}
	bpct := func(p float64) int {
		if len(e.batches) == 0 {
			return 0
		}
		return e.batches[min(len(e.batches)-1, int(p*float64(len(e.batches))))]
	}
	st := e.emu.Stats()
	b.ReportMetric(float64(want)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(len(sends))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(maxWindow), "max-calls-in-1s")
	b.ReportMetric(float64(want)/float64(max(1, len(e.batches))), "events/msg")
	b.ReportMetric(float64(pct(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lost), "lost")
	b.ReportMetric(float64(twice), "shown-twice")
	b.Logf("%d events in %s: %.0f events/s, %d send calls (%.0f/s, at most %d in any second), batch p50 %d p99 %d max %d, "+
		"latency p50 %s p99 %s max %s, lost %d, shown twice %d, rate dropped %d, duplicates dropped %d",
		want, elapsed.Round(time.Millisecond), float64(want)/elapsed.Seconds(), len(sends), float64(len(sends))/elapsed.Seconds(), maxWindow,
		bpct(0.5), bpct(0.99), bpct(1), pct(0.5), pct(0.99), pct(1), lost, twice, st.RateDropped, st.DuplicatesDropped)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func startBench(b *testing.B, e *benchEnv) (stop func() time.Duration) {
	b.Helper()
	bridge, err := imbridge.New(e.js, testApps(e.url), imbridge.Config{}, nil, nil, nil, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bridge.Run(ctx) }()
	return func() time.Duration {
		start := time.Now()
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
		return time.Since(start)
	}
}

// BenchmarkBacklog carries a backlog spread over 1,000 active rooms
// (VOICEROOM_BENCH_ROOMS, 20 events each: VOICEROOM_BENCH_EVENTS_PER_ROOM)
// with the default limits (160 send calls/s): events/s carried, calls/s,
// events per message, and the wait of each event (publish to shown).
func BenchmarkBacklog(b *testing.B) {
	if testing.Short() {
		b.Skip("needs JetStream")
	}
	nRooms, perRoom := envInt("VOICEROOM_BENCH_ROOMS", 1000), envInt("VOICEROOM_BENCH_EVENTS_PER_ROOM", 20)
	for range b.N {
		b.StopTimer()
		e := newBenchEnv(b, nRooms)
		p, err := bus.NewPublisher(e.js, bus.PublisherConfig{})
		if err != nil {
			b.Fatal(err)
		}
		envs := make([]bus.Envelope, 0, nRooms*perRoom)
		for n := range perRoom {
			for i := range nRooms {
				envs = append(envs, e.event(i, n))
			}
		}
		e.expected = len(envs)
		e.publish(b, p, envs)
		b.StartTimer()
		start := time.Now()
		stop := startBench(b, e)
		select {
		case <-e.done:
		case <-time.After(5 * time.Minute):
			b.Fatal("backlog not carried in 5 minutes")
		}
		elapsed := time.Since(start)
		b.StopTimer()
		stop()
		e.report(b, elapsed, len(envs))
	}
}

// BenchmarkOffered offers events at a steady rate over active rooms while
// the bridge runs, then waits for the last: VOICEROOM_BENCH_RATE events/s
// (default 100) over VOICEROOM_BENCH_ROOMS rooms (default 100) for
// VOICEROOM_BENCH_SECONDS (default 10). At 100 events/s it gives the
// publish (≈ commit) to emulator receipt latency; above what 160 calls/s
// carry one by one it shows the queueing, latency and batch sizes.
func BenchmarkOffered(b *testing.B) {
	if testing.Short() {
		b.Skip("needs JetStream")
	}
	rate, nRooms, seconds := envInt("VOICEROOM_BENCH_RATE", 100), envInt("VOICEROOM_BENCH_ROOMS", 100), envInt("VOICEROOM_BENCH_SECONDS", 10)
	for range b.N {
		b.StopTimer()
		e := newBenchEnv(b, nRooms)
		p, err := bus.NewPublisher(e.js, bus.PublisherConfig{})
		if err != nil {
			b.Fatal(err)
		}
		total := rate * seconds
		e.expected = total
		stop := startBench(b, e)
		b.StartTimer()
		start := time.Now()
		const tick = 10 * time.Millisecond
		sent := 0
		t := time.NewTicker(tick)
		for sent < total {
			<-t.C
			due := min(total, int(float64(rate)*time.Since(start).Seconds())+1)
			if due <= sent {
				continue
			}
			envs := make([]bus.Envelope, 0, due-sent)
			for n := sent; n < due; n++ {
				envs = append(envs, e.event(n, n))
			}
			e.publish(b, p, envs)
			sent = due
		}
		t.Stop()
		select {
		case <-e.done:
		case <-time.After(5 * time.Minute):
			b.Fatal("offered events not carried in 5 minutes")
		}
		elapsed := time.Since(start)
		b.StopTimer()
		stop()
		e.report(b, elapsed, total)
		b.Logf("offered %d events/s over %d rooms for %ds", rate, nRooms, seconds)
	}
}

// BenchmarkGuard measures the join-group decision alone (no HTTP) over
// 10,000 rooms; see gateway's BenchmarkIMCallbackHTTP for the round trip.
func BenchmarkGuard(b *testing.B) {
	members := fakeMembers{}
	for i := range 10000 {
		members[fmt.Sprintf("g%d", i)] = struct {
			app   string
			users map[int64]bool
		}{app: "demo", users: map[int64]bool{int64(i): true}}
	}
	apps := imbridge.Apps{Default: &imbridge.Application{SDKAppID: 1400000001, Admin: "a", SecretKey: "k", CallbackToken: "t"}}
	g, err := imbridge.NewGuard(apps, members, imbridge.GuardConfig{}, nil, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	q := imbridge.CallbackQuery{SDKAppID: "1400000001", CallbackCommand: imbridge.CommandBeforeApplyJoinGroup, Sign: imbridge.Sign("t", ts), RequestTime: ts}
	body := []byte(`{"CallbackCommand":"Group.CallbackBeforeApplyJoinGroup","GroupId":"g77","Requestor_Account":"77"}`)
	b.ResetTimer()
	for range b.N {
		if r := g.Handle(q, body); r.ErrorCode != 0 {
			b.Fatal(r)
		}
	}
}
