package pk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/outboxrelay"
	"voiceroom/pk"
	"voiceroom/roomevent"
	"voiceroom/rooms"
)

// BenchmarkGiftToOpponentScore measures, end to end, the time from a
// gift's commit in one room of a battle to the opponent room's
// RoomPKScoreChanged that carries it (its outbox row): the outbox fast
// path into JetStream, the durable pk scoring it, the clock (its
// production tick, 1 s) sending PKScore to the opponent's cell. Gifts
// come every 20 ms. It reports p50 and p99 in ms; the ceiling, in the same
// run, is the last hop alone: a PKScore command's own latency on the
// opponent room (p50_hop_ms).
//
//	go test ./pk -run '^$' -bench GiftToOpponentScore -benchtime 200x
func BenchmarkGiftToOpponentScore(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := testenv.NewDB(b)
	js := testenv.RunJetStream(b)
	if err := bus.Provision(ctx, js.Conn().JetStream(), bus.StreamConfig{}, bus.ConsumerConfig{Durable: bus.DurablePK,
		FilterSubject: bus.PKFilterSubject, MaxDeliver: -1}.WithDefaults()); err != nil {
		b.Fatal(err)
	}
	log := testenv.Logger(b)
	reg := prometheus.NewRegistry()
	om, err := outboxrelay.NewMetrics(reg)
	if err != nil {
		b.Fatal(err)
	}
	fp, err := outboxrelay.NewFastPath(db, testenv.NewPublisher(b, js.Conn()), log, om,
		outboxrelay.FastPathConfig{Connected: js.Conn().NATS().IsConnected, PublishTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	rs, err := rooms.New(db, profiles{}, profiles{}, fp, rooms.Config{BcryptCost: 4}, log, reg, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	defer rs.Close()
	svc, err := pk.New(db, rs, time.Now, log)
	if err != nil {
		b.Fatal(err)
	}
	scorer, err := pk.NewScorer(db, js.Conn().JetStream(), bus.ConsumerRunConfig{Durable: bus.DurablePK, MaxDeliver: -1}, nil, log)
	if err != nil {
		b.Fatal(err)
	}
	clock, err := pk.NewClock(svc, nil, pk.ClockConfig{Owner: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{}, 3)
	for _, run := range []func(context.Context) error{fp.Run, scorer.Run, clock.Run} {
		go func() { _ = run(ctx); done <- struct{}{} }()
	}
	defer func() { cancel(); <-done; <-done; <-done }()

	h := &harness{db: db, rooms: rs}
	a, o := h.room(b, app, 1), h.room(b, app, 2)
	if err := rs.UpsertGift(ctx, app, rooms.Gift{GiftID: 7, Name: "rose", Price: 1, Heat: 1, Enabled: true}); err != nil {
		b.Fatal(err)
	}
	if _, err := rs.Wallet().Credit(ctx, app, 11, 1_000_000, "seed", "bench"); err != nil {
		b.Fatal(err)
	}
	for _, u := range []int64{1, 11} {
		h.do(b, app, a, rooms.KindJoinRoom, rooms.Actor{UserID: u}, rooms.Args{})
	}
	inv, err := svc.Invite(ctx, app, 1, a, pk.Invitation{OpponentRoomID: o, DurationSeconds: 1800})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := svc.Accept(ctx, app, 2, inv.BattleID); err != nil {
		b.Fatal(err)
	}

	committed := make([]time.Time, 0, b.N)
	pace := time.NewTicker(20 * time.Millisecond)
	defer pace.Stop()
	b.ResetTimer()
	for b.Loop() {
		<-pace.C
		h.do(b, app, a, rooms.KindSendGift, rooms.Actor{UserID: 11}, rooms.Args{GiftID: 7, Count: 1, TargetUserID: 1})
		committed = append(committed, time.Now())
	}
	n := int64(len(committed))
	// The opponent's score events, by seq: when each was committed.
	toldAt := map[int64]int64{}
	testenv.Eventually(b, 60*time.Second, func() error {
		rows, err := db.QueryContext(ctx, `SELECT envelope, created_at_ms FROM room_outbox WHERE room_id = ? AND event_type = ?`,
			o, roomevent.RoomPKScoreChanged)
		if err != nil {
			return err
		}
		defer rows.Close()
		var top int64
		for rows.Next() {
			var raw []byte
			var at int64
			if err := rows.Scan(&raw, &at); err != nil {
				return err
			}
			env, err := bus.DecodeEnvelope(raw)
			if err != nil {
				return err
			}
			var body roomevent.PKScore
			if err := json.Unmarshal(env.Payload, &body); err != nil {
				return err
			}
			toldAt[body.Seq] = at
			top = max(top, body.Seq)
		}
		if top < n {
			return fmt.Errorf("opponent told seq %d of %d", top, n)
		}
		return rows.Err()
	})
	b.StopTimer()
	seqs := make([]int64, 0, len(toldAt))
	for s := range toldAt {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	lat := make([]float64, 0, n)
	for i, at := range committed {
		k, _ := slices.BinarySearch(seqs, int64(i+1)) // the first event whose seq covers gift i+1
		lat = append(lat, float64(toldAt[seqs[k]]-at.UnixMilli()))
	}
	slices.Sort(lat)
	b.ReportMetric(lat[len(lat)/2], "p50_ms")
	b.ReportMetric(lat[len(lat)*99/100], "p99_ms")

	// The ceiling: the last hop alone, a PKScore on the opponent's cell.
	hops := make([]float64, 0, 50)
	for i := range 50 {
		start := time.Now()
		if _, err := rs.Execute(ctx, &rooms.Command{Kind: rooms.KindPKScore, AppCode: app, RoomID: o, CommandID: rooms.NewCommandID(),
			Actor: rooms.PKActor, Args: rooms.Args{PK: &rooms.PKArgs{BattleID: inv.BattleID, OpponentRoomID: a, Seq: n + 1 + int64(i)}}}); err != nil {
			b.Fatal(err)
		}
		hops = append(hops, float64(time.Since(start).Microseconds())/1000)
	}
	slices.Sort(hops)
	b.ReportMetric(hops[len(hops)/2], "p50_hop_ms")
	b.ReportMetric(0, "ns/op")
}
