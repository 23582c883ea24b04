package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// Every benchmark runs against a fresh embedded, file-backed JetStream
// with ROOM_EVENTS provisioned as in production (duplicate window 2m), so
// the server de-duplicates every publish by Nats-Msg-Id.

const benchRooms = 64

func benchEnvelopes(n int) []bus.Envelope {
	envs := make([]bus.Envelope, n)
	for i := range envs {
		envs[i] = newTestEnvelope(fmt.Sprintf("room%d", i%benchRooms), int64(i/benchRooms+1))
	}
	return envs
}

func benchMessages(b *testing.B, n int) []bus.Message {
	b.Helper()
	return messagesOf(b, benchEnvelopes(n))
}

// messagesOf encodes envs for publishing.
func messagesOf(b *testing.B, envs []bus.Envelope) []bus.Message {
	b.Helper()
	msgs := make([]bus.Message, len(envs))
	for i, env := range envs {
		m, err := env.Message()
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = m
	}
	return msgs
}

// plainJetStream is a bare nats.go connection to the same server: the
// ceiling the bus is compared with.
func plainJetStream(b *testing.B, conn *bus.Conn) jetstream.JetStream {
	b.Helper()
	return testenv.ConnectJetStream(b, conn.NATS().ConnectedUrl())
}

func reportLatencies(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "msgs/s")
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(float64(len(lat)-1)*p)].Microseconds())
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

func checkStored(b *testing.B, js jetstream.JetStream, want int) {
	b.Helper()
	if got := mustStreamMsgs(b, js, bus.StreamName); got != uint64(want) {
		b.Fatalf("stream holds %d messages, want %d", got, want)
	}
}

// BenchmarkPublish is the bus's synchronous publish of envelopes,
// encoding included.
func BenchmarkPublish(b *testing.B) {
	conn := testenv.NewJetStream(b)
	p := testenv.NewPublisher(b, conn)
	envs := benchEnvelopes(b.N)
	lat := make([]time.Duration, b.N)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i, env := range envs {
		t0 := time.Now()
		if _, err := p.Publish(ctx, env); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportLatencies(b, lat, elapsed)
	checkStored(b, conn.JetStream(), b.N)
}

// BenchmarkNATSPublish is plain nats.go synchronous publishing of the same
// pre-encoded messages with the same Nats-Msg-Id header.
func BenchmarkNATSPublish(b *testing.B) {
	conn := testenv.NewJetStream(b)
	js := plainJetStream(b, conn)
	msgs := benchMessages(b, b.N)
	lat := make([]time.Duration, b.N)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i, m := range msgs {
		t0 := time.Now()
		msg := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{jetstream.MsgIDHeader: []string{m.ID}}}
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportLatencies(b, lat, elapsed)
	checkStored(b, conn.JetStream(), b.N)
}

const benchBatch = 1000

// publishBatches publishes msgs with the bus's async batch publish,
// benchBatch per call, failing b on any error.
func publishBatches(ctx context.Context, b *testing.B, p *bus.Publisher, msgs []bus.Message) {
	b.Helper()
	for lo := 0; lo < len(msgs); lo += benchBatch {
		for i, r := range p.PublishBatch(ctx, msgs[lo:min(lo+benchBatch, len(msgs))]) {
			if r.Err != nil {
				b.Fatalf("message %d: %v", lo+i, r.Err)
			}
		}
	}
}

// BenchmarkPublishBatch is the bus's async batch publish, 1000 pre-encoded
// messages per call, default MaxInFlight.
func BenchmarkPublishBatch(b *testing.B) {
	conn := testenv.NewJetStream(b)
	p := testenv.NewPublisher(b, conn)
	msgs := benchMessages(b, b.N)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	publishBatches(ctx, b, p, msgs)
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	checkStored(b, conn.JetStream(), b.N)
}

// BenchmarkNATSPublishAsync is plain nats.go async publishing of the same
// messages (default 4000 acks pending), waiting for all acks at the end.
func BenchmarkNATSPublishAsync(b *testing.B) {
	conn := testenv.NewJetStream(b)
	js := plainJetStream(b, conn)
	msgs := benchMessages(b, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for _, m := range msgs {
		msg := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{jetstream.MsgIDHeader: []string{m.ID}}}
		if _, err := js.PublishMsgAsync(msg); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("acks missing after a minute")
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	checkStored(b, conn.JetStream(), b.N)
}

// BenchmarkConsume measures the consume loop end to end (fetch, dispatch,
// a no-op handler, ack) with fire-and-forget acks and with confirmed acks
// (AckSync), to show what the round trip per ack costs. cpu-ns/msg is the
// process's CPU time (client and embedded server) per message consumed:
// what one durable adds per event before its sink does any work.
//
// payload=card gives each event a gift's payload with its room card (about
// 700 bytes in all, as the rooms package writes them) instead of a 25-byte
// one: what carrying the card costs a durable per event.
func BenchmarkConsume(b *testing.B) {
	for _, ackSync := range []bool{false, true} {
		for _, payload := range []string{"small", "card"} {
			b.Run(fmt.Sprintf("ack_sync=%v/payload=%s", ackSync, payload), func(b *testing.B) {
				benchConsume(b, ackSync, payload == "card")
			})
		}
	}
}

// BenchmarkNATSConsume is the ceiling of BenchmarkConsume: plain nats.go
// pulling the same stored events from a durable of the same settings, 64
// at a time, and acking each (fire-and-forget), with no decoding,
// dispatch or ledger.
func BenchmarkNATSConsume(b *testing.B) {
	conn := testenv.NewJetStream(b)
	publishBatches(context.Background(), b, testenv.NewPublisher(b, conn), messagesOf(b, benchEnvelopes(b.N)))
	mustProvisionConsumer(b, conn, bus.ConsumerConfig{Durable: "bench"})
	js := plainJetStream(b, conn)
	ctx := context.Background()
	cons, err := js.Consumer(ctx, bus.StreamName, "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	cpu := testenv.ProcessCPU(b)
	consumeFetch(b, cons, 64, false)
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64((testenv.ProcessCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/msg")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}

// BenchmarkNATSConsumeModes bounds two levers on a durable's own cost per
// event with plain nats.go, below the consume loop: a Fetch per refill
// against one Messages subscription (nats.go's Consume machinery, which
// keeps one inbox and issues its pulls itself), and an ack per message
// against one AckAll per pull of `per` messages (AckAllPolicy), the most
// that acks batched per turn could save. Each pulls the same stored
// events from a durable and acks them fire-and-forget, with no decoding or
// dispatch.
func BenchmarkNATSConsumeModes(b *testing.B) {
	for _, m := range []struct {
		name   string
		per    int
		ackAll bool
		iter   bool
	}{
		{"fetch/per=64/ack=each", 64, false, false},
		{"messages/per=64/ack=each", 64, false, true},
		{"fetch/per=64/ack=all", 64, true, false},
		{"fetch/per=4/ack=each", 4, false, false},
		{"fetch/per=4/ack=all", 4, true, false},
	} {
		b.Run(m.name, func(b *testing.B) {
			conn := testenv.NewJetStream(b)
			publishBatches(context.Background(), b, testenv.NewPublisher(b, conn), messagesOf(b, benchEnvelopes(b.N)))
			js := plainJetStream(b, conn)
			policy := jetstream.AckExplicitPolicy
			if m.ackAll {
				policy = jetstream.AckAllPolicy
			}
			cons, err := js.CreateOrUpdateConsumer(context.Background(), bus.StreamName,
				jetstream.ConsumerConfig{Durable: "bench", AckPolicy: policy, MaxAckPending: 10000})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu := testenv.ProcessCPU(b)
			if m.iter {
				consumeMessages(b, cons, m.per)
			} else {
				consumeFetch(b, cons, m.per, m.ackAll)
			}
			b.StopTimer()
			b.ReportMetric(float64((testenv.ProcessCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/msg")
		})
	}
}

// consumeFetch pulls b.N messages per at a time, acking each, or only the
// last of each pull (ackAll).
func consumeFetch(b *testing.B, cons jetstream.Consumer, per int, ackAll bool) {
	for got := 0; got < b.N; {
		batch, err := cons.Fetch(min(per, b.N-got), jetstream.FetchHeartbeat(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		var last jetstream.Msg
		for msg := range batch.Messages() {
			got++
			if last = msg; !ackAll {
				if err := msg.Ack(); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := batch.Error(); err != nil {
			b.Fatal(err)
		}
		if ackAll && last != nil {
			if err := last.Ack(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// consumeMessages reads b.N messages from one Messages subscription that
// keeps up to per buffered, acking each. A missed heartbeat is the
// iterator's warning, not its end.
func consumeMessages(b *testing.B, cons jetstream.Consumer, per int) {
	it, err := cons.Messages(jetstream.PullMaxMessages(per), jetstream.PullHeartbeat(5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer it.Stop()
	for got := 0; got < b.N; got++ {
		msg, err := it.Next()
		if errors.Is(err, jetstream.ErrNoHeartbeat) {
			got-- // a loaded machine: the iterator pulls again by itself
			continue
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := msg.Ack(); err != nil {
			b.Fatal(err)
		}
	}
}

// cardPayload returns the payload of roomevent's golden RoomGiftSent
// event (the room card, then the gift), as the outbox stores it.
func cardPayload(b *testing.B) json.RawMessage {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "roomevent", "testdata", "RoomGiftSent.json"))
	if err != nil {
		b.Fatal(err)
	}
	var env bus.Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		b.Fatal(err)
	}
	return env.Payload
}

// benchConsume stores b.N events, then times one durable handling them all.
func benchConsume(b *testing.B, ackSync, card bool) {
	envs := benchEnvelopes(b.N)
	if card {
		payload := cardPayload(b)
		for i := range envs {
			envs[i].Payload = payload
		}
	}
	conn := testenv.NewJetStream(b)
	publishBatches(context.Background(), b, testenv.NewPublisher(b, conn), messagesOf(b, envs))
	var handled atomic.Int64
	all := make(chan struct{})
	mustProvisionConsumer(b, conn, bus.ConsumerConfig{Durable: "bench"})
	c, err := bus.NewConsumer(conn.JetStream(), bus.ConsumerRunConfig{Durable: "bench", AckSync: ackSync},
		func(context.Context, bus.Delivery) error {
			if handled.Add(1) == int64(b.N) {
				close(all)
			}
			return nil
		}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	cpu := testenv.ProcessCPU(b)
	go func() { done <- c.Run(ctx) }()
	select {
	case <-all:
	case <-time.After(2 * time.Minute):
		b.Fatalf("handled %d of %d", handled.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64((testenv.ProcessCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/msg")
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
}

// BenchmarkPublishCPU is the process's CPU time (client and embedded
// server together) per message stored, for the bus's synchronous publish
// one at a time, the same from 128 goroutines at once (as the outbox fast
// path's workers publish), and the async batch publish: what a stream
// round trip per message costs beyond the storing itself.
func BenchmarkPublishCPU(b *testing.B) {
	for _, mode := range []string{"sync", "sync_x128", "batch"} {
		b.Run(mode, func(b *testing.B) {
			conn := testenv.NewJetStream(b)
			p := testenv.NewPublisher(b, conn)
			msgs := benchMessages(b, b.N)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			cpu := testenv.ProcessCPU(b)
			switch mode {
			case "sync":
				for _, m := range msgs {
					if _, err := p.PublishMessage(ctx, m); err != nil {
						b.Fatal(err)
					}
				}
			case "sync_x128":
				var next atomic.Int64
				var failed atomic.Value
				var wg sync.WaitGroup
				for range 128 {
					wg.Go(func() {
						for i := next.Add(1) - 1; i < int64(len(msgs)); i = next.Add(1) - 1 {
							if _, err := p.PublishMessage(ctx, msgs[i]); err != nil {
								failed.Store(err)
								return
							}
						}
					})
				}
				wg.Wait()
				if err, _ := failed.Load().(error); err != nil {
					b.Fatal(err)
				}
			case "batch":
				publishBatches(ctx, b, p, msgs)
			}
			b.StopTimer()
			b.ReportMetric(float64((testenv.ProcessCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/msg")
			checkStored(b, conn.JetStream(), b.N)
		})
	}
}

// BenchmarkConsumeOneType is a sink that needs one event type in six
// (as roomranks needs only RoomGiftSent), over 1,000 rooms: a durable on
// every event that skips the others in its handler (all), against one
// filtered to the type (filtered: room.events.*.*.<type>, plus its
// replays). backlog drains b.N stored events; live consumes them as they
// are published. cpu-ns/event is the process's (client and embedded
// server, the publishing included for live) per event stored.
func BenchmarkConsumeOneType(b *testing.B) {
	const rooms, types = 1000, 6
	for _, mode := range []string{"backlog", "live"} {
		for _, filtered := range []bool{false, true} {
			name := mode + "/all"
			if filtered {
				name = mode + "/filtered"
			}
			b.Run(name, func(b *testing.B) {
				envs := make([]bus.Envelope, b.N)
				wanted := 0
				for i := range envs {
					envs[i] = newTestEnvelope(fmt.Sprintf("room%d", i%rooms), int64(i/rooms+1))
					envs[i].EventType = fmt.Sprintf("Type%d", i%types)
					if i%types == 0 {
						wanted++
					}
				}
				msgs := messagesOf(b, envs)
				conn := testenv.NewJetStream(b)
				p := testenv.NewPublisher(b, conn)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				cc := bus.ConsumerConfig{Durable: "bench", MaxAckPending: 10000}
				if filtered {
					cc.FilterSubject = bus.SubjectPrefix + ".*.*.Type0"
				}
				mustProvisionConsumer(b, conn, cc)
				var handled atomic.Int64
				all := make(chan struct{})
				c, err := bus.NewConsumer(conn.JetStream(), bus.ConsumerRunConfig{Durable: "bench", FetchBatch: 256},
					func(_ context.Context, d bus.Delivery) error {
						if d.Envelope.EventType == "Type0" && handled.Add(1) == int64(wanted) {
							close(all)
						}
						return nil
					}, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				if mode == "backlog" {
					publishBatches(ctx, b, p, msgs)
				}
				b.ResetTimer()
				cpu := testenv.ProcessCPU(b)
				start := time.Now()
				done := make(chan error, 1)
				go func() { done <- c.Run(ctx) }()
				if mode == "live" {
					publishBatches(ctx, b, p, msgs)
				}
				select {
				case <-all:
				case <-time.After(5 * time.Minute):
					b.Fatalf("handled %d of %d", handled.Load(), wanted)
				}
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64((testenv.ProcessCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/event")
				b.ReportMetric(float64(wanted)/elapsed.Seconds(), "wanted/s")
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
