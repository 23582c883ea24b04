package bus_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// benchLetters is the size of the DLQ replayed per iteration.
const benchLetters = 10_000

// mustStoreLetters writes n dead letters of sink in app1 straight into
// ROOM_EVENTS_DLQ, as the consume loop writes them.
func mustStoreLetters(b *testing.B, js jetstream.JetStream, sink string, n int) {
	b.Helper()
	for i, env := range benchEnvelopes(n) {
		data, err := env.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		subject, err := env.Subject()
		if err != nil {
			b.Fatal(err)
		}
		msg := nats.NewMsg("dlq." + sink + "." + subject)
		msg.Data = data
		msg.Header.Set(jetstream.MsgIDHeader, sink+":bench"+strconv.Itoa(i))
		msg.Header.Set(bus.HeaderDLQConsumer, sink)
		msg.Header.Set(bus.HeaderDLQReason, "IM: group does not exist")
		msg.Header.Set(bus.HeaderDLQDeliveries, "1")
		msg.Header.Set(bus.HeaderDLQSubject, subject)
		msg.Header.Set(bus.HeaderDLQStreamSeq, strconv.Itoa(i+1))
		if _, err := js.PublishMsgAsync(msg); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("storing letters took over a minute")
	}
}

// BenchmarkDLQReplay replays 10,000 dead letters of one sink to its
// running consumer: replay_letters/s is the rate of Replay (letters read
// from ROOM_EVENTS_DLQ and stored as copies on the sink's replay subject),
// drain_s the time from the start of Replay until the sink has handled
// every copy and every letter is deleted, drain_letters/s the same as a
// rate. Run with -benchtime 1x.
func BenchmarkDLQReplay(b *testing.B) {
	conn := testenv.NewJetStream(b)
	js := conn.JetStream()
	const sink = "benchsink"
	var handled atomic.Int64
	newTestConsumer(b, conn, bus.ConsumerConfig{Durable: sink, MaxAckPending: 4096},
		bus.ConsumerRunConfig{Concurrency: 8, FetchBatch: 512},
		func(context.Context, bus.Delivery) error {
			handled.Add(1)
			return nil
		}, nil)
	q, err := bus.NewDLQ(js, bus.DLQConfig{Sinks: []string{sink}, MaxReplay: benchLetters}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	var replayTime, drainTime time.Duration
	for range b.N {
		b.StopTimer()
		mustStoreLetters(b, js, sink, benchLetters)
		before := handled.Load()
		b.StartTimer()

		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		res, err := q.Replay(ctx, sink, "app1", nil)
		cancel()
		if err != nil || res.Replayed != benchLetters {
			b.Fatalf("replay: %+v, %v", res, err)
		}
		replayTime += time.Since(start)
		// The wait is the measured drain time: a poll of its own, bounded,
		// at a fixed 50 ms (testenv.Eventually's steps grow to 100 ms).
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			depth, err := q.Depth(ctx, sink)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			if depth == 0 {
				break
			}
			if time.Since(start) > 2*time.Minute {
				b.Fatalf("%d letters left after 2 minutes", depth)
			}
			time.Sleep(50 * time.Millisecond)
		}
		drainTime += time.Since(start)
		if got := handled.Load() - before; got != benchLetters {
			b.Fatalf("sink handled %d copies, want %d", got, benchLetters)
		}
	}
	letters := float64(benchLetters * b.N)
	b.ReportMetric(letters/replayTime.Seconds(), "replay_letters/s")
	b.ReportMetric(drainTime.Seconds()/float64(b.N), "drain_s")
	b.ReportMetric(letters/drainTime.Seconds(), "drain_letters/s")
	b.Logf("replayed %d letters: replay %v, drained %v", benchLetters*b.N, replayTime, drainTime)
}
