package bus_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"voiceroom"
	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// TestFetchOutlivesALatePullRequest: a pull request that reaches the
// server late (a busy machine, a slow link) expires there later than the
// client expects. The consumer must go on reading until the server ends
// the request: a client that stops at its own deadline drops the messages
// still on the way, which the server counts delivered and hands out again
// only after the ack wait, after later events of their rooms.
//
// The consumer's connection goes through a proxy that holds every byte
// from the client for 1.2 s; events come slowly enough that no pull fills
// its batch. A consumer that ended each pull at a deadline of its own (5
// s, while the server's expiry, counted from the late request, was 4.5 s
// after it) lost about 14 events at each end, as this test showed.
func TestFetchOutlivesALatePullRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about fifteen seconds")
	}
	js := testenv.RunJetStream(t)
	direct := js.Conn()
	const ackWait = 2 * time.Second
	mustProvisionConsumer(t, direct, bus.ConsumerConfig{Durable: "late", AckWait: ackWait, MaxDeliver: -1})
	pub := testenv.NewPublisher(t, direct)

	proxy := delayingProxy(t, js.URL(), 1200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slow, err := bus.Connect(ctx, bus.ConnConfig{URL: proxy, Name: "slow"}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slow.Close)

	var (
		mu    sync.Mutex
		first = map[int64]uint64{} // version -> NumDelivered at its first handling
		order []int64              // versions in order of first handling
	)
	startConsumer(t, slow.JetStream(), bus.ConsumerRunConfig{Durable: "late", FetchBatch: 1000},
		func(_ context.Context, d bus.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := first[d.Envelope.RoomVersion]; !ok {
				first[d.Envelope.RoomVersion] = d.NumDelivered
				order = append(order, d.Envelope.RoomVersion)
			}
			return nil
		})
	// 20 events a second for 12 s: two pulls end at their expiry meanwhile.
	const n = 240
	for v := int64(1); v <= n; v++ {
		mustPublish(t, pub, newTestEnvelope("r1", v))
		time.Sleep(50 * time.Millisecond)
	}
	testenv.Eventually(t, 4*ackWait, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(first) < n {
			return fmt.Errorf("%d of %d events handled", len(first), n)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	var late []string
	for i, v := range order {
		if i > 0 && v < order[i-1] || first[v] > 1 {
			late = append(late, fmt.Sprintf("v%d (delivery %d, after v%d)", v, first[v], order[max(i-1, 0)]))
		}
	}
	if len(late) > 0 {
		t.Fatalf("%d events first handled late, after the ack wait: %v", len(late), late)
	}
}

// delayingProxy forwards TCP connections to the server at natsURL,
// holding each chunk from the client for delay (the server's answers pass
// at once). It returns the proxy's nats:// URL.
func delayingProxy(t *testing.T, natsURL string, delay time.Duration) string {
	t.Helper()
	u, err := url.Parse(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", u.Host)
			if err != nil {
				client.Close()
				continue
			}
			t.Cleanup(func() { client.Close(); server.Close() })
			go io.Copy(client, server)
			go forwardLate(client, server, delay)
		}
	}()
	return "nats://" + ln.Addr().String()
}

// forwardLate copies from to to, each chunk delay after it was read, in
// order.
func forwardLate(from, to net.Conn, delay time.Duration) {
	type chunk struct {
		at   time.Time
		data []byte
	}
	chunks := make(chan chunk, 4096)
	go func() {
		defer close(chunks)
		buf := make([]byte, 64<<10)
		for {
			n, err := from.Read(buf)
			if n > 0 {
				chunks <- chunk{at: time.Now(), data: append([]byte(nil), buf[:n]...)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.at.Add(delay)))
		if _, err := to.Write(c.data); err != nil {
			return
		}
	}
	to.Close()
}

// TestOldestQueued: workers hand events over per room, so while one
// room's handler is busy a later event of another room is handed over
// first; OldestQueued names the busy room's events, the lowest first,
// until they are through.
func TestOldestQueued(t *testing.T) {
	conn := testenv.NewJetStream(t)
	mustProvisionConsumer(t, conn, bus.ConsumerConfig{Durable: "queued", MaxDeliver: -1})
	pub := testenv.NewPublisher(t, conn)
	release := make(chan struct{})
	handed := make(chan bus.Delivery, 8)
	c := startConsumer(t, conn.JetStream(), bus.ConsumerRunConfig{Durable: "queued", Concurrency: 4},
		func(_ context.Context, d bus.Delivery) error {
			if d.Envelope.RoomID == "busy" {
				<-release
			}
			handed <- d
			return nil
		})
	if _, ok := c.OldestQueued(); ok {
		t.Fatal("OldestQueued reports an event before any was fetched")
	}
	busy1 := mustPublish(t, pub, newTestEnvelope("busy", 1))
	mustPublish(t, pub, newTestEnvelope("busy", 2))
	// Another room's event, later in the stream, on another worker
	// (workers are picked by the room key's hash).
	worker := func(room string) uint32 {
		return voiceroom.Hash(voiceroom.RoomKey{AppCode: "app1", RoomID: room}.String()) % 4
	}
	other := "other"
	for i := 0; worker(other) == worker("busy"); i++ {
		other = fmt.Sprintf("other%d", i)
	}
	later := mustPublish(t, pub, newTestEnvelope(other, 1))
	if d := receive(t, handed); d.StreamSeq != later.Sequence {
		t.Fatalf("handed %d first, want the other room's %d", d.StreamSeq, later.Sequence)
	}
	if seq, ok := c.OldestQueued(); !ok || seq != busy1.Sequence {
		t.Fatalf("OldestQueued %d %v, want the busy room's first, %d", seq, ok, busy1.Sequence)
	}
	close(release)
	receive(t, handed)
	receive(t, handed)
	testenv.Eventually(t, 5*time.Second, func() error {
		if seq, ok := c.OldestQueued(); ok {
			return fmt.Errorf("OldestQueued %d after every event was handled", seq)
		}
		return nil
	})
}
