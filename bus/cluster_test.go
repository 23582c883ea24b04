package bus_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// TestClusterSurvivesNodeRestart runs the product's streams at 3 replicas on
// three embedded servers, then shuts down the server that leads
// ROOM_EVENTS while a publisher and a consumer keep going, and restarts it
// from its store. Every published event reaches the consumer, the stream
// holds each exactly once, and the restarted server catches up.
func TestClusterSurvivesNodeRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs three embedded nats servers")
	}
	cl := newTestCluster(t, 3)
	conn := cl.connect(t)
	js := conn.JetStream()

	cc := bus.ConsumerConfig{Durable: "clustertest", AckWait: 2 * time.Second}
	mustProvisionCluster(t, js, cc)
	leader := cl.waitStreamReplicas(t, js, 3)
	t.Logf("streams at 3 replicas, ROOM_EVENTS leader %s", cl.servers[leader].Name())

	got := newEventSet()
	h := func(_ context.Context, d bus.Delivery) error {
		got.add(d.Envelope.EventID)
		return nil
	}
	startConsumer(t, js, bus.ConsumerRunConfig{Durable: cc.Durable, Concurrency: 4}, h)

	pub := startClusterPublisher(t, testenv.NewPublisher(t, conn))
	waitProgress(t, "before the restart", pub, got, 50)

	cl.shutdown(t, leader)
	waitProgress(t, "with a node down", pub, got, 100)

	cl.restart(t, leader)
	waitProgress(t, "after the restart", pub, got, 50)

	sent := pub.stop(t)
	cl.waitStreamReplicas(t, js, 3) // the restarted server caught up
	testenv.Eventually(t, 30*time.Second, func() error {
		if missing := got.missing(sent); len(missing) > 0 {
			return fmt.Errorf("%d of %d events not consumed, first %s", len(missing), len(sent), missing[0])
		}
		return nil
	})
	if n := mustStreamMsgs(t, js, bus.StreamName); n != uint64(len(sent)) {
		t.Errorf("ROOM_EVENTS holds %d messages, want the %d published (each once)", n, len(sent))
	}
	t.Logf("%d events published and consumed (%d deliveries) across the restart of %s",
		len(sent), got.deliveries(), cl.servers[leader].Name())
}

// testCluster is embedded servers routed to each other on loopback.
type testCluster struct {
	cfgs    []bus.EmbeddedConfig
	servers []*bus.Server // nil while shut down
}

// newTestCluster starts n clustered servers on free loopback ports. A
// route port taken by another process between picking and binding starts
// the cluster again on new ports.
func newTestCluster(tb testing.TB, n int) *testCluster {
	tb.Helper()
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = tb.TempDir()
	}
	for attempt := 1; ; attempt++ {
		cl, err := startTestCluster(tb, dirs, freePorts(tb, n))
		if err == nil {
			tb.Cleanup(cl.shutdownAll)
			return cl
		}
		if !errors.Is(err, bus.ErrAddrInUse) || attempt == 3 {
			tb.Fatalf("start cluster: %v", err)
		}
		tb.Logf("start cluster, attempt %d: %v; again on other ports", attempt, err)
	}
}

func startTestCluster(tb testing.TB, dirs []string, ports []int) (*testCluster, error) {
	tb.Helper()
	routes := make([]string, len(ports))
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", p)
	}
	cl := &testCluster{}
	for i, p := range ports {
		cl.cfgs = append(cl.cfgs, bus.EmbeddedConfig{
			Listen:     "127.0.0.1:-1",
			StoreDir:   dirs[i],
			ServerName: fmt.Sprintf("n%d", i+1),
			Cluster: bus.ClusterConfig{
				Name:   "voiceroom-test",
				Listen: fmt.Sprintf("127.0.0.1:%d", p),
				Routes: routes,
			},
		})
		srv, err := bus.RunEmbedded(cl.cfgs[i], testenv.Logger(tb).With("server", cl.cfgs[i].ServerName))
		if err != nil {
			cl.shutdownAll()
			return nil, err
		}
		cl.servers = append(cl.servers, srv)
	}
	return cl, nil
}

// freePorts returns n loopback ports that were free a moment ago. They are
// held open together so that they are distinct.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("pick a free port: %v", err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func (cl *testCluster) shutdownAll() {
	for _, s := range cl.servers {
		if s != nil {
			s.Shutdown()
		}
	}
}

// connect connects to every server's client URL; the connection moves to
// another server when its own goes down.
func (cl *testCluster) connect(tb testing.TB) *bus.Conn {
	tb.Helper()
	var urls []string
	for _, s := range cl.servers {
		urls = append(urls, s.ClientURL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.ConnConfig{URL: strings.Join(urls, ","), Name: tb.Name()}, testenv.Logger(tb))
	if err != nil {
		tb.Fatalf("connect to cluster: %v", err)
	}
	tb.Cleanup(conn.Close) // before the servers' shutdown
	return conn
}

func (cl *testCluster) shutdown(tb testing.TB, i int) {
	tb.Helper()
	tb.Logf("shutting down %s", cl.servers[i].Name())
	cl.servers[i].Shutdown()
	cl.servers[i] = nil
}

// restart starts server i again from its store, on its route port. The
// port was just released by the server itself; another process taking it
// meanwhile is retried for a while.
func (cl *testCluster) restart(tb testing.TB, i int) {
	tb.Helper()
	tb.Logf("restarting %s", cl.cfgs[i].ServerName)
	testenv.Eventually(tb, 10*time.Second, func() error {
		srv, err := bus.RunEmbedded(cl.cfgs[i], testenv.Logger(tb).With("server", cl.cfgs[i].ServerName))
		if err != nil {
			if errors.Is(err, bus.ErrAddrInUse) {
				return err
			}
			tb.Fatalf("restart %s: %v", cl.cfgs[i].ServerName, err)
		}
		cl.servers[i] = srv
		return nil
	})
}

// waitStreamReplicas waits until ROOM_EVENTS has a leader and n-1 current
// followers with no lag, and returns the index of the leader's server.
func (cl *testCluster) waitStreamReplicas(tb testing.TB, js jetstream.JetStream, n int) int {
	tb.Helper()
	leader := -1
	testenv.Eventually(tb, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, bus.StreamName)
		if err != nil {
			return err
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" {
			return errors.New("no stream leader")
		}
		current := 0
		for _, r := range ci.Replicas {
			if r.Current && !r.Offline && r.Lag == 0 {
				current++
			}
		}
		if current != n-1 {
			return fmt.Errorf("leader %s, %d of %d followers current", ci.Leader, current, n-1)
		}
		leader = slices.IndexFunc(cl.cfgs, func(c bus.EmbeddedConfig) bool { return c.ServerName == ci.Leader })
		if leader < 0 {
			return fmt.Errorf("leader %s is not one of ours", ci.Leader)
		}
		return nil
	})
	return leader
}

// mustProvisionCluster provisions the streams at 3 replicas and cc, once
// the cluster has elected its meta leader (until then the servers answer
// that JetStream is unavailable).
func mustProvisionCluster(tb testing.TB, js jetstream.JetStream, cc bus.ConsumerConfig) {
	tb.Helper()
	testenv.Eventually(tb, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return bus.Provision(ctx, js, bus.StreamConfig{Replicas: 3}, cc)
	})
}

// startConsumer runs a Consumer until the test ends, once it runs.
func startConsumer(tb testing.TB, js jetstream.JetStream, rc bus.ConsumerRunConfig, h bus.Handler) *bus.Consumer {
	tb.Helper()
	c, err := bus.NewConsumer(js, rc, h, testenv.Logger(tb), nil)
	if err != nil {
		tb.Fatalf("new consumer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case <-c.Running():
	case err := <-done:
		tb.Fatalf("consumer run: %v", err)
	case <-time.After(30 * time.Second):
		tb.Fatalf("consumer not running after 30s")
	}
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("consumer run: %v", err)
			}
		case <-time.After(30 * time.Second):
			tb.Errorf("consumer did not stop")
		}
	})
	return c
}

// eventSet counts the deliveries of each event id.
type eventSet struct {
	mu   sync.Mutex
	seen map[string]int
}

func newEventSet() *eventSet { return &eventSet{seen: make(map[string]int)} }

func (s *eventSet) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[id]++
}

func (s *eventSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

func (s *eventSet) deliveries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.seen {
		n += c
	}
	return n
}

func (s *eventSet) missing(ids []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, id := range ids {
		if s.seen[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// clusterPublisher publishes events one after another until stopped,
// retrying each event (same event_id) until the stream acks it, as the
// outbox relay does with a pending row.
type clusterPublisher struct {
	stopping chan struct{} // closed by stop: no new event
	abort    context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	acked    []string
}

func startClusterPublisher(tb testing.TB, p *bus.Publisher) *clusterPublisher {
	tb.Helper()
	ctx, abort := context.WithCancel(context.Background())
	cp := &clusterPublisher{stopping: make(chan struct{}), abort: abort, done: make(chan struct{})}
	go func() {
		defer close(cp.done)
		for i := int64(1); ; i++ {
			select {
			case <-cp.stopping:
				return
			default:
			}
			env := newTestEnvelope(fmt.Sprintf("room-%d", i%7), i)
			for {
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := p.Publish(pctx, env)
				cancel()
				if err == nil {
					break
				}
				select { // a leader election takes a moment
				case <-ctx.Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			cp.mu.Lock()
			cp.acked = append(cp.acked, env.EventID)
			cp.mu.Unlock()
		}
	}()
	tb.Cleanup(func() { abort(); <-cp.done })
	return cp
}

func (cp *clusterPublisher) count() int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return len(cp.acked)
}

// stop lets the event in flight be acked, publishes no more and returns
// the ids of every event published.
func (cp *clusterPublisher) stop(tb testing.TB) []string {
	tb.Helper()
	close(cp.stopping)
	select {
	case <-cp.done:
	case <-time.After(30 * time.Second):
		tb.Fatalf("publisher did not stop")
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return slices.Clone(cp.acked)
}

// waitProgress waits until n more events have been both published and
// consumed.
func waitProgress(tb testing.TB, phase string, pub *clusterPublisher, got *eventSet, n int) {
	tb.Helper()
	wantPub, wantGot := pub.count()+n, got.len()+n
	testenv.Eventually(tb, 30*time.Second, func() error {
		if p, g := pub.count(), got.len(); p < wantPub || g < wantGot {
			return fmt.Errorf("%s: published %d (want %d), consumed %d (want %d)", phase, p, wantPub, g, wantGot)
		}
		return nil
	})
	tb.Logf("%s: published %d, consumed %d", phase, pub.count(), got.len())
}

func TestEmbeddedClusterConfigValidate(t *testing.T) {
	dir := t.TempDir()
	routes := []string{"nats-route://127.0.0.1:6222", "nats-route://127.0.0.1:6223", "nats://127.0.0.1:6224"}
	tests := []struct {
		name    string
		cluster bus.ClusterConfig
		ok      bool
		field   string // of the ConfigError when not ok
	}{
		{"alone", bus.ClusterConfig{}, true, ""},
		{"three servers", bus.ClusterConfig{Name: "c1", Listen: "127.0.0.1:6222", Routes: routes}, true, ""},
		{"random route port", bus.ClusterConfig{Name: "c1", Listen: "127.0.0.1:-1", Routes: routes[1:]}, true, ""},
		{"no name", bus.ClusterConfig{Listen: "127.0.0.1:6222", Routes: routes}, false, "Name"},
		{"name with a dot", bus.ClusterConfig{Name: "c.1", Listen: "127.0.0.1:6222", Routes: routes}, false, "Name"},
		{"no routes", bus.ClusterConfig{Name: "c1", Listen: "127.0.0.1:6222"}, false, "Routes"},
		{"no listen", bus.ClusterConfig{Name: "c1", Routes: routes}, false, "Listen"},
		{"all interfaces", bus.ClusterConfig{Name: "c1", Listen: "0.0.0.0:6222", Routes: routes}, false, "Listen"},
		{"route scheme", bus.ClusterConfig{Name: "c1", Listen: "127.0.0.1:6222", Routes: []string{"http://127.0.0.1:6223"}}, false, "Routes"},
		{"route without port", bus.ClusterConfig{Name: "c1", Listen: "127.0.0.1:6222", Routes: []string{"nats-route://127.0.0.1"}}, false, "Routes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := bus.EmbeddedConfig{Listen: "127.0.0.1:-1", StoreDir: dir, Cluster: tt.cluster}.Validate()
			if tt.ok && err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if tt.ok {
				return
			}
			if !errors.Is(err, bus.ErrInvalidConfig) {
				t.Fatalf("err %v, want ErrInvalidConfig", err)
			}
			var ce *apperr.ConfigError
			if cerr := tt.cluster.Validate(); !errors.As(cerr, &ce) || ce.Field != tt.field || !errors.Is(cerr, bus.ErrInvalidConfig) {
				t.Fatalf("cluster validate: %v (field %q), want a ConfigError on %s", cerr, apperr.ConfigFieldOf(cerr), tt.field)
			}
			if got := apperr.ConfigFieldOf(err); got != "Cluster."+tt.field {
				t.Fatalf("embedded validate names field %q, want Cluster.%s", got, tt.field)
			}
		})
	}
}

func TestRunEmbeddedClusterPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	_, err = bus.RunEmbedded(bus.EmbeddedConfig{
		Listen:   "127.0.0.1:-1",
		StoreDir: t.TempDir(),
		Cluster:  bus.ClusterConfig{Name: "c1", Listen: addr, Routes: []string{"nats-route://" + addr}},
	}, testenv.Logger(t))
	if !errors.Is(err, bus.ErrAddrInUse) {
		t.Fatalf("err %v, want ErrAddrInUse", err)
	}
}
