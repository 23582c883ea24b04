package activity

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
)

// BenchmarkCatchUp reads a retroactive gift_value_sent leaderboard back
// over a backlog of VOICEROOM_BENCH_CATCHUP_EVENTS (default 1,000,000)
// events of its app: the mix of a busy app, mostly joins, listeners'
// leaves and heat changes, 5% gifts (which count).
//
//	go test -run '^$' -bench BenchmarkCatchUp -benchtime 1x -timeout 60m ./activity/
//
// It reports events/s, the read back from the activity's start to the
// stream's end (every event read, the gifts scored in MySQL, 500 a
// transaction), beside ceiling_events/s, a bare ordered consumer reading
// the same events the same way (batches of 500), nothing decoded or
// scored, measured in the same run just before. Then live_events/s, the
// live scorer draining VOICEROOM_BENCH_LIVE_EVENTS (default 100,000)
// events of another app (the same mix, its gifts counting for a live
// activity) alone, and live_with_catchup_events/s, a second live durable
// draining the same events while a read back of the backlog runs: what a
// retroactive activity costs the live consumers; and
// live_with_paced_catchup_events/s, a third durable beside a read back
// held to VOICEROOM_BENCH_CATCHUP_RATE (default 2,000) events/s
// (VOICEROOM_ACTIVITY_CATCHUP_MAX_RATE).
func BenchmarkCatchUp(b *testing.B) {
	n := testenv.EnvInt("VOICEROOM_BENCH_CATCHUP_EVENTS", 1_000_000)
	live := testenv.EnvInt("VOICEROOM_BENCH_LIVE_EVENTS", 100_000)
	e := newScoreEnv(b, nil)
	e.setClock(t0 + 6*day)
	ctx := context.Background()
	for _, d := range []string{"live1", "live2", "live3"} {
		if err := bus.Provision(ctx, e.conn.JetStream(), bus.StreamConfig{},
			bus.ConsumerConfig{Durable: d, FilterSubject: bus.SubjectPrefix + ".a2.>", MaxDeliver: -1}.WithDefaults()); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	e.publishMix(b, "a1", n, t0)
	e.publishMix(b, "a2", live, t0)
	b.Logf("published %d + %d events in %s", n, live, time.Since(start).Round(time.Millisecond))
	liveAct := e.activity(Activity{AppCode: "a2", Metric: GiftValueSent})

	// The ceiling: a bare ordered consumer of the app's events.
	from := time.UnixMilli(t0)
	cons, err := e.stream().OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{bus.SubjectPrefix + ".a1.>"},
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &from})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start = time.Now()
	got := 0
	for got < n {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		for range batch.Messages() {
			got++
		}
	}
	ceiling := float64(n) / time.Since(start).Seconds()

	// The read back, to its joining.
	readBack := func(ctx context.Context, rate int) (time.Duration, error) {
		id := e.retro(Activity{Metric: GiftValueSent})
		c := e.newCatchUp("bench", 500, nil)
		c.cfg.MaxRate = rate
		joined := errors.New("joining")
		c.afterJoining = func(int64, uint64) {}
		c.afterBatch = func(id int64, _ int) error {
			if cu, _ := e.catchupOf(id); cu.Seq >= uint64(n) {
				return joined
			}
			return nil
		}
		if held, err := c.takeLease(ctx, id); err != nil || !held {
			return 0, fmt.Errorf("lease: %v %v", held, err)
		}
		start := time.Now()
		err := c.readBack(ctx, id)
		took := time.Since(start)
		if !errors.Is(err, joined) {
			return took, err
		}
		return took, nil
	}
	took, err := readBack(ctx, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/took.Seconds(), "events/s")
	b.ReportMetric(ceiling, "ceiling_events/s")

	// The live scorer alone, then beside a read back.
	drain := func(durable string) float64 {
		s, err := NewScorer(e.db, e.rdb, e.conn.JetStream(), bus.ConsumerRunConfig{Durable: durable, NakDelays: []time.Duration{50 * time.Millisecond}},
			nil, e.cfg, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); s.Run(lctx) }() //nolint:errcheck // it only fails to start, seen below
		start := time.Now()
		testenv.Eventually(b, 30*time.Minute, func() error {
			c, err := e.stream().Consumer(ctx, durable)
			if err != nil {
				return err
			}
			info, err := c.Info(ctx)
			if err != nil {
				return err
			}
			if info.AckFloor.Stream < uint64(n+live) {
				return fmt.Errorf("%s acked up to %d", durable, info.AckFloor.Stream)
			}
			return nil
		})
		rate := float64(live) / time.Since(start).Seconds()
		cancel()
		<-done
		return rate
	}
	b.ReportMetric(drain("live1"), "live_events/s")
	beside := func(durable string, rate int) float64 {
		rctx, cancel := context.WithCancel(ctx)
		bg := make(chan error, 1)
		go func() { _, err := readBack(rctx, rate); bg <- err }()
		r := drain(durable)
		cancel()
		if err := <-bg; err != nil && !errors.Is(err, context.Canceled) {
			b.Logf("background read back: %v", err)
		}
		return r
	}
	b.ReportMetric(beside("live2", 0), "live_with_catchup_events/s")
	paced := testenv.EnvInt("VOICEROOM_BENCH_CATCHUP_RATE", 2000)
	b.ReportMetric(beside("live3", paced), "live_with_paced_catchup_events/s")
	if len(e.scores(liveAct, t0)) == 0 {
		b.Fatal("the live activity scored nothing")
	}
}

// publishMix stores n events of app in ROOM_EVENTS from atMs on, 10 ms
// apart, in 1,000 rooms: 45% joins, 40% leaves, 10% heat changes, 5%
// gifts.
func (e *scoreEnv) publishMix(tb testing.TB, app string, n int, atMs int64) {
	tb.Helper()
	rooms := make([]room, 1000)
	for i := range rooms {
		rooms[i] = e.room(app, int64(i%5+10), int64(i+1))
	}
	ctx := context.Background()
	var envs []bus.Envelope
	for i := range n {
		r := rooms[i%len(rooms)]
		u := int64(i%10_000 + 1)
		at := atMs + int64(i)*10
		switch k := i % 20; {
		case k == 0:
			envs = append(envs, e.gift(r, u, u+1, 1, int64(i%100+1), 1, at))
		case k <= 2:
			envs = append(envs, e.event(r, roomevent.RoomHeatChanged, nil, at))
		case k <= 10:
			envs = append(envs, e.event(r, roomevent.RoomUserLeft, roomevent.UserLeft{UserID: u, Reason: "user"}, at))
		default:
			envs = append(envs, e.event(r, roomevent.RoomUserJoined, nil, at))
		}
		if len(envs) == 1000 || i == n-1 {
			for _, res := range e.pub.PublishEnvelopes(ctx, envs) {
				if res.Err != nil {
					tb.Fatal(res.Err)
				}
			}
			envs = envs[:0]
		}
	}
}
