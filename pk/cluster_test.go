package pk_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/pk"
	"voiceroom/roomcluster"
	"voiceroom/roomevent"
	"voiceroom/rooms"
	"voiceroom/wallet"
)

// clusterNode is one rooms node of TestBattleAcrossNodesWithAKill.
type clusterNode struct {
	id     string
	nc     *nats.Conn
	svc    *rooms.Service
	srv    *roomcluster.Server
	cancel context.CancelFunc
	done   chan struct{}
}

// kill stops n the way a crash does: its connection closes, its leases
// are neither renewed nor handed over (as roomcluster's tests do).
func (n *clusterNode) kill() {
	n.nc.Close()
	n.cancel()
	<-n.done
	n.srv.Stop()
	n.svc.Close()
}

func startClusterNode(t *testing.T, url string, cfg roomcluster.Config, name string, h *harness) *clusterNode {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	svc, err := rooms.New(h.db, profiles{}, profiles{}, nil, rooms.Config{CommandTimeout: 3 * time.Second, BcryptCost: 4}, testenv.Logger(t), reg, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	m, err := roomcluster.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	node, err := roomcluster.NewNode(ctx, js, cfg, name, svc, svc.Loaded, testenv.Logger(t), m)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	svc.SetOwnership(node)
	srv, err := roomcluster.Serve(nc, node, svc, testenv.Logger(t), m)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	n := &clusterNode{id: node.ID(), nc: nc, svc: svc, srv: srv, cancel: cancel, done: make(chan struct{})}
	go func() { _ = svc.Run(ctx) }()
	go func() { defer close(n.done); _ = node.Run(ctx) }()
	select {
	case <-node.Ready():
	case <-time.After(10 * time.Second):
		t.Fatalf("node %s not ready", name)
	}
	return n
}

// TestBattleAcrossNodesWithAKill: two rooms owned by different rooms
// nodes battle through a router (an api process without rooms). Gifts are
// sent in both; the node of one room is killed (no hand-over) just as the
// battle's time is up, so the end arrives while that room's node is down.
// The final scores equal the gifts committed in the window (each scored
// twice, as a redelivery after a restart would), the result is settled
// and emitted once, and both rooms show it once their nodes answer; a gift
// after the end counts nothing.
func TestBattleAcrossNodesWithAKill(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	js := testenv.RunJetStream(t)
	cfg := roomcluster.Config{Partitions: 8, LeaseTTL: 6 * time.Second} // longer than a tell's 2 s: the first end finds a's node gone
	n1, n2 := startClusterNode(t, js.URL(), cfg, "n1", h), startClusterNode(t, js.URL(), cfg, "n2", h)
	killed := false
	t.Cleanup(func() {
		if !killed {
			n1.kill()
		}
		n2.kill()
	})
	nc, err := nats.Connect(js.URL(), nats.Name("api"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	rjs, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m, err := roomcluster.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	router, err := roomcluster.NewRouter(ctx, rjs, cfg, nil, nil, rooms.NewRecords(h.db, time.Now), testenv.Logger(t), m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(router.Close)
	svc, err := pk.New(h.db, router, h.clock.Now, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	tick, err := pk.NewClock(svc, h.progress, pk.ClockConfig{Owner: "api"})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if counts := router.Owners(); counts[n1.id]+counts[n2.id] != cfg.Partitions || counts[n1.id] == 0 || counts[n2.id] == 0 {
			return fmt.Errorf("partitions held %v", counts)
		}
		return nil
	})

	// One room on each node.
	exec := func(cmd *rooms.Command) rooms.Result {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if cmd.CommandID == "" {
			cmd.CommandID = rooms.NewCommandID()
		}
		res, err := router.Execute(cctx, cmd)
		if err != nil {
			t.Fatalf("%s: %v", cmd.Kind, err)
		}
		return res
	}
	roomOn := map[string]string{}
	owners := map[string]int64{}
	for owner := int64(1); len(roomOn) < 2 && owner < 40; owner++ {
		id := fmt.Sprintf("create-%d", owner)
		res := exec(&rooms.Command{Kind: rooms.KindCreateRoom, AppCode: app, RoomID: rooms.NewRoomID(app, owner, id, true), CommandID: id,
			ClientKey: true, Actor: rooms.Actor{UserID: owner}, Args: rooms.Args{Title: "pk"}})
		if _, ok := roomOn[res.Node]; !ok {
			roomOn[res.Node], owners[res.View.RoomID] = res.View.RoomID, owner
		}
	}
	a, b := roomOn[n1.id], roomOn[n2.id]
	if a == "" || b == "" {
		t.Fatalf("no room on each node: %v", roomOn)
	}
	if err := rooms.NewRecords(h.db, time.Now).UpsertGift(ctx, app, rooms.Gift{GiftID: 7, Name: "rose", Price: 10, Heat: 1, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	w := wallet.New(h.db, time.Now)
	for _, r := range []string{a, b} {
		exec(&rooms.Command{Kind: rooms.KindJoinRoom, AppCode: app, RoomID: r, Actor: rooms.Actor{UserID: owners[r]}})
		for _, u := range []int64{100 + owners[r], 200 + owners[r]} {
			if _, err := w.Credit(ctx, app, u, 100_000, fmt.Sprintf("seed-%d", u), "test"); err != nil {
				t.Fatal(err)
			}
			exec(&rooms.Command{Kind: rooms.KindJoinRoom, AppCode: app, RoomID: r, Actor: rooms.Actor{UserID: u}})
		}
	}
	sendGifts := func(r string, count int64) {
		t.Helper()
		for _, u := range []int64{100 + owners[r], 200 + owners[r]} {
			exec(&rooms.Command{Kind: rooms.KindSendGift, AppCode: app, RoomID: r, Actor: rooms.Actor{UserID: u},
				Args: rooms.Args{GiftID: 7, Count: count, TargetUserID: owners[r]}})
		}
	}

	h.clock.Advance(time.Since(h.clock.Now())) // the battle's clock at the rooms' now
	inv, err := svc.Invite(ctx, app, owners[a], a, pk.Invitation{OpponentRoomID: b, DurationSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Accept(ctx, app, owners[b], inv.BattleID); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{a, b} {
		v, err := router.Get(ctx, app, r)
		if err != nil || v.PK == nil || v.PK.BattleID != inv.BattleID {
			t.Fatalf("room %s on its node does not show the battle: %+v %v", r, v.PK, err)
		}
	}
	sendGifts(a, 3) // 2 senders x 30 coins
	sendGifts(b, 2)
	sendGifts(b, 5) // 2 x 20 + 2 x 50
	scoreAll := func() {
		t.Helper()
		rows, err := h.db.Query(`SELECT envelope FROM room_outbox WHERE app_code = ? AND event_type = ?`, app, roomevent.RoomGiftSent)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var raw []byte
			if err := rows.Scan(&raw); err != nil {
				t.Fatal(err)
			}
			env, err := bus.DecodeEnvelope(raw)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // a redelivery counts nothing
				if err := pk.Score(ctx, h.db, env); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	scoreAll()
	if err := tick.Round(ctx); err != nil {
		t.Fatal(err)
	}

	// a's node dies just as the time is up: the end arrives while it is down.
	n1.kill()
	killed = true
	h.clock.Advance(61 * time.Second)
	testenv.Eventually(t, 60*time.Second, func() error {
		if err := tick.Round(ctx); err != nil {
			return err
		}
		got, err := svc.Get(ctx, app, inv.BattleID)
		if err != nil {
			return err
		}
		if got.Status != pk.StatusEnded {
			return fmt.Errorf("battle %s", got.Status)
		}
		if n := h.count(t, `SELECT notified FROM pk_battles WHERE battle_id = ?`, inv.BattleID); n != 15 {
			return fmt.Errorf("rooms told: %b", n)
		}
		return nil
	})
	got, err := svc.Get(ctx, app, inv.BattleID)
	if err != nil {
		t.Fatal(err)
	}
	if got.RoomScore != 60 || got.OpponentScore != 140 || got.WinnerRoomID != b || got.Reason != roomevent.PKReasonTimeUp {
		t.Fatalf("result %+v, want 60:140, %s won at time up", got, b)
	}
	if n := h.events(t, roomevent.PKRoomID(inv.BattleID), roomevent.PKSettled); n != 1 {
		t.Fatalf("%d PKSettled", n)
	}
	for _, r := range []string{a, b} {
		if n := h.events(t, r, roomevent.RoomPKEnded); n != 1 {
			t.Fatalf("%s: %d RoomPKEnded", r, n)
		}
		v, err := router.Get(ctx, app, r)
		if err != nil || v.PK != nil {
			t.Fatalf("room %s after the end: %+v %v", r, v.PK, err)
		}
	}
	// A gift after the end (a's room now on n2) counts nothing.
	sendGifts(a, 9)
	scoreAll()
	if got, _ := svc.Get(ctx, app, inv.BattleID); got.RoomScore != 60 {
		t.Fatalf("a gift after the end scored: %+v", got)
	}
}
