package roomcluster_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
	"voiceroom/roomcluster"
	"voiceroom/rooms"
)

const testApp = "clus"

// users is the user directory of these tests: everyone has a profile in
// region 5, and regions 0 and 5 are active.
type users struct{}

func (users) UserRegion(_ context.Context, appCode string, userID int64) (string, int64, error) {
	return fmt.Sprintf("%s-u%d", appCode, userID), 5, nil
}

func (users) CheckRegion(_ context.Context, _ string, regionID int64) error {
	if regionID == 0 || regionID == 5 {
		return nil
	}
	return apperr.Invalid("region_id", "no such active region")
}

// harness is a rooms cluster in one test process: rooms nodes and api
// routers, each with its own NATS connection, over one embedded JetStream
// and one MySQL database.
type harness struct {
	tb      testing.TB
	db      *sql.DB
	js      *testenv.JetStream
	cfg     roomcluster.Config
	log     *slog.Logger
	history *leaseHistory

	mu    sync.Mutex
	nodes map[string]*testNode
}

// testNode is one rooms node: its service, lease holder and micro service.
type testNode struct {
	name   string
	nc     *nats.Conn
	svc    *rooms.Service
	node   *roomcluster.Node
	srv    *roomcluster.Server
	cancel context.CancelFunc
	done   chan struct{}
	dead   bool
}

func newHarness(tb testing.TB, cfg roomcluster.Config) *harness {
	tb.Helper()
	h := &harness{tb: tb, db: testenv.NewDB(tb), js: testenv.RunJetStream(tb), cfg: cfg, nodes: map[string]*testNode{}}
	level := slog.LevelWarn
	if os.Getenv("VOICEROOM_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	var w io.Writer = testWriter{tb}
	if os.Getenv("VOICEROOM_TEST_LOG") == "stderr" {
		w, level = os.Stderr, slog.LevelWarn
	}
	h.log = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	h.history = watchLeases(tb, h.js.URL(), cfg)
	tb.Cleanup(func() {
		h.mu.Lock()
		nodes := make([]*testNode, 0, len(h.nodes))
		for _, n := range h.nodes {
			nodes = append(nodes, n)
		}
		h.mu.Unlock()
		for _, n := range nodes {
			if !n.dead {
				h.kill(n)
			}
		}
	})
	return h
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(string(p))
	return len(p), nil
}

func (h *harness) connect(name string) (*nats.Conn, jetstream.JetStream) {
	h.tb.Helper()
	nc, err := nats.Connect(h.js.URL(), nats.Name(name), nats.MaxReconnects(-1))
	if err != nil {
		h.tb.Fatalf("connect %s: %v", name, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		h.tb.Fatalf("jetstream %s: %v", name, err)
	}
	return nc, js
}

// startNode starts a rooms node and waits until it has balanced once.
func (h *harness) startNode(name string) *testNode {
	h.tb.Helper()
	nc, js := h.connect(name)
	reg := prometheus.NewRegistry()
	svc, err := rooms.New(h.db, users{}, users{}, nil, rooms.Config{CommandTimeout: 3 * time.Second, BcryptCost: 4}, h.log, reg, time.Now) // the minimum cost: tests need no slow hashes
	if err != nil {
		h.tb.Fatalf("rooms %s: %v", name, err)
	}
	m, err := roomcluster.NewMetrics(reg)
	if err != nil {
		h.tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	node, err := roomcluster.NewNode(ctx, js, h.cfg, name, svc, svc.Loaded, h.log, m)
	if err != nil {
		cancel()
		h.tb.Fatalf("node %s: %v", name, err)
	}
	svc.SetOwnership(node)
	srv, err := roomcluster.Serve(nc, node, svc, h.log, m)
	if err != nil {
		cancel()
		h.tb.Fatalf("serve %s: %v", name, err)
	}
	tn := &testNode{name: name, nc: nc, svc: svc, node: node, srv: srv, cancel: cancel, done: make(chan struct{})}
	go func() { _ = svc.Run(ctx) }()
	go func() {
		defer close(tn.done)
		if err := node.Run(ctx); err != nil {
			h.tb.Errorf("node %s: %v", name, err)
		}
	}()
	select {
	case <-node.Ready():
	case <-time.After(10 * time.Second):
		h.tb.Fatalf("node %s not ready", name)
	}
	h.mu.Lock()
	h.nodes[node.ID()] = tn
	h.mu.Unlock()
	return tn
}

// kill stops n the way a crash does: its connection closes, its leases
// are neither renewed nor handed over.
func (h *harness) kill(n *testNode) {
	n.dead = true
	n.nc.Close()
	n.cancel()
	<-n.done
	n.srv.Stop()
	n.svc.Close()
}

// stop shuts n down gracefully: it hands its partitions over first.
func (h *harness) stop(n *testNode) {
	n.dead = true
	n.cancel()
	<-n.done
	n.srv.Stop()
	n.node.Close()
	n.svc.Close()
	n.nc.Close()
}

// router starts an api node's router.
func (h *harness) router(name string) *roomcluster.Router {
	h.tb.Helper()
	nc, js := h.connect(name)
	m, err := roomcluster.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		h.tb.Fatal(err)
	}
	r, err := roomcluster.NewRouter(context.Background(), js, h.cfg, nil, nil, rooms.NewRecords(h.db, time.Now), h.log, m)
	if err != nil {
		h.tb.Fatalf("router %s: %v", name, err)
	}
	h.tb.Cleanup(func() { r.Close(); nc.Close() })
	return r
}

// waitBalanced waits until the live nodes hold every partition between
// them and no other node holds any.
func (h *harness) waitBalanced(r *roomcluster.Router, live ...*testNode) {
	h.tb.Helper()
	// Rendezvous hashing decides each partition's owner among the live
	// nodes; with random node ids it may give one node none of them.
	ids := make([]string, len(live))
	for i, n := range live {
		ids[i] = n.node.ID()
	}
	want := map[string]int{}
	for p := range h.cfg.Partitions {
		want[roomcluster.DesiredOwner(ids, p)]++
	}
	testenv.Eventually(h.tb, 30*time.Second, func() error {
		if counts := r.Owners(); !maps.Equal(counts, want) {
			return fmt.Errorf("held %v, want %v (%d partitions over %d nodes by rendezvous)", counts, want, h.cfg.Partitions, len(live))
		}
		return nil
	})
}

// createRooms creates n rooms through r, owned by users 1..n.
// oneNodeWithRooms starts a harness of cfg with one node "a" and a
// router "api" balanced on it, and creates n rooms.
func oneNodeWithRooms(tb testing.TB, cfg roomcluster.Config, n int) (*harness, *testNode, *roomcluster.Router, []string) {
	tb.Helper()
	h := newHarness(tb, cfg)
	a := h.startNode("a")
	r := h.router("api")
	h.waitBalanced(r, a)
	return h, a, r, h.createRooms(r, n)
}

func (h *harness) createRooms(r *roomcluster.Router, n int) []string {
	h.tb.Helper()
	ids := make([]string, n)
	for i := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		id := fmt.Sprintf("create-%d", i)
		res, err := r.Execute(ctx, &rooms.Command{Kind: rooms.KindCreateRoom, AppCode: testApp, RoomID: rooms.NewRoomID(testApp, int64(i+1), id, true),
			CommandID: id, ClientKey: true, Actor: rooms.Actor{UserID: int64(i + 1)}, Args: rooms.Args{Title: fmt.Sprintf("room %d", i)}})
		cancel()
		if err != nil {
			h.tb.Fatalf("create room %d: %v", i, err)
		}
		ids[i] = res.View.RoomID
	}
	return ids
}

// leaseHistory is every lease entry the bucket held, as a watcher saw it.
type leaseHistory struct {
	mu      sync.Mutex
	entries map[int][]leaseEntry // by partition, in revision order
}

type leaseEntry struct {
	rev  uint64
	put  bool
	node string
	at   time.Time // stored at, by the server's clock
}

func watchLeases(tb testing.TB, url string, cfg roomcluster.Config) *leaseHistory {
	tb.Helper()
	nc, err := nats.Connect(url, nats.Name("lease-history"))
	if err != nil {
		tb.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	// The bucket is the nodes' to create; create it the same way first so
	// the watch can start.
	m, err := roomcluster.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	r, err := roomcluster.NewRouter(context.Background(), js, cfg, nil, nil, nil, slog.New(slog.DiscardHandler), m)
	if err != nil {
		tb.Fatal(err)
	}
	r.Close()
	kv, err := js.KeyValue(context.Background(), roomcluster.LeaseBucket)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := kv.WatchAll(ctx, jetstream.IncludeHistory())
	if err != nil {
		tb.Fatal(err)
	}
	h := &leaseHistory{entries: map[int][]leaseEntry{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			var p int
			if _, err := fmt.Sscanf(e.Key(), "p.%d", &p); err != nil {
				continue
			}
			le := leaseEntry{rev: e.Revision(), put: e.Operation() == jetstream.KeyValuePut, at: e.Created()}
			if le.put {
				var l roomcluster.Lease
				if err := json.Unmarshal(e.Value(), &l); err != nil {
					tb.Errorf("lease %s rev %d: %v", e.Key(), e.Revision(), err)
				}
				le.node = l.Node
			}
			h.mu.Lock()
			h.entries[p] = append(h.entries[p], le)
			h.mu.Unlock()
		}
	}()
	tb.Cleanup(func() { cancel(); _ = w.Stop(); <-done; nc.Close() })
	return h
}

// tenure returns who held partition p's lease taken at revision epoch and
// when that lease ended (the next free marker; zero if it has not).
func (h *leaseHistory) tenure(p int, epoch uint64) (node string, ended time.Time, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	es := h.entries[p]
	i := sort.Search(len(es), func(i int) bool { return es[i].rev >= epoch })
	if i == len(es) || es[i].rev != epoch || !es[i].put {
		return "", time.Time{}, false
	}
	// The lease must have been taken at epoch: the entry before it (if
	// seen) is a free marker.
	if i > 0 && es[i-1].put {
		return "", time.Time{}, false
	}
	for _, e := range es[i+1:] {
		if !e.put {
			return es[i].node, e.at, true
		}
	}
	return es[i].node, time.Time{}, true
}

// answer is one command answered OK.
type answer struct {
	commandID string
	roomID    string
	node      string
	epoch     uint64
	at        time.Time
}

// load runs, per room, clients that join and leave that room through
// routers, each command with an Idempotency-Key, retried with the same key
// after UNAVAILABLE as a client would. A client stays with its room, so a
// room waiting for a new owner never holds up the others' clients. Client
// k of room i is user 1000+i*100+k.
type load struct {
	mu       sync.Mutex
	answers  []answer
	failures map[apperr.Code]int
	retried  int
	stop     context.CancelFunc
	done     sync.WaitGroup
}

func runLoad(tb testing.TB, routers []*roomcluster.Router, roomIDs []string, perRoom int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{failures: map[apperr.Code]int{}, stop: cancel}
	for room := range roomIDs {
		for k := range perRoom {
			l.done.Go(func() { l.client(ctx, tb, routers[(room+k)%len(routers)], roomIDs[room], int64(1_000+room*100+k)) })
		}
	}
	return l
}

func (l *load) client(ctx context.Context, tb testing.TB, r *roomcluster.Router, roomID string, user int64) {
	present := false
	for ctx.Err() == nil {
		cmd := &rooms.Command{Kind: rooms.KindJoinRoom, AppCode: testApp, RoomID: roomID, CommandID: uuid.NewString(),
			ClientKey: true, Actor: rooms.Actor{UserID: user}}
		if present {
			cmd.Kind = rooms.KindLeaveRoom
		}
		for try := 0; ; try++ {
			cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Second)
			c := *cmd
			res, err := r.Execute(cctx, &c)
			ccancel()
			if err == nil {
				l.mu.Lock()
				l.answers = append(l.answers, answer{commandID: cmd.CommandID, roomID: roomID, node: res.Node, epoch: res.Epoch, at: time.Now()})
				l.mu.Unlock()
				present = !present
				break
			}
			l.mu.Lock()
			l.failures[apperr.CodeOf(err)]++
			l.retried++
			l.mu.Unlock()
			if apperr.CodeOf(err) != apperr.Unavailable || try > 20 {
				tb.Errorf("%s %s by %d: %v (try %d)", cmd.Kind, roomID, user, err, try)
				return
			}
		}
	}
}

func (l *load) finish() []answer {
	l.stop()
	l.done.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.answers
}

func (l *load) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.answers)
}

// takenAfter returns when partition p's lease was next created after t.
func (h *leaseHistory) takenAfter(p int, t time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	es := h.entries[p]
	for i, e := range es {
		if e.put && !e.at.Before(t) && (i == 0 || !es[i-1].put) {
			return e.at, true
		}
	}
	return time.Time{}, false
}

// holderAt returns who held partition p's lease at t, as last written
// before t ("" if it was free).
func (h *leaseHistory) holderAt(p int, t time.Time) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	holder := ""
	for _, e := range h.entries[p] {
		if e.at.After(t) {
			break
		}
		holder = e.node
	}
	return holder
}

// routedRoom starts one rooms node and an api router without a node of
// its own, waits until the router sees the node hold every partition, and
// creates one room (owned by user 1) through the router; it returns the
// router, the node, the room and a ctx that ends 20 s later, or with the
// test.
func routedRoom(t *testing.T) (*roomcluster.Router, *testNode, string, context.Context) {
	t.Helper()
	h := newHarness(t, roomcluster.Config{Partitions: 8, LeaseTTL: 2 * time.Second})
	n := h.startNode("n1")
	api := h.router("api")
	h.waitBalanced(api, n)
	roomID := h.createRooms(api, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return api, n, roomID, ctx
}
