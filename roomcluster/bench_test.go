package roomcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/internal/testenv"
	"voiceroom/roomcluster"
	"voiceroom/rooms"
)

// BenchmarkRouteHop measures what the NATS hop adds to a room command:
// the same commands through a router whose own node serves every
// partition (in process, as with one node) and through a router in
// another "process" (remote: request, the owner's micro service, reply).
// Heartbeats change nothing durable, so they show the hop alone; joins and
// leaves add a MySQL commit each. Each is sent as the HTTP edge sends it:
// heartbeats and leaves without wanting the room's view (NoView), joins
// wanting it as JSON (ViewJSON). The process's CPU includes the embedded
// JetStream server's.
//
// nats_echo/remote is the shape's floor, measured beside them: the same
// clients send a heartbeat's request body over the same NATS server to a
// plain subscription on the owner's connection, which answers at once
// with a reply's body, so only the request/reply itself costs (the
// owner's leases are renewed as in the other runs).
func BenchmarkRouteHop(b *testing.B) {
	for _, kind := range []string{"heartbeat", "join_leave"} {
		for _, path := range []string{"local", "remote"} {
			b.Run(kind+"/"+path, func(b *testing.B) { benchRoute(b, kind, path) })
		}
	}
	b.Run("nats_echo/remote", benchEcho)
}

// routeClients is how many clients send at once in BenchmarkRouteHop.
const routeClients = 32

// benchEcho is BenchmarkRouteHop's floor: a NATS request and its reply,
// nothing run.
func benchEcho(b *testing.B) {
	h := newHarness(b, roomcluster.Config{Partitions: 64})
	n := h.startNode("owner")
	body, err := json.Marshal(&rooms.Command{Kind: rooms.KindHeartbeat, AppCode: testApp, RoomID: rooms.NewRoomID(testApp, 1, "echo", true),
		CommandID: rooms.NewCommandID(), Actor: rooms.Actor{UserID: 10_000}, NoView: true})
	if err != nil {
		b.Fatal(err)
	}
	answer := []byte(`{"epoch":12,"node":"` + n.node.ID() + `"}`)
	sub, err := n.nc.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(answer) })
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	client, _ := h.connect("api")
	defer client.Close()
	driveRoute(b, func(int, int) error {
		_, err := client.Request("bench.echo", body, 5*time.Second)
		return err
	})
}

// driveRoute runs b.N calls of send from routeClients clients at once
// (client c's i-th call is send(c, i)) and reports their rate, latency
// and the process's CPU per 1,000.
func driveRoute(b *testing.B, send func(c, i int) error) {
	lat := make([][]time.Duration, routeClients)
	var next sync.Mutex
	done := 0
	b.ResetTimer()
	cpu0, t0 := testenv.ProcessCPU(b), time.Now()
	var wg sync.WaitGroup
	for c := range routeClients {
		wg.Go(func() {
			for i := 0; ; i++ {
				next.Lock()
				if done >= b.N {
					next.Unlock()
					return
				}
				done++
				next.Unlock()
				start := time.Now()
				if err := send(c, i); err != nil {
					b.Error(err)
					return
				}
				lat[c] = append(lat[c], time.Since(start))
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(t0), testenv.ProcessCPU(b)-cpu0
	b.StopTimer()
	all := slices.Sorted(slices.Values(slices.Concat(lat...)))
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "cmds/s")
	b.ReportMetric(testenv.Millis(testenv.Percentile(all, 0.50)), "p50_ms")
	b.ReportMetric(testenv.Millis(testenv.Percentile(all, 0.99)), "p99_ms")
	b.ReportMetric(cpu.Seconds()*1000/float64(len(all)), "cpu_s/1000cmds")
}

func benchRoute(b *testing.B, kind, path string) {
	// A long attempt: on a loaded machine a routed create that times out
	// and is asked again can be answered ALREADY_EXISTS.
	cfg := roomcluster.Config{Partitions: 64, AttemptTimeout: 5 * time.Second}
	h := newHarness(b, cfg)
	n := h.startNode("owner")
	var r *roomcluster.Router
	if path == "remote" {
		r = h.router("api")
	} else {
		_, js := h.connect("api-local")
		m, err := roomcluster.NewMetrics(prometheus.NewRegistry())
		if err != nil {
			b.Fatal(err)
		}
		r, err = roomcluster.NewRouter(context.Background(), js, cfg, n.node, n.svc, n.svc, h.log, m)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
	}
	h.waitBalanced(r, n)
	ids := h.createRooms(r, 64)
	users := make([]int64, len(ids)) // one present user per room for heartbeats
	for i, id := range ids {
		users[i] = int64(10_000 + i)
		if _, err := r.Execute(context.Background(), &rooms.Command{Kind: rooms.KindJoinRoom, AppCode: testApp, RoomID: id,
			CommandID: rooms.NewCommandID(), Actor: rooms.Actor{UserID: users[i]}}); err != nil {
			b.Fatal(err)
		}
	}
	present := make([]map[int]bool, routeClients) // by client: the rooms it is in
	for c := range present {
		present[c] = map[int]bool{}
	}
	driveRoute(b, func(c, i int) error {
		room := (c + i*routeClients) % len(ids)
		cmd := &rooms.Command{AppCode: testApp, RoomID: ids[room], CommandID: rooms.NewCommandID()}
		switch {
		case kind == "heartbeat":
			cmd.Kind, cmd.Actor, cmd.NoView = rooms.KindHeartbeat, rooms.Actor{UserID: users[room]}, true
		case present[c][room]:
			cmd.Kind, cmd.Actor, cmd.NoView = rooms.KindLeaveRoom, rooms.Actor{UserID: int64(100_000 + c)}, true
		default:
			cmd.Kind, cmd.Actor, cmd.ViewJSON = rooms.KindJoinRoom, rooms.Actor{UserID: int64(100_000 + c)}, true
		}
		if _, err := r.Execute(context.Background(), cmd); err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		if kind != "heartbeat" {
			present[c][room] = !present[c][room]
		}
		return nil
	})
}

// BenchmarkFailover kills a rooms node (its connection closes; no
// hand-over) b.N times under load over 3 nodes and 2 routers, and reports
// per room of the dead node the time from the kill to its first OK
// (p50/p99/max over all kills), and for the rooms of the surviving nodes
// the longest gap between two OKs around the kill. The killed node is
// replaced after each round. VOICEROOM_BENCH_LEASE_TTL sets the lease TTL
// (default the product's default, 5s).
func BenchmarkFailover(b *testing.B) {
	ttl := time.Duration(testenv.EnvInt("VOICEROOM_BENCH_LEASE_TTL_MS", 5000)) * time.Millisecond
	cfg := roomcluster.Config{Partitions: 256, LeaseTTL: ttl}
	h := newHarness(b, cfg)
	nodes := []*testNode{h.startNode("n0"), h.startNode("n1"), h.startNode("n2")}
	api := []*roomcluster.Router{h.router("api1"), h.router("api2")}
	h.waitBalanced(api[0], nodes...)
	ids := h.createRooms(api[0], 60)
	l := runLoad(b, api, ids, 1)
	defer l.finish()
	var toFirstOK, toTaken, survivorGap []time.Duration
	b.ResetTimer()
	for i := range b.N {
		victim := nodes[i%len(nodes)]
		from := l.count()
		killedAt := time.Now()
		h.kill(victim)
		held := map[int]bool{} // the victim's partitions, by the lease history
		testenv.Eventually(b, 5*time.Second, func() error {
			clear(held)
			for p := range cfg.Partitions {
				if h.history.holderAt(p, killedAt) == victim.node.ID() {
					held[p] = true
				}
			}
			if len(held) == 0 {
				return fmt.Errorf("the history shows no partition of %s yet", victim.node.ID())
			}
			return nil
		})
		rest := slices.DeleteFunc(slices.Clone(nodes), func(n *testNode) bool { return n == victim })
		h.waitBalanced(api[0], rest...)
		// Every room of the dead node answered again.
		var orphans []string
		for _, id := range ids {
			if held[roomcluster.Partition(testApp, id, cfg.Partitions)] {
				orphans = append(orphans, id)
			}
		}
		testenv.Eventually(b, 2*ttl+10*time.Second, func() error {
			first := firstOKAfter(l, from, killedAt)
			for _, id := range orphans {
				if _, ok := first[id]; !ok {
					return fmt.Errorf("room %s not answered since the kill", id)
				}
			}
			return nil
		})
		first := firstOKAfter(l, from, killedAt)
		for _, id := range orphans {
			toFirstOK = append(toFirstOK, first[id].Sub(killedAt))
		}
		for p := range held {
			if at, ok := h.history.takenAfter(p, killedAt); ok {
				toTaken = append(toTaken, at.Sub(killedAt))
			}
		}
		survivorGap = append(survivorGap, longestGap(l, from, killedAt, time.Now(), func(id string) bool {
			return !held[roomcluster.Partition(testApp, id, cfg.Partitions)]
		}))
		nodes[i%len(nodes)] = h.startNode(fmt.Sprintf("n%d", i+3))
		h.waitBalanced(api[0], nodes...)
	}
	b.StopTimer()
	slices.Sort(toFirstOK)
	slices.Sort(toTaken)
	slices.Sort(survivorGap)
	b.ReportMetric(testenv.Millis(testenv.Percentile(toTaken, 0.50)), "lease_taken_p50_ms")
	b.ReportMetric(testenv.Millis(toTaken[len(toTaken)-1]), "lease_taken_max_ms")
	b.ReportMetric(testenv.Millis(testenv.Percentile(toFirstOK, 0.50)), "failover_p50_ms")
	b.ReportMetric(testenv.Millis(testenv.Percentile(toFirstOK, 0.99)), "failover_p99_ms")
	b.ReportMetric(testenv.Millis(toFirstOK[len(toFirstOK)-1]), "failover_max_ms")
	b.ReportMetric(testenv.Millis(survivorGap[len(survivorGap)-1]), "survivors_longest_gap_ms")
	b.ReportMetric(float64(len(toFirstOK)), "orphaned_rooms")
	b.Logf("lease TTL %v; %d kills; %d rooms of dead nodes; survivors' longest gap per kill: %v", ttl, b.N, len(toFirstOK), survivorGap)
}

// BenchmarkHandover shuts a rooms node down gracefully b.N times under
// load over 3 nodes and reports, for the rooms it handed over, the longest
// gap between two OKs across the hand-over.
func BenchmarkHandover(b *testing.B) {
	cfg := roomcluster.Config{Partitions: 256}
	h := newHarness(b, cfg)
	nodes := []*testNode{h.startNode("n0"), h.startNode("n1"), h.startNode("n2")}
	api := []*roomcluster.Router{h.router("api1"), h.router("api2")}
	h.waitBalanced(api[0], nodes...)
	ids := h.createRooms(api[0], 60)
	l := runLoad(b, api, ids, 1)
	defer l.finish()
	var gaps []time.Duration
	b.ResetTimer()
	for i := range b.N {
		victim := nodes[i%len(nodes)]
		held := map[int]bool{}
		for _, p := range victim.node.Held() {
			held[p] = true
		}
		from := l.count()
		start := time.Now()
		h.stop(victim)
		rest := slices.DeleteFunc(slices.Clone(nodes), func(n *testNode) bool { return n == victim })
		h.waitBalanced(api[0], rest...)
		time.Sleep(time.Second) // the load goes on past the hand-over, so a gap it caused ends inside the window
		gaps = append(gaps, longestGap(l, from, start.Add(-time.Second), time.Now(), func(id string) bool {
			return held[roomcluster.Partition(testApp, id, cfg.Partitions)]
		}))
		nodes[i%len(nodes)] = h.startNode(fmt.Sprintf("n%d", i+3))
		h.waitBalanced(api[0], nodes...)
	}
	b.StopTimer()
	slices.Sort(gaps)
	b.ReportMetric(testenv.Millis(testenv.Percentile(gaps, 0.50)), "moved_gap_p50_ms")
	b.ReportMetric(testenv.Millis(gaps[len(gaps)-1]), "moved_gap_max_ms")
	b.Logf("%d graceful shutdowns; longest gap between OKs of the moved rooms, per shutdown: %v", b.N, gaps)
}

// firstOKAfter returns each room's first OK at or after t among the
// answers from index from on.
func firstOKAfter(l *load, from int, t time.Time) map[string]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := map[string]time.Time{}
	for _, a := range l.answers[min(from, len(l.answers)):] {
		if a.at.Before(t) {
			continue
		}
		if _, ok := first[a.roomID]; !ok {
			first[a.roomID] = a.at
		}
	}
	return first
}

// gapDebug, when set, prints the longest gap's room and times.
var gapDebug = os.Getenv("VOICEROOM_BENCH_GAP_DEBUG") != ""

// longestGap is the longest time between two OKs of one room (of those
// keep accepts) between from and to, counting from the last OK before
// from's answers.
func longestGap(l *load, fromIdx int, from, to time.Time, keep func(string) bool) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := map[string]time.Time{}
	var longest time.Duration
	for _, a := range l.answers[max(0, fromIdx-2000):] {
		if !keep(a.roomID) || a.at.After(to) {
			continue
		}
		if prev, ok := last[a.roomID]; ok && !a.at.Before(from) {
			if g := a.at.Sub(prev); g > longest {
				longest = g
				if gapDebug && g > time.Second {
					fmt.Fprintf(os.Stderr, "gap %v room %s node %s epoch %d: %s -> %s (window from %s)\n", g, a.roomID, a.node, a.epoch,
						prev.Format("15:04:05.000"), a.at.Format("15:04:05.000"), from.Format("15:04:05.000"))
				}
			}
		}
		last[a.roomID] = a.at
	}
	return longest
}

// BenchmarkIdleNode measures what holding partitions costs a node with no
// traffic: its lease renewals (P keys renewed one by one every RenewEvery)
// and membership, as the process's CPU per second of wall time (the
// embedded JetStream server's included), for P = 1 and P = 256.
func BenchmarkIdleNode(b *testing.B) {
	for _, p := range []int{1, 256} {
		b.Run(fmt.Sprintf("partitions=%d", p), func(b *testing.B) {
			h := newHarness(b, roomcluster.Config{Partitions: p})
			n := h.startNode("idle")
			r := h.router("api")
			h.waitBalanced(r, n)
			b.ResetTimer()
			cpu0, t0 := testenv.ProcessCPU(b), time.Now()
			time.Sleep(time.Duration(b.N) * 100 * time.Millisecond) // what is measured is the idle time itself
			cpu, wall := testenv.ProcessCPU(b)-cpu0, time.Since(t0)
			b.StopTimer()
			b.ReportMetric(cpu.Seconds()*1000/wall.Seconds(), "cpu_ms/s")
		})
	}
}
