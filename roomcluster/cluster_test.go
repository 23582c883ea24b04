package roomcluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
	"voiceroom/roomcluster"
	"voiceroom/rooms"
)

// TestRoomsAcrossNodes runs 3 rooms nodes and 2 api routers under load
// from clients with Idempotency-Keys; kills one node, adds a fourth, shuts
// one down gracefully; then checks from MySQL and the lease history that
// every answered command is logged, no room version was written twice, and
// every OK came from the node that held the room's lease at the time.
func TestRoomsAcrossNodes(t *testing.T) {
	cfg := roomcluster.Config{Partitions: 64, LeaseTTL: 2 * time.Second}
	h := newHarness(t, cfg)
	n1, n2, n3 := h.startNode("n1"), h.startNode("n2"), h.startNode("n3")
	api := []*roomcluster.Router{h.router("api1"), h.router("api2")}
	h.waitBalanced(api[0], n1, n2, n3)
	ids := h.createRooms(api[0], 40)

	l := runLoad(t, api, ids, 1)
	progress := func(step string) {
		t.Helper()
		from := l.count()
		testenv.Eventually(t, 30*time.Second, func() error {
			if n := l.count() - from; n < 300 {
				return fmt.Errorf("%s: %d commands answered since, want 300", step, n)
			}
			return nil
		})
	}
	progress("start")

	h.kill(n1)
	h.waitBalanced(api[0], n2, n3)
	progress("after the kill")

	n4 := h.startNode("n4")
	h.waitBalanced(api[1], n2, n3, n4)
	progress("after a node joined")

	h.stop(n2)
	h.waitBalanced(api[1], n3, n4)
	progress("after a graceful shutdown")

	answers := l.finish()
	t.Logf("%d commands answered OK; retries after UNAVAILABLE %d %v", len(answers), l.retried, l.failures)
	checkAnswers(t, h, answers)
}

// checkAnswers checks the answers against MySQL and the lease history.
func checkAnswers(t *testing.T, h *harness, answers []answer) {
	t.Helper()
	// Every answered command is in the command log, with its time.
	rows, err := h.db.Query(`SELECT command_id, command FROM room_command_log WHERE app_code = ?`, testApp)
	if err != nil {
		t.Fatal(err)
	}
	applied := map[string]int64{}
	for rows.Next() {
		var id string
		var raw []byte
		if err := rows.Scan(&id, &raw); err != nil {
			t.Fatal(err)
		}
		var cmd struct {
			NowMs int64 `json:"now_ms"`
		}
		if err := json.Unmarshal(raw, &cmd); err != nil {
			t.Fatalf("command %s: %v", id, err)
		}
		applied[id] = cmd.NowMs
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()

	// No room version twice, none skipped, and one set of outbox rows per
	// version.
	var versions, rooms, gaps, outboxVersions int
	if err := h.db.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT room_id) FROM room_command_log WHERE app_code = ?`, testApp).Scan(&versions, &rooms); err != nil {
		t.Fatal(err)
	}
	if err := h.db.QueryRow(`SELECT COUNT(*) FROM (SELECT room_id FROM room_command_log WHERE app_code = ?
		GROUP BY room_id HAVING COUNT(*) <> MAX(room_version) OR MIN(room_version) <> 1) g`, testApp).Scan(&gaps); err != nil {
		t.Fatal(err)
	}
	if err := h.db.QueryRow(`SELECT COUNT(DISTINCT room_id, room_version) FROM room_outbox WHERE app_code = ?`, testApp).Scan(&outboxVersions); err != nil {
		t.Fatal(err)
	}
	if gaps != 0 || outboxVersions != versions {
		t.Fatalf("command log: %d versions over %d rooms, %d rooms with a gap or a repeat; outbox holds %d versions", versions, rooms, gaps, outboxVersions)
	}

	// Wait until the history has seen every epoch answered under.
	testenv.Eventually(t, 10*time.Second, func() error {
		for _, a := range answers {
			p := roomcluster.Partition(testApp, a.roomID, h.cfg.Partitions)
			if _, _, ok := h.history.tenure(p, a.epoch); !ok {
				return fmt.Errorf("partition %d epoch %d (node %s) not in the lease history", p, a.epoch, a.node)
			}
		}
		return nil
	})
	byNode := map[string]int{}
	for _, a := range answers {
		nowMs, ok := applied[a.commandID]
		if !ok {
			t.Errorf("command %s on %s answered OK by %s but not in the command log", a.commandID, a.roomID, a.node)
			continue
		}
		p := roomcluster.Partition(testApp, a.roomID, h.cfg.Partitions)
		holder, ended, _ := h.history.tenure(p, a.epoch)
		if holder != a.node {
			t.Errorf("command %s answered by %s under epoch %d of partition %d, which %s held", a.commandID, a.node, a.epoch, p, holder)
		}
		if !ended.IsZero() && nowMs >= ended.UnixMilli() {
			t.Errorf("command %s applied at %d by %s under epoch %d of partition %d, after that lease ended at %d",
				a.commandID, nowMs, a.node, a.epoch, p, ended.UnixMilli())
		}
		byNode[a.node]++
	}
	t.Logf("answers by node: %v; %d versions over %d rooms", byNode, versions, rooms)
	if len(byNode) < 4 {
		t.Errorf("answers came from %d nodes, want all 4", len(byNode))
	}
}

// TestFencedWriteStopsServing: a node whose clock still says it holds a
// partition, but whose room another writer moved on (its lease taken over
// meanwhile), cannot answer OK: its write fails on the command log's key,
// and it stops serving the partition.
func TestFencedWriteStopsServing(t *testing.T) {
	cfg := roomcluster.Config{Partitions: 8, LeaseTTL: 30 * time.Second} // no renewal within the test
	h := newHarness(t, cfg)
	a := h.startNode("a")
	ctx := context.Background()
	res, err := a.svc.Execute(ctx, &rooms.Command{Kind: rooms.KindCreateRoom, AppCode: testApp, CommandID: "c1", ClientKey: true,
		Actor: rooms.Actor{UserID: 1}, Args: rooms.Args{Title: "fenced"}})
	if err != nil {
		t.Fatal(err)
	}
	key := rooms.RoomKey{AppCode: testApp, RoomID: res.View.RoomID}
	join := func(svc *rooms.Service, user int64) (rooms.Result, error) {
		return svc.Execute(ctx, &rooms.Command{Kind: rooms.KindJoinRoom, AppCode: testApp, RoomID: key.RoomID, CommandID: rooms.NewCommandID(),
			Actor: rooms.Actor{UserID: user}})
	}
	if _, err := join(a.svc, 2); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.node.Serving(key); !ok {
		t.Fatal("a does not serve the room's partition")
	}

	// Another writer: the lease is taken from a (as if it had expired
	// while a was paused) and a second service writes the next version.
	_, js := h.connect("intruder")
	kv, err := js.KeyValue(ctx, roomcluster.LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	lease := fmt.Sprintf("p.%d", roomcluster.Partition(key.AppCode, key.RoomID, cfg.Partitions))
	if err := kv.Purge(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, lease, []byte(`{"node":"intruder"}`)); err != nil {
		t.Fatal(err)
	}
	other, err := rooms.New(h.db, users{}, users{}, nil, rooms.Config{}, h.log, nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := join(other, 3); err != nil {
		t.Fatal(err)
	}

	// a's clock still says it serves; its write is refused.
	if _, ok := a.node.Serving(key); !ok {
		t.Fatal("a stopped serving before its write: the test no longer shows the fence")
	}
	_, err = join(a.svc, 4)
	if apperr.CodeOf(err) != apperr.Unavailable {
		t.Fatalf("a's write over a moved room: %v, want UNAVAILABLE", err)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if _, ok := a.node.Serving(key); ok {
			return fmt.Errorf("a still serves the partition after its write was fenced")
		}
		return nil
	})
	if _, err := join(a.svc, 5); !rooms.IsNotServing(err) {
		t.Fatalf("a's next command: %v, want not serving", err)
	}
	if v := testenv.Scalar[int](t, h.db, `SELECT COUNT(*) FROM room_command_log WHERE app_code = ? AND room_id = ?`, testApp, key.RoomID); v != 3 {
		t.Fatalf("%d versions logged, want 3 (create, 2 joins)", v)
	}
}

// TestPartitionsFixedPerDeployment: a node with another P, or a router
// with another lease TTL, refuses to start.
func TestPartitionsFixedPerDeployment(t *testing.T) {
	h := newHarness(t, roomcluster.Config{Partitions: 16})
	_, js := h.connect("other")
	_, err := roomcluster.NewNode(context.Background(), js, roomcluster.Config{Partitions: 32}, "x", nil, nil, h.log, nil)
	if !errors.Is(err, roomcluster.ErrPartitionsChanged) {
		t.Fatalf("node with P=32 in a P=16 deployment: %v, want ErrPartitionsChanged", err)
	}
	_, err = roomcluster.NewRouter(context.Background(), js, roomcluster.Config{Partitions: 16, LeaseTTL: 9 * time.Second}, nil, nil, nil, h.log, nil)
	if !errors.Is(err, roomcluster.ErrLeaseTTLChanged) {
		t.Fatalf("router with a 9s lease TTL in a 5s deployment: %v, want ErrLeaseTTLChanged", err)
	}
}

// TestJetStreamRestartHealsLeases: the lease and member buckets live in
// memory; a JetStream server restarted without them gets them again from
// the nodes, which take their partitions anew and serve.
func TestJetStreamRestartHealsLeases(t *testing.T) {
	cfg := roomcluster.Config{Partitions: 16, LeaseTTL: 2 * time.Second}
	h := newHarness(t, cfg)
	n1, n2 := h.startNode("n1"), h.startNode("n2")
	r := h.router("api")
	h.waitBalanced(r, n1, n2)
	ids := h.createRooms(r, 4)

	h.js.Stop()
	time.Sleep(cfg.LeaseTTL) // the outage outlives the leases
	h.js.Start()
	for i, id := range ids {
		testenv.Eventually(t, 30*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := r.Execute(ctx, &rooms.Command{Kind: rooms.KindJoinRoom, AppCode: testApp, RoomID: id, CommandID: fmt.Sprintf("after-%d", i),
				ClientKey: true, Actor: rooms.Actor{UserID: int64(100 + i)}})
			return err
		})
	}
	h.waitBalanced(r, n1, n2)
}

// TestTakeoverRecoversThePartitionsRooms: the node that takes a dead
// node's partitions loads every room of them with users (listed by the
// rooms rows' group_hash), so their users' presence is swept, and no room
// without users.
func TestTakeoverRecoversThePartitionsRooms(t *testing.T) {
	cfg := roomcluster.Config{Partitions: 8, LeaseTTL: 2 * time.Second}
	h, a, r, ids := oneNodeWithRooms(t, cfg, 13)
	ctx := context.Background()
	for i, id := range ids[:12] { // the last room keeps no user
		if _, err := r.Execute(ctx, &rooms.Command{Kind: rooms.KindJoinRoom, AppCode: testApp, RoomID: id, CommandID: rooms.NewCommandID(),
			Actor: rooms.Actor{UserID: int64(700 + i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := r.Get(ctx, testApp, ids[12]); err != nil || v.OnlineCount != 0 {
		t.Fatalf("the room without users: %d online, %v", v.OnlineCount, err)
	}
	h.kill(a)
	b := h.startNode("b")
	h.waitBalanced(r, b)
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := b.svc.Loaded(); got != 12 {
			return fmt.Errorf("b loaded %d rooms, want the 12 with users", got)
		}
		return nil
	})
}
