//go:build chaos

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/outboxrelay"
)

// Scenario 3's figures.
const (
	// relayBatchSize is the relay process's VOICEROOM_OUTBOX_BATCH_SIZE:
	// small, so that a backlog takes many batches.
	relayBatchSize = 10
	// minBacklog is the backlog killMidDrain waits for before it starts
	// the relay.
	minBacklog = 300
	// ackBudget is how many publish acks the gate lets through to the
	// relay before it holds the rest: five batches, a small part of
	// minBacklog.
	ackBudget = 5 * relayBatchSize
)

// killMidDrain starts the relay (stopped, with JetStream back) on the
// pending rows, through an ackGate: the relay publishes part of the
// backlog, then waits for an ack the gate holds, its batch claimed (a
// batch's transaction stays open until its publish is answered); it is
// SIGKILLed then. r's note says how many rows were still pending at the
// kill; unless some were, the kill proves nothing, and r gets that
// problem. Nothing here races the relay: however fast it is, it cannot
// publish past the gate.
func killMidDrain(t *testing.T, c *cluster, r *row) {
	t.Helper()
	// The backlog: the pending rows now, and those the load adds while
	// the relay is down (the fast path leaves the rooms with a backlog to
	// the relay), up to minBacklog or for m.quiet.
	var backlog, top int64
	if err := until(c.mode.quiet, func() error {
		var err error
		if backlog, top, err = c.pendingUpTo(context.Background(), -1); err != nil {
			return err
		}
		if backlog < minBacklog {
			return fmt.Errorf("%d rows pending", backlog)
		}
		return nil
	}); err != nil && backlog == 0 {
		r.problems = append(r.problems, fmt.Sprintf("no backlog for the relay (%v): the kill proves nothing", err))
		return
	}

	// At most half the backlog through, should it have stayed small.
	gate := startAckGate(t, c.nats.addr, min(ackBudget, int(backlog/2)))
	defer gate.close()
	// The last VOICEROOM_NATS_URL counts; the restart after the kill
	// goes straight to JetStream again.
	env := c.relay.env
	c.relay.env = append(slices.Clone(env), "VOICEROOM_NATS_URL=nats://"+gate.addr())
	c.relay.launch(t)
	c.relay.env = env

	deadline := time.Now().Add(c.mode.quiet)
	for !gate.holding() {
		if c.relay.exited() {
			t.Fatalf("the relay exited on its own:\n%s", c.relay.tail())
		}
		if time.Now().After(deadline) {
			passed, _ := gate.counts()
			r.problems = append(r.problems, fmt.Sprintf("the relay got %d of the %d publish acks the gate lets through within %s and never waited for a held one: the kill proves nothing", passed, gate.budget, c.mode.quiet))
			c.relay.signal(t, syscall.SIGKILL)
			return
		}
		select {
		case <-gate.closed:
		case <-time.After(10 * time.Millisecond):
		}
	}
	c.relay.signal(t, syscall.SIGKILL) // returns once the process is gone
	passed, held := gate.counts()
	// Its open transactions roll back: their rows read as pending (a
	// claim leaves a row pending; only the marks, committed with it,
	// change it).
	left, _, err := c.pendingUpTo(context.Background(), top)
	if err != nil {
		t.Fatalf("count pending rows: %v", err)
	}
	r.note = fmt.Sprintf("relay killed with %d of a %d-row backlog pending, %d publish acks let through and %d held", left, backlog, passed, held)
	t.Log(r.note)
	if left == 0 {
		r.problems = append(r.problems, fmt.Sprintf("the relay drained its backlog of %d rows before the kill: the kill proves nothing", backlog))
	}
}

// pendingUpTo counts the app's pending outbox rows with an id up to top
// (every one when top < 0), and returns the highest such id.
func (c *cluster) pendingUpTo(ctx context.Context, top int64) (n, maxID int64, err error) {
	if top < 0 {
		top = math.MaxInt64
	}
	// Marked pending, or in an in-flight group (read from the small
	// in-flight table: a per-row check over the whole outbox is slow).
	err = c.db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(MAX(id), 0) FROM (SELECT id FROM room_outbox WHERE app_code = ? AND status = 'pending' AND id <= ? "+
		"UNION ALL SELECT o.id FROM "+outboxrelay.InFlightJoin+" WHERE o.app_code = ? AND o.id <= ?) t", app, top, app, top).Scan(&n, &maxID)
	return n, maxID, err
}

// ackGate is a TCP proxy between the relay process and the JetStream
// server. It forwards what the relay sends as it comes, and what the
// server sends frame by frame until it has let budget publish acks
// through; from the next ack on it forwards nothing more to any of its
// connections, and counts the acks it holds. It never opens again: the
// relay waits for a held ack with its batch claimed, and is killed so.
type ackGate struct {
	ln       net.Listener
	upstream string
	budget   int
	closed   chan struct{} // closed at the first ack held

	mu     sync.Mutex
	passed int // acks let through
	held   int // acks held
	conns  []net.Conn
}

// startAckGate listens on a free loopback port, forwarding to upstream
// (host:port), until close or the test's end.
func startAckGate(t *testing.T, upstream string, budget int) *ackGate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &ackGate{ln: ln, upstream: upstream, budget: budget, closed: make(chan struct{})}
	t.Cleanup(g.close)
	go g.serve()
	return g
}

func (g *ackGate) addr() string { return g.ln.Addr().String() }

// holding reports whether the gate holds an ack.
func (g *ackGate) holding() bool {
	select {
	case <-g.closed:
		return true
	default:
		return false
	}
}

// counts returns the acks let through and those held.
func (g *ackGate) counts() (passed, held int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.passed, g.held
}

// close stops listening and closes every connection.
func (g *ackGate) close() {
	g.ln.Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.conns {
		c.Close()
	}
	g.conns = nil
}

// serve connects each client to the server until the listener closes.
// Either side closing closes the other.
func (g *ackGate) serve() {
	for {
		client, err := g.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", g.upstream)
		if err != nil {
			client.Close()
			continue
		}
		g.mu.Lock()
		g.conns = append(g.conns, client, server)
		g.mu.Unlock()
		go func() {
			io.Copy(server, client)
			server.Close()
		}()
		go func() {
			g.forward(client, server)
			client.Close()
		}()
	}
}

// forward copies the server's frames to the client while the gate lets
// them through, and reads on (so the server never blocks) after.
func (g *ackGate) forward(client, server net.Conn) {
	r := bufio.NewReader(server)
	w := bufio.NewWriter(client)
	for {
		frame, ack, err := readFrame(r)
		if err != nil {
			return
		}
		if !g.admit(ack) {
			if err := w.Flush(); err != nil { // what went through before
				return
			}
			continue
		}
		if _, err := w.Write(frame); err != nil {
			return
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// admit reports whether a frame goes through, counting acks.
func (g *ackGate) admit(ack bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.held > 0:
		if ack {
			g.held++
		}
		return false
	case !ack:
		return true
	case g.passed < g.budget:
		g.passed++
		return true
	}
	g.held = 1
	close(g.closed)
	return false
}

// pubAckPrefix starts every JetStream publish ack (nats-server's
// stream.pubAck: {"stream":NAME,["domain":D,]"seq":N[,"duplicate":true]}).
var pubAckPrefix = []byte(`{"stream":`)

// readFrame reads one frame of the NATS client protocol as a server sends
// it: an operation line (INFO, PING, PONG, +OK, -ERR), or MSG or HMSG with
// its payload and CRLF. ack reports a message whose payload is a publish
// ack.
func readFrame(r *bufio.Reader) (frame []byte, ack bool, err error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, false, err
	}
	// MSG <subject> <sid> [reply-to] <#bytes>
	// HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>
	f := bytes.Fields(line)
	if len(f) == 0 {
		return line, false, nil
	}
	var hdr int
	switch op := string(f[0]); {
	case op == "MSG" && (len(f) == 4 || len(f) == 5):
	case op == "HMSG" && (len(f) == 5 || len(f) == 6):
		if hdr, err = strconv.Atoi(string(f[len(f)-2])); err != nil {
			return nil, false, fmt.Errorf("HMSG header size: %w", err)
		}
	default:
		return line, false, nil
	}
	size, err := strconv.Atoi(string(f[len(f)-1]))
	if err != nil || hdr > size {
		return nil, false, fmt.Errorf("%s size in %q", f[0], line)
	}
	frame = append(line, make([]byte, size+2)...) // payload and CRLF
	if _, err := io.ReadFull(r, frame[len(line):]); err != nil {
		return nil, false, err
	}
	payload := frame[len(line)+hdr : len(line)+size]
	return frame, bytes.HasPrefix(payload, pubAckPrefix), nil
}

// TestChaosAckGate: the gate lets its budget of publish acks through and holds
// the rest, while the server stores every message: what the relay sees at
// scenario 3's kill.
func TestChaosAckGate(t *testing.T) {
	js := testenv.RunJetStream(t)
	gate := startAckGate(t, strings.TrimPrefix(js.URL(), "nats://"), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.ConnConfig{URL: "nats://" + gate.addr(), Name: t.Name()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		gate.close() // a drain through a closed gate would wait its timeout
		conn.Close()
	}()
	pub, err := bus.NewPublisher(conn.JetStream(), bus.PublisherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	defer pcancel()
	results := pub.PublishEnvelopes(pctx, testenv.RoomEnvelopes(app, "gate-room", 1, 5))
	for i, res := range results {
		if acked := res.Err == nil; acked != (i < 3) {
			t.Errorf("message %d: acked %v (%v), want the first 3 acked", i, acked, res.Err)
		}
	}
	if passed, held := gate.counts(); passed != 3 || held != 2 || !gate.holding() {
		t.Errorf("gate let %d acks through and holds %d (holding %v), want 3 and 2", passed, held, gate.holding())
	}
	if n := testenv.StreamLen(t, js.Conn().JetStream()); n != 5 {
		t.Errorf("stream holds %d messages, want all 5: held acks are of stored messages", n)
	}
}
