package bus_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// TestReconnectKeepsRoomOrder: the consumer's connection breaks while the
// server is sending it events and while its acks are on the way. The
// events sent into the dead connection come back from the durable only
// after the ack wait, behind the rooms' later events fetched on the new
// connection; the acks lost with it bring handled events back. After the
// reconnect the consumer must settle what it was handed first: every
// room's events are handled in room order, none is lost and none twice.
//
// The connection goes through a proxy that the test first mutes (every
// byte either way is swallowed, as on a cut cable) and then cuts; the
// client reconnects through it.
//
// It runs for each kind of handler: one delivery at a time, batches, and
// an AsyncHandler that settles later (as imbridge and webhooks do).
func TestReconnectKeepsRoomOrder(t *testing.T) {
	for _, mode := range []string{"handler", "batch", "async"} {
		t.Run(mode, func(t *testing.T) { testReconnectKeepsRoomOrder(t, mode) })
	}
}

func testReconnectKeepsRoomOrder(t *testing.T, mode string) {
	js := testenv.RunJetStream(t)
	direct := js.Conn()
	const (
		durable = "reconnect"
		ackWait = 5 * time.Second
		rooms   = 6
	)
	mustProvisionConsumer(t, direct, bus.ConsumerConfig{Durable: durable, AckWait: ackWait, MaxDeliver: -1})
	pub := testenv.NewPublisher(t, direct)
	proxy := newCuttingProxy(t, js.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.ConnConfig{URL: proxy.url, Name: "cut"}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)

	var (
		mu      sync.Mutex
		handled = map[string]int{}     // event id -> times handled
		order   = map[string][]int64{} // room -> versions in the order first handled
		gate    = make(chan struct{})  // the second phase's settling waits for it
	)
	record := func(e bus.Envelope) {
		mu.Lock()
		defer mu.Unlock()
		if handled[e.EventID]++; handled[e.EventID] == 1 {
			order[e.RoomID] = append(order[e.RoomID], e.RoomVersion)
		}
	}
	gated := func(e bus.Envelope) bool { return e.RoomVersion > 10 && e.RoomVersion <= 20 }
	handle := func(_ context.Context, d bus.Delivery) error {
		if gated(d.Envelope) {
			<-gate
		}
		record(d.Envelope)
		return nil
	}
	rc := bus.ConsumerRunConfig{Durable: durable, FetchBatch: 256, Concurrency: 3}
	var c *bus.Consumer
	switch mode {
	case "handler":
		c = startConsumer(t, conn.JetStream(), rc, handle)
	case "batch":
		rc.FetchBatch = 64 // (3+2) x 64 in flight
		c = startModeConsumer(t, rc, func(rc bus.ConsumerRunConfig) (*bus.Consumer, error) {
			return bus.NewBatchConsumer(conn.JetStream(), rc, func(ctx context.Context, ds []bus.Delivery) []error {
				for _, d := range ds {
					_ = handle(ctx, d)
				}
				return nil
			}, testenv.Logger(t), nil)
		})
	case "async":
		c = startModeConsumer(t, rc, func(rc bus.ConsumerRunConfig) (*bus.Consumer, error) {
			return bus.NewAsyncConsumer(conn.JetStream(), rc, func(_ context.Context, d bus.Delivery, done func(error)) {
				record(d.Envelope) // handed over in room order
				if !gated(d.Envelope) {
					done(nil)
					return
				}
				go func() { <-gate; done(nil) }()
			}, testenv.Logger(t), nil)
		})
	}
	version := map[string]int64{}
	var ids []string
	publish := func(perRoom int) uint64 {
		var last uint64
		for range perRoom {
			for r := range rooms {
				room := fmt.Sprintf("r%d", r)
				version[room]++
				env := newTestEnvelope(room, version[room])
				ids = append(ids, env.EventID)
				last = mustPublish(t, pub, env).Sequence
			}
		}
		return last
	}
	handledAll := func(n int) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(handled) < n {
				return fmt.Errorf("%d of %d events handled", len(handled), n)
			}
			return nil
		}
	}

	// 1. Versions 1..10: handled and acked on a sound connection.
	publish(10)
	testenv.Eventually(t, 10*time.Second, handledAll(len(ids)))
	// 2. Versions 11..20: in the handler when the connection goes mute,
	// so that their acks are lost.
	publish(10)
	testenv.Eventually(t, 10*time.Second, func() error {
		if mode == "async" {
			return handledAll(len(ids))()
		}
		if n := bus.QueuedCount(c); n < 10*rooms {
			return fmt.Errorf("%d of %d events received", n, 10*rooms)
		}
		return nil
	})
	proxy.mute()
	close(gate)
	phase2 := len(ids)
	testenv.Eventually(t, 10*time.Second, handledAll(phase2))
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := proxy.swallowedAcks(); n < 10*rooms {
			return fmt.Errorf("%d acks swallowed, want %d", n, 10*rooms)
		}
		return nil
	})
	// 3. Versions 21..25: sent into the mute connection.
	last := publish(5)
	testenv.Eventually(t, 10*time.Second, func() error {
		if info := mustConsumerInfo(t, direct.JetStream(), durable); info.Delivered.Stream < last {
			return fmt.Errorf("delivered up to %d, want %d", info.Delivered.Stream, last)
		}
		return nil
	})
	// 4. The cut; versions 26..35 come on the new connection.
	proxy.cut()
	testenv.Eventually(t, 15*time.Second, func() error {
		if !conn.NATS().IsConnected() {
			return fmt.Errorf("not reconnected")
		}
		return nil
	})
	last = publish(10)
	testenv.Eventually(t, 4*ackWait+10*time.Second, handledAll(len(ids)))
	// Whatever the durable still had out is settled, and a late
	// redelivery (after the ack wait) was not handled again.
	testenv.Eventually(t, 4*ackWait+10*time.Second, settled(direct.JetStream(), durable, last))

	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if handled[id] != 1 {
			t.Errorf("event %s handled %d times, want once", id, handled[id])
		}
	}
	for room, vs := range order {
		for i := 1; i < len(vs); i++ {
			if vs[i] < vs[i-1] {
				t.Errorf("room %s: v%d handled after v%d (order %v)", room, vs[i], vs[i-1], vs)
				break
			}
		}
	}
}

// startModeConsumer runs the Consumer newConsumer makes until the test
// ends.
func startModeConsumer(t *testing.T, rc bus.ConsumerRunConfig, newConsumer func(bus.ConsumerRunConfig) (*bus.Consumer, error)) *bus.Consumer {
	t.Helper()
	c, err := newConsumer(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case <-c.Running():
	case err := <-done:
		t.Fatalf("consumer run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("consumer not running after 30s")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consumer run: %v", err)
		}
	})
	return c
}

// cuttingProxy forwards TCP connections to a NATS server. mute makes the
// connections open now swallow every byte either way (kept for
// swallowedAcks); cut closes them. Connections made later forward
// normally.
type cuttingProxy struct {
	url string

	mu        sync.Mutex
	conns     []*proxied
	swallowed bytes.Buffer // what muted clients sent
}

type proxied struct {
	client, server net.Conn
	muted          bool
}

func newCuttingProxy(t *testing.T, natsURL string) *cuttingProxy {
	t.Helper()
	u, err := url.Parse(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttingProxy{url: "nats://" + ln.Addr().String()}
	t.Cleanup(func() {
		ln.Close()
		p.cut()
	})
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
			c := &proxied{client: client, server: server}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			go p.forward(c, server, client, false)
			go p.forward(c, client, server, true)
		}
	}()
	return p
}

// forward copies from to to until either closes, dropping what it reads
// while c is muted (and keeping it if fromClient).
func (p *cuttingProxy) forward(c *proxied, from, to net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			p.mu.Lock()
			muted := c.muted
			if muted && fromClient {
				p.swallowed.Write(buf[:n])
			}
			p.mu.Unlock()
			if !muted {
				if _, err := to.Write(buf[:n]); err != nil {
					return
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				to.Close()
			}
			return
		}
	}
}

// mute makes every open connection swallow what it carries.
func (p *cuttingProxy) mute() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.muted = true
	}
}

// cut closes every open connection.
func (p *cuttingProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
	p.conns = nil
}

// swallowedAcks counts the acks muted clients sent.
func (p *cuttingProxy) swallowedAcks() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Count(p.swallowed.Bytes(), []byte("+ACK"))
}
