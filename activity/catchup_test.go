package activity

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
)

// retro inserts a as an activity created after its start: catch-up
// state reading, as Store.Create writes it.
func (e *scoreEnv) retro(a Activity) int64 {
	e.tb.Helper()
	id := e.activity(a)
	if _, err := e.db.Exec(`UPDATE activities SET catchup_state = ? WHERE activity_id = ?`, CatchupReading, id); err != nil {
		e.tb.Fatal(err)
	}
	return id
}

// catchupOf reads activity id's catch-up columns.
func (e *scoreEnv) catchupOf(id int64) (Catchup, string) {
	e.tb.Helper()
	var c Catchup
	var owner string
	if err := e.db.QueryRow(`SELECT catchup_state, catchup_seq, live_from_seq, catchup_owner FROM activities WHERE activity_id = ?`, id).
		Scan(&c.State, &c.Seq, &c.LiveFromSeq, &owner); err != nil {
		e.tb.Fatal(err)
	}
	return c, owner
}

// waitState waits until activity id's catch-up is in state.
func (e *scoreEnv) waitState(id int64, state CatchupState) {
	e.tb.Helper()
	testenv.Eventually(e.tb, 60*time.Second, func() error {
		if c, _ := e.catchupOf(id); c.State != state {
			return fmt.Errorf("activity %d catch-up %+v, want %s", id, c, state)
		}
		return nil
	})
}

// stream is ROOM_EVENTS.
func (e *scoreEnv) stream() jetstream.Stream {
	e.tb.Helper()
	st, err := e.conn.JetStream().Stream(context.Background(), bus.StreamName)
	if err != nil {
		e.tb.Fatal(err)
	}
	return st
}

// newCatchUp is a read back named owner on the env's clock, reading
// batch events at a time, its series on reg.
func (e *scoreEnv) newCatchUp(owner string, batch int, reg prometheus.Registerer) *CatchUp {
	e.tb.Helper()
	m, err := NewCatchupMetrics(reg)
	if err != nil {
		e.tb.Fatal(err)
	}
	c, err := NewCatchUp(e.db, e.rdb, e.stream(), CatchupConfig{Owner: owner, Batch: batch, Tick: 20 * time.Millisecond,
		JoinMargin: time.Millisecond, Score: e.cfg}, testenv.Logger(e.tb), m)
	if err != nil {
		e.tb.Fatal(err)
	}
	return c
}

// waitLive waits until the live durable has acked every message stored.
func (e *scoreEnv) waitLive() {
	e.tb.Helper()
	testenv.Eventually(e.tb, 60*time.Second, func() error {
		ctx := context.Background()
		cons, err := e.stream().Consumer(ctx, bus.DurableActivity)
		if err != nil {
			return err
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("live durable: %d pending, %d unacked", info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

// allScores is activity id's scores in every period, "period:subject".
func (e *scoreEnv) allScores(id int64) map[string]int64 {
	e.tb.Helper()
	rows, err := e.db.Query(`SELECT period_start_ms, subject, score FROM activity_scores WHERE activity_id = ?`, id)
	if err != nil {
		e.tb.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var ps, v int64
		var s string
		if err := rows.Scan(&ps, &s, &v); err != nil {
			e.tb.Fatal(err)
		}
		out[fmt.Sprint(ps, ":", s)] = v
	}
	if err := rows.Err(); err != nil {
		e.tb.Fatal(err)
	}
	return out
}

// openSessions is activity id's open mic sessions, "room:user:since".
func (e *scoreEnv) openSessions(id int64) map[string]bool {
	e.tb.Helper()
	rows, err := e.db.Query(`SELECT room_id, user_id, since_ms FROM activity_mic_open WHERE activity_id = ?`, id)
	if err != nil {
		e.tb.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var room string
		var user, since int64
		if err := rows.Scan(&room, &user, &since); err != nil {
			e.tb.Fatal(err)
		}
		out[fmt.Sprint(room, ":", user, ":", since)] = true
	}
	return out
}

// traffic makes a room's mixed events: joins and heartbeats-like events
// that score nothing, gifts, and mic sessions (up, then down, a seat
// change, a leave or a kick), with a listener's leave before going up
// now and then. It keeps the gifts' sums for a recomputation.
type traffic struct {
	e     *scoreEnv
	rooms []room
	onMic map[int64]bool
	n     int
	atMs  int64
	sent  map[string]int64 // gift_value_sent, by sender
}

func newTraffic(e *scoreEnv, startMs int64, rooms ...room) *traffic {
	return &traffic{e: e, rooms: rooms, onMic: map[int64]bool{}, atMs: startMs, sent: map[string]int64{}}
}

// next returns the next k events.
func (tr *traffic) next(k int) []bus.Envelope {
	var out []bus.Envelope
	for range k {
		tr.n++
		tr.atMs += 97 * sec
		i := tr.n
		u := int64(i%7 + 1)
		r := tr.rooms[int(u)%len(tr.rooms)]
		e := tr.e
		switch i % 6 {
		case 0, 3:
			out = append(out, e.event(r, roomevent.RoomUserJoined, nil, tr.atMs))
		case 1:
			v := int64(i%13 + 1)
			out = append(out, e.gift(r, u, 100+u, int64(i%3+1), v, 1, tr.atMs))
			tr.sent[fmt.Sprint(u)] += v
		case 2, 4, 5:
			switch {
			case !tr.onMic[u] && i%5 == 0:
				// A listener leaves, comes back and goes up at once.
				out = append(out, e.event(r, roomevent.RoomUserLeft, roomevent.UserLeft{UserID: u, Reason: "user"}, tr.atMs),
					e.mic(r, roomevent.RoomMicUp, u, tr.atMs+sec))
				tr.onMic[u] = true
			case !tr.onMic[u]:
				out = append(out, e.mic(r, roomevent.RoomMicUp, u, tr.atMs))
				tr.onMic[u] = true
			case i%4 == 0:
				out = append(out, e.event(r, roomevent.RoomMicChanged, roomevent.MicChanged{UserID: u, FromSeatIndex: 1, ToSeatIndex: 2}, tr.atMs))
			case i%4 == 1:
				out = append(out, e.event(r, roomevent.RoomUserLeft, roomevent.UserLeft{UserID: u, Reason: "user", SeatIndex: 1}, tr.atMs))
				tr.onMic[u] = false
			default:
				out = append(out, e.mic(r, roomevent.RoomMicDown, u, tr.atMs))
				tr.onMic[u] = false
			}
		}
	}
	return out
}

// catchupDefs are the activities the catch-up tests read back: one of
// each metric family, and a daily task (Shanghai days).
func catchupDefs() []Activity {
	return []Activity{
		{Metric: GiftValueSent},
		{Metric: RoomGiftValue, RegionIDs: []int64{11}},
		{Metric: MicSeconds},
		{Kind: Task, Metric: GiftCount, Period: Day, Target: 3, RewardCoins: 5},
	}
}

// TestCatchUpScoresAsFromTheStart: activities created after 600 events
// of their window (gifts, mic sessions, joins, leaves) and read back
// while live traffic goes on score exactly as the same activities
// defined before their start (every score of every period, the open mic
// sessions, the task payouts), and the gifts as a recomputation.
func TestCatchUpScoresAsFromTheStart(t *testing.T) {
	e := newScoreEnv(t, map[string]string{"a1": "Asia/Shanghai"})
	e.setClock(t0 + 6*day)
	var refs, retros []int64
	for _, a := range catchupDefs() {
		refs = append(refs, e.activity(a))
	}
	e.start(e.rdb)
	tr := newTraffic(e, t0, e.room("a1", 11, 1), e.room("a1", 12, 2), e.room("a1", 11, 3))
	e.publish(tr.next(600)...)
	e.waitLive()
	for _, a := range catchupDefs() {
		retros = append(retros, e.retro(a))
	}
	reg := prometheus.NewRegistry()
	c := e.newCatchUp("runner-1", 25, reg)
	c.afterBatch = func(id int64, n int) error {
		if id == retros[0] && n <= 30 {
			e.publish(tr.next(4)...) // live traffic during the read back
		}
		return nil
	}
	c.afterJoining = func(int64, uint64) { e.clock.Advance(time.Second) } // the live lists go stale
	c.cfg.MaxReading = len(retros)
	testenv.Start(t, c.Run)
	for _, id := range retros {
		e.waitState(id, CatchupJoined)
	}
	e.publish(tr.next(100)...)
	e.waitLive()
	for i := range refs {
		ref, got := e.allScores(refs[i]), e.allScores(retros[i])
		if len(ref) == 0 || !maps.Equal(ref, got) {
			t.Errorf("%s: read back scores %v, want %v (defined before its start)", catchupDefs()[i].Metric, got, ref)
		}
		refOpen, gotOpen := e.openSessions(refs[i]), e.openSessions(retros[i])
		if !maps.Equal(refOpen, gotOpen) {
			t.Errorf("%s: open mic sessions %v, want %v", catchupDefs()[i].Metric, gotOpen, refOpen)
		}
	}
	if ref, got := len(e.payouts(refs[3])), len(e.payouts(retros[3])); ref == 0 || ref != got {
		t.Errorf("task payouts: %d read back, %d defined before", got, ref)
	}
	e.mustEqualScores(retros[0], t0, tr.sent)
	if n := testenv.MustMetric(t, reg, "voiceroom_activity_catchup_events_total", "result", "scored"); n == 0 {
		t.Fatal("the read back scored nothing")
	}
}

// TestCatchUpSeamCountsOnce forces both sides of the seam: events the
// live durable skipped with a list older than the joining (the read back
// scores them), and events the live durable scored with a fresh list
// before the read back reads them again (the overlap (L, D]: counted
// once), among them a listener's leave followed by their mic up, whose
// leave, read late, must not end the session opened after it.
func TestCatchUpSeamCountsOnce(t *testing.T) {
	e := newScoreEnv(t, nil)
	e.setClock(t0 + 6*day)
	r := e.room("a1", 11, 1)
	e.start(e.rdb)
	e.publish(e.gift(r, 1, 2, 1, 1000, 1, t0-hour)) // before the window: loads the live list
	e.waitLive()
	gifts := e.retro(Activity{Metric: GiftValueSent})
	mic := e.retro(Activity{Metric: MicSeconds})
	at := t0 + hour
	want, wantMic := map[string]int64{}, map[string]int64{}
	gift := func(u, v int64) bus.Envelope {
		at += sec
		want[fmt.Sprint(u)] += v
		return e.gift(r, u, 9, 1, v, 1, at)
	}
	pair := func(u, secs int64) []bus.Envelope {
		at += sec
		up := e.mic(r, roomevent.RoomMicUp, u, at)
		at += secs * sec
		wantMic[fmt.Sprint(u)] += secs
		return []bus.Envelope{up, e.mic(r, roomevent.RoomMicDown, u, at)}
	}
	e.publish(gift(1, 10), gift(2, 20))
	e.publish(pair(1, 60)...)
	overlap, reg := 0, prometheus.NewRegistry()
	c := e.newCatchUp("runner-1", 10, reg)
	var upAt int64
	var once sync.Once
	seamDone := make(chan struct{})
	c.afterJoining = func(id int64, liveFrom uint64) {
		first := false
		once.Do(func() { first = true })
		if !first {
			<-seamDone
			// This read back took its joining time before its hook ran,
			// maybe after the first one moved the clock on: move it on
			// again, so that its joining can end.
			e.clock.Advance(time.Second)
			return
		}
		defer close(seamDone)
		// Both read backs are joining (the other waits for this one).
		e.waitState(gifts+mic-id, CatchupJoining)
		// 1: stale live lists skip these; the read backs score them.
		e.publish(gift(1, 100), gift(3, 300))
		e.publish(pair(2, 30)...)
		e.waitLive()
		// 2: fresh lists (joining) score these first; the read backs
		// read them again.
		e.clock.Advance(time.Second)
		e.publish(gift(2, 5), gift(4, 7))
		e.publish(pair(3, 45)...)
		at += sec
		e.publish(e.event(r, roomevent.RoomUserLeft, roomevent.UserLeft{UserID: 5, Reason: "user"}, at)) // not on a mic
		at += sec
		upAt = at
		e.publish(e.mic(r, roomevent.RoomMicUp, 5, at))
		overlap = 4 // 2 gifts and 2 mic ups (a mic end found ended writes no seen row: it ends nothing)
		e.waitLive()
	}
	testenv.Start(t, c.Run)
	e.waitState(gifts, CatchupJoined)
	e.waitState(mic, CatchupJoined)
	at = upAt + 90*sec
	wantMic["5"] = 90
	e.publish(e.mic(r, roomevent.RoomMicDown, 5, at), gift(6, 1))
	e.waitLive()
	e.mustEqualScores(gifts, t0, want)
	e.mustEqualScores(mic, t0, wantMic)
	if d := testenv.MustMetric(t, reg, "voiceroom_activity_catchup_events_total", "result", "duplicate"); d < float64(overlap) || overlap == 0 {
		t.Fatalf("%v duplicates read back, want the overlap's %d at least", d, overlap)
	}
	if cu, owner := e.catchupOf(gifts); cu.LiveFromSeq == 0 || cu.Seq <= cu.LiveFromSeq || owner != "" {
		t.Fatalf("catch-up %+v owner %q: want live_from_seq set, read past it, lease given back", cu, owner)
	}
}

// TestCatchUpResumesAfterAKill: a read back stopped after 3 batches is
// resumed by another runner from its catchup_seq (nothing read twice:
// the two runners' reads add up to the app's events), with exact
// totals; two runners at once: one reads, the other waits.
func TestCatchUpResumesAfterAKill(t *testing.T) {
	e := newScoreEnv(t, nil)
	e.setClock(t0 + 6*day)
	ref := e.activity(Activity{Metric: MicSeconds})
	refGifts := e.activity(Activity{Metric: GiftValueSent})
	e.start(e.rdb)
	tr := newTraffic(e, t0, e.room("a1", 11, 1), e.room("a1", 12, 2))
	events := tr.next(300)
	e.publish(events...)
	e.waitLive()
	id := e.retro(Activity{Metric: MicSeconds})
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a := e.newCatchUp("runner-a", 20, regA)
	ctx, cancel := context.WithCancel(context.Background())
	errKilled := errors.New("killed")
	a.afterBatch = func(_ int64, n int) error {
		if n == 3 {
			cancel()
			return errKilled
		}
		return nil
	}
	if held, err := a.takeLease(ctx, id); err != nil || !held {
		t.Fatalf("lease: %v %v", held, err)
	}
	if err := a.readBack(ctx, id); !errors.Is(err, errKilled) {
		t.Fatalf("read back: %v, want killed after 3 batches", err)
	}
	cu, owner := e.catchupOf(id)
	if cu.State != CatchupReading || cu.Seq == 0 || owner != "runner-a" {
		t.Fatalf("after the kill: %+v owner %q", cu, owner)
	}
	read := func(reg *prometheus.Registry) float64 {
		var n float64
		for _, r := range []string{catchupScored, catchupDuplicate, catchupSkipped} {
			n += testenv.MustMetric(t, reg, "voiceroom_activity_catchup_events_total", "result", r)
		}
		return n
	}
	if n := read(regA); n != 60 {
		t.Fatalf("runner a read %v events, want 3 batches of 20", n)
	}
	// Runner b waits for a's lease to lapse, then resumes.
	b := e.newCatchUp("runner-b", 20, regB)
	b.afterJoining = func(int64, uint64) { e.clock.Advance(time.Second) }
	testenv.Start(t, b.Run)
	e.clock.Advance(b.cfg.Lease + time.Second)
	e.waitState(id, CatchupJoined)
	if got := read(regA) + read(regB); got != float64(len(events)) {
		t.Fatalf("runners read %v events in all, want %d (each once)", got, len(events))
	}
	e.publish(tr.next(50)...)
	e.waitLive()
	if want, got := e.allScores(ref), e.allScores(id); len(want) == 0 || !maps.Equal(want, got) {
		t.Fatalf("resumed read back scores %v, want %v", got, want)
	}

	// Two runners at once on one activity: one holds the lease and reads
	// (runner b, still running, may be the one).
	bBefore := read(regB)
	gifts := e.retro(Activity{Metric: GiftValueSent})
	regC, regD := prometheus.NewRegistry(), prometheus.NewRegistry()
	cr, dr := e.newCatchUp("runner-c", 20, regC), e.newCatchUp("runner-d", 20, regD)
	for _, x := range []*CatchUp{cr, dr} {
		x.afterJoining = func(int64, uint64) { e.clock.Advance(time.Second) }
		testenv.Start(t, x.Run)
	}
	e.waitState(gifts, CatchupJoined)
	readers := 0
	c, d, b2 := read(regC), read(regD), read(regB)-bBefore
	for _, n := range []float64{c, d, b2} {
		if n > 0 {
			readers++
		}
	}
	if readers != 1 {
		t.Fatalf("runner c read %v events, d %v, b %v: want exactly one of them reading", c, d, b2)
	}
	e.waitLive()
	if want, got := e.allScores(refGifts), e.allScores(gifts); !maps.Equal(want, got) {
		t.Fatalf("scores %v, want %v", got, want)
	}
}

// TestSettlementWaitsForTheReadBack: an ended activity still read back
// (reading or joining) does not freeze; joined, it does.
func TestSettlementWaitsForTheReadBack(t *testing.T) {
	e := newTestSettleEnv(t)
	id := e.mustActivity(Leaderboard, GiftValueSent, []Band{{FromRank: 1, ToRank: 1, Coins: 10}})
	s := e.newSettler("s1")
	e.clock.Advance(time.Hour)
	for _, st := range []CatchupState{CatchupReading, CatchupJoining, CatchupJoined} {
		if _, err := e.db.Exec(`UPDATE activities SET catchup_state = ? WHERE activity_id = ?`, st, id); err != nil {
			t.Fatal(err)
		}
		if err := s.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
		var state string
		if err := e.db.QueryRow(`SELECT settle_state FROM activities WHERE activity_id = ?`, id).Scan(&state); err != nil {
			t.Fatal(err)
		}
		if frozen := state != string(StateOpen); frozen != (st == CatchupJoined) {
			t.Fatalf("catch-up %s: settle_state %s", st, state)
		}
	}
}

// TestCatchUpKeepsToMaxRate: with MaxRate, the read back waits after
// each batch until the events it read fit the rate (here 1 event/s: the
// first batch of 20 waits until 20 s after the start); without, never.
func TestCatchUpKeepsToMaxRate(t *testing.T) {
	e := newScoreEnv(t, nil)
	e.setClock(t0 + 6*day)
	tr := newTraffic(e, t0, e.room("a1", 11, 1))
	e.publish(tr.next(40)...)
	for _, rate := range []int{0, 1} {
		id := e.retro(Activity{Metric: GiftValueSent})
		c := e.newCatchUp("runner", 20, nil)
		c.cfg.MaxRate = rate
		var waits []time.Duration
		c.pace = func(_ context.Context, d time.Duration) { waits = append(waits, d) }
		stop := errors.New("two batches")
		c.afterBatch = func(_ int64, n int) error {
			if n == 2 {
				return stop
			}
			return nil
		}
		if held, err := c.takeLease(context.Background(), id); err != nil || !held {
			t.Fatalf("lease: %v %v", held, err)
		}
		if err := c.readBack(context.Background(), id); !errors.Is(err, stop) {
			t.Fatal(err)
		}
		if rate == 0 && len(waits) != 0 {
			t.Fatalf("no rate: waited %v", waits)
		}
		if rate == 1 && (len(waits) != 2 || waits[0] < 10*time.Second || waits[1] < waits[0]) {
			t.Fatalf("1 event/s, batches of 20: waited %v, want about 20s then 40s after the start", waits)
		}
	}
}

// TestCatchUpReportsAGap: events deleted from ROOM_EVENTS (a purge, as
// retention deletes the head) while the read back is paused after 3
// batches are reported: the activity's catchup is incomplete with the
// sequences lost, the gap is counted, and every event after it is still
// scored (the scores equal the events not lost); a jump over another
// app's events alone is no gap. Twice: the head purged up to a sequence
// (the gap shows at the next batch), and purged whole (it shows at the
// stream's end, before the joining).
func TestCatchUpReportsAGap(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprint("whole=", whole), func(t *testing.T) { testCatchUpReportsAGap(t, whole) })
	}
}

func testCatchUpReportsAGap(t *testing.T, whole bool) {
	e := newScoreEnv(t, nil)
	e.setClock(t0 + 6*day)
	tr := newTraffic(e, t0, e.room("a1", 11, 1), e.room("a1", 12, 2))
	other := newTraffic(e, t0, e.room("a2", 11, 3))
	var events []bus.Envelope
	seqOf := map[string]uint64{} // a1's events' stream sequences
	for range 15 {               // a1's events among a2's: the filter jumps
		for _, env := range tr.next(20) {
			ack, err := e.pub.Publish(context.Background(), env)
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, env)
			seqOf[env.EventID] = ack.Sequence
		}
		e.publish(other.next(3)...)
	}
	id := e.retro(Activity{Metric: GiftValueSent})
	reg := prometheus.NewRegistry()
	c := e.newCatchUp("runner", 20, reg)
	c.afterJoining = func(int64, uint64) { e.clock.Advance(time.Second) }
	st := e.stream()
	var purgedTo uint64 // the stream's first sequence after the purge
	c.afterBatch = func(_ int64, n int) error {
		if n != 3 {
			return nil
		}
		cu, _ := e.catchupOf(id)
		// Past the batches read ahead (at most 2 of 20 a1 events, with
		// a2's among them).
		purgedTo = cu.Seq + 2*30 + 40
		if whole {
			info, err := st.Info(context.Background())
			if err != nil {
				return err
			}
			purgedTo = info.State.LastSeq + 1
			return st.Purge(context.Background())
		}
		return st.Purge(context.Background(), jetstream.WithPurgeSequence(purgedTo))
	}
	testenv.Start(t, c.Run)
	e.waitState(id, CatchupJoined)

	cu := e.get(id).Catchup
	if !cu.Incomplete || cu.LostFromSeq == 0 || cu.LostToSeq != purgedTo-1 || cu.LostFromSeq > cu.LostToSeq {
		t.Fatalf("catchup %+v: want incomplete, lost up to %d", cu, purgedTo-1)
	}
	if n := testenv.MustMetric(t, reg, "voiceroom_activity_catchup_gaps_total"); n != 1 {
		t.Fatalf("gaps counted %v, want 1", n)
	}
	if n := testenv.MustMetric(t, reg, "voiceroom_activity_catchup_lost_seqs_total"); n != float64(cu.LostToSeq-cu.LostFromSeq+1) {
		t.Fatalf("lost sequences counted %v, want %d", n, cu.LostToSeq-cu.LostFromSeq+1)
	}
	// The rest is scored: every a1 event outside the lost range.
	want := map[string]int64{}
	read := 0
	for _, env := range events {
		if seq := seqOf[env.EventID]; seq >= cu.LostFromSeq && seq <= cu.LostToSeq {
			continue
		}
		read++
		if env.EventType == roomevent.RoomGiftSent {
			ev, err := decodeEvent(env)
			if err != nil {
				t.Fatal(err)
			}
			want[fmt.Sprint(ev.gift.SenderUserID)] += ev.gift.Value // count 1 (traffic)
		}
	}
	if read == len(events) || read == 0 {
		t.Fatalf("%d of %d events outside the lost range", read, len(events))
	}
	e.mustEqualScores(id, t0, want)
}

// TestGapIn: the gap a batch shows against the stream's first sequence,
// including a deletion while the batch was read (the head passed a jump
// inside it), and none for jumps the head did not pass (other apps'
// events) or passed only after what follows them was delivered.
func TestGapIn(t *testing.T) {
	for _, tc := range []struct {
		name        string
		read        uint64
		seqs        []uint64
		first       uint64
		want        gap
		wantJumping bool
	}{
		{"contiguous", 10, []uint64{11, 12, 13}, 1, gap{}, false},
		{"other apps' events skipped", 10, []uint64{11, 15, 16}, 1, gap{}, true},
		{"deleted before the batch", 10, []uint64{20, 21}, 20, gap{11, 19}, true},
		{"head past the batch's first: what was delivered is not lost", 10, []uint64{20, 25}, 30, gap{11, 19}, true},
		{"deleted while the batch was read", 10, []uint64{11, 12, 40, 41}, 40, gap{13, 39}, true},
		{"head inside the jump after the batch's first jump", 10, []uint64{13, 14, 40}, 35, gap{11, 34}, true},
		{"head passed a jump only after its end was delivered", 10, []uint64{11, 15, 16}, 17, gap{}, true},
		{"the stream's end", 10, nil, 15, gap{11, 14}, true},
		{"the stream's end, nothing deleted", 10, nil, 5, gap{}, true},
		{"read from a start time", 0, []uint64{50}, 40, gap{}, true},
	} {
		if got := gapIn(tc.read, tc.seqs, tc.first); got != tc.want {
			t.Errorf("%s: gap %+v, want %+v", tc.name, got, tc.want)
		}
		if got := jumps(tc.read, tc.seqs); got != tc.wantJumping {
			t.Errorf("%s: jumps %v, want %v", tc.name, got, tc.wantJumping)
		}
	}
}
