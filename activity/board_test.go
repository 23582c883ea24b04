package activity

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
)

// boardOf reads a whole board through b, page by page (limit each),
// following next cursors, and checks that each page's prev cursor leads
// back to the page before.
func boardOf(tb testing.TB, b *Boards, q BoardQuery) []BoardItem {
	tb.Helper()
	var all []BoardItem
	var pages []Board
	for {
		p, err := b.Board(context.Background(), q)
		if err != nil {
			tb.Fatalf("board %+v: %v", q, err)
		}
		pages = append(pages, p)
		all = append(all, p.Items...)
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
		if len(pages) > 1000 {
			tb.Fatal("no end of the board")
		}
	}
	for i := len(pages) - 1; i > 0; i-- {
		if pages[i].PrevCursor == "" {
			tb.Fatalf("page %d has no prev cursor", i)
		}
		q.Cursor = pages[i].PrevCursor
		back, err := b.Board(context.Background(), q)
		if err != nil {
			tb.Fatal(err)
		}
		if !reflect.DeepEqual(back.Items, pages[i-1].Items) {
			tb.Fatalf("back from page %d: %+v, want %+v", i, back.Items, pages[i-1].Items)
		}
	}
	if pages[0].PrevCursor != "" {
		tb.Fatalf("first page has a prev cursor")
	}
	return all
}

// TestBoardTiesAndPaging: equal scores go to whoever reached the score
// first (by occurred_at_ms, a late event included); only an increase
// moves the time; Redis and MySQL answer the same order, pages and
// places; cursors page both ways, consistent with the full listing;
// around=me lists the entries just above and below.
func TestBoardTiesAndPaging(t *testing.T) {
	e := newScoreEnv(t, nil)
	id := e.activity(Activity{Metric: GiftValueSent})
	s := e.newScorer(e.rdb)
	r := e.room("a1", 0, 1)
	// 30 users: user u sends (u % 7 + 1) * 10 coins at t0 + (100 - u) s,
	// so that many tie; users 40, 41, 42 tie at 50 with other times.
	for u := int64(1); u <= 30; u++ {
		e.mustScore(s, e.gift(r, u, 99, 1, (u%7+1)*10, 1, t0+(100-u)*sec))
	}
	e.mustScore(s,
		e.gift(r, 40, 99, 1, 20, 1, t0+500*sec), e.gift(r, 40, 99, 1, 30, 1, t0+600*sec), // 50 reached at 600s
		e.gift(r, 41, 99, 1, 50, 1, t0+550*sec), // 50 at 550s: ahead of 40
		e.gift(r, 42, 99, 1, 50, 1, t0+700*sec), // 50 at 700s
		e.gift(r, 42, 99, 1, 0, 1, t0+10*sec),   // a free gift: no increase, no move
		e.gift(r, 41, 99, 1, 0, 1, t0+900*sec),
		// The same score at the same millisecond: the smaller subject,
		// bytewise ("61" before "7000"), as settlement orders its board.
		e.gift(r, 7000, 99, 1, 45, 1, t0+800*sec), e.gift(r, 61, 99, 1, 45, 1, t0+800*sec),
	)
	// The expected order: from MySQL rows, sorted by compareEntries.
	rows, err := e.db.Query(`SELECT subject, score, reached_at_ms FROM activity_scores WHERE activity_id = ?`, id)
	if err != nil {
		t.Fatal(err)
	}
	var entries []Entry
	for rows.Next() {
		var x Entry
		if err := rows.Scan(&x.Subject, &x.Score, &x.ReachedAtMs); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, x)
	}
	rows.Close()
	slices.SortFunc(entries, compareEntries)
	var want []BoardItem
	rank := map[int64]int{}
	for i, x := range entries {
		var u int64
		fmt.Sscan(x.Subject, &u)
		want = append(want, BoardItem{Rank: i + 1, UserID: u, Score: x.Score})
		rank[u] = i + 1
	}
	if !(rank[41] < rank[40] && rank[40] < rank[42]) {
		t.Fatalf("ties at 50: ranks 41=%d 40=%d 42=%d, want 41 before 40 before 42", rank[41], rank[40], rank[42])
	}
	if rank[61] != rank[7000]-1 {
		t.Fatalf("same score, same time: ranks 61=%d 7000=%d, want 61 just before 7000", rank[61], rank[7000])
	}
	// Among the users at 80 coins (u%7 == 6: 6, 13, 20, 27), the later
	// user id sent earlier: 27 first.
	if !(rank[27] < rank[20] && rank[20] < rank[13] && rank[13] < rank[6]) {
		t.Fatalf("ties at 80: %v", rank)
	}
	redisBoards, mysqlBoards := e.boards(e.rdb), e.boards(nil)
	for _, limit := range []int{1, 4, 7, 100} {
		for name, b := range map[string]*Boards{"redis": redisBoards, "mysql": mysqlBoards} {
			got := boardOf(t, b, BoardQuery{AppCode: "a1", UserID: 13, ActivityID: id, Limit: limit})
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, limit %d:\n%+v\nwant\n%+v", name, limit, got, want)
			}
		}
	}
	if e.reads(sourceRedis) == 0 {
		t.Fatal("no read answered from Redis")
	}
	for _, u := range []int64{13, 41, 1, 30} {
		var answers []Board
		for _, b := range []*Boards{redisBoards, mysqlBoards} {
			p, err := b.Board(context.Background(), BoardQuery{AppCode: "a1", UserID: u, ActivityID: id, Limit: 5, Around: true})
			if err != nil {
				t.Fatal(err)
			}
			if p.Me == nil || p.Me.Rank != rank[u] {
				t.Fatalf("user %d: me %+v, want rank %d", u, p.Me, rank[u])
			}
			start := max(0, rank[u]-1-2)
			if !reflect.DeepEqual(p.Items, want[start:min(start+5, len(want))]) {
				t.Fatalf("around %d: %+v, want %+v", u, p.Items, want[start:min(start+5, len(want))])
			}
			answers = append(answers, p)
		}
		if !reflect.DeepEqual(answers[0], answers[1]) {
			t.Fatalf("around %d: redis %+v, mysql %+v", u, answers[0], answers[1])
		}
	}
	// A cursor whose entry moved since: the next page starts where the
	// entry sat, still consistent.
	p, err := redisBoards.Board(context.Background(), BoardQuery{AppCode: "a1", UserID: 13, ActivityID: id, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	third := p.Items[2].UserID
	e.mustScore(s, e.gift(r, third, 99, 1, 1000, 1, t0+1000*sec))
	for name, b := range map[string]*Boards{"redis": redisBoards, "mysql": mysqlBoards} {
		next, err := b.Board(context.Background(), BoardQuery{AppCode: "a1", UserID: 13, ActivityID: id, Limit: 3, Cursor: p.NextCursor})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(next.Items, want[3:6]) {
			t.Fatalf("%s: after a moved entry: %+v, want %+v", name, next.Items, want[3:6])
		}
	}
	// Bad input names its field.
	for _, q := range []BoardQuery{
		{Limit: 0}, {Limit: 101}, {Limit: 5, Cursor: "x"}, {Limit: 5, Cursor: p.NextCursor, Around: true},
	} {
		q.AppCode, q.UserID, q.ActivityID = "a1", 1, id
		if _, err := redisBoards.Board(context.Background(), q); apperr.CodeOf(err) != apperr.InvalidArgument || apperr.FieldOf(err) == "" {
			t.Fatalf("%+v: %v, want INVALID_ARGUMENT naming a field", q, err)
		}
	}
}

// TestBoardRedisDown: with Redis stopped, boards come from MySQL and
// answer what Redis answered; when Redis is back (empty), the board is
// rebuilt from MySQL.
func TestBoardRedisDown(t *testing.T) {
	e := newScoreEnv(t, nil)
	id := e.activity(Activity{Metric: RoomGiftValue})
	red := testenv.RunRedis(t)
	rdb := red.Client()
	s := e.newScorer(rdb)
	rooms := []room{e.room("a1", 0, 1), e.room("a1", 0, 2), e.room("a1", 0, 3)}
	for i, r := range rooms {
		e.mustScore(s, e.gift(r, 5, 6, 1, int64(10*(i+1)), 1, t0+hour))
	}
	b := e.boards(rdb)
	q := BoardQuery{AppCode: "a1", UserID: 5, ActivityID: id, Limit: 10, RoomID: rooms[0].id}
	up, err := b.Board(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(up.Items) != 3 || up.Items[0].RoomID != rooms[2].id || up.Me == nil || up.Me.Rank != 3 || up.Me.Score != 10 {
		t.Fatalf("board %+v", up)
	}
	fromRedis := e.reads(sourceRedis)
	red.Stop()
	down, err := b.Board(context.Background(), q)
	if err != nil {
		t.Fatalf("with redis down: %v", err)
	}
	if !reflect.DeepEqual(down, up) {
		t.Fatalf("redis down: %+v, want %+v", down, up)
	}
	if e.reads(sourceMySQL) == 0 || e.reads(sourceRedis) != fromRedis {
		t.Fatal("the read with Redis down did not come from MySQL")
	}
	red.Start() // empty: the board is rebuilt on a read
	testenv.Eventually(t, 10*time.Second, func() error {
		before := e.reads(sourceRedis)
		again, err := b.Board(context.Background(), q)
		if err != nil {
			return err
		}
		if e.reads(sourceRedis) == before {
			return fmt.Errorf("not from redis yet")
		}
		if !reflect.DeepEqual(again, up) {
			return fmt.Errorf("rebuilt %+v, want %+v", again, up)
		}
		return nil
	})
}

// TestBoardIsolation: an activity of another app, or of regions the
// caller is not in, is not found; a region's user sees it.
func TestBoardIsolation(t *testing.T) {
	e := newScoreEnv(t, nil)
	sea := e.region("a1", "SEA", "SG")
	e.region("a1", "MENA", "SA")
	id := e.activity(Activity{Metric: GiftValueSent, RegionIDs: []int64{sea}})
	task := e.activity(Activity{Kind: Task, Metric: GiftCount, Period: Window, Target: 1, RegionIDs: []int64{sea}})
	e.user("a1", 1, "SG")
	e.user("a1", 2, "SA")
	b := e.boards(e.rdb)
	ctx := context.Background()
	if _, err := b.Board(ctx, BoardQuery{AppCode: "a1", UserID: 1, ActivityID: id, Limit: 5}); err != nil {
		t.Fatalf("a user of the region: %v", err)
	}
	if _, err := b.Progress(ctx, ProgressQuery{AppCode: "a1", UserID: 1, ActivityID: task}); err != nil {
		t.Fatalf("a user of the region: %v", err)
	}
	for _, q := range []BoardQuery{
		{AppCode: "a1", UserID: 2, ActivityID: id},  // another region
		{AppCode: "a1", UserID: 3, ActivityID: id},  // no profile
		{AppCode: "a2", UserID: 1, ActivityID: id},  // another app
		{AppCode: "a1", UserID: 1, ActivityID: 999}, // none
	} {
		q.Limit = 5
		if _, err := b.Board(ctx, q); apperr.CodeOf(err) != apperr.NotFound {
			t.Errorf("board %+v: %v, want NOT_FOUND", q, err)
		}
		pid := task
		if q.ActivityID != id {
			pid = q.ActivityID
		}
		if _, err := b.Progress(ctx, ProgressQuery{AppCode: q.AppCode, UserID: q.UserID, ActivityID: pid}); apperr.CodeOf(err) != apperr.NotFound {
			t.Errorf("progress %+v: %v, want NOT_FOUND", q, err)
		}
	}
	if _, err := b.Progress(ctx, ProgressQuery{AppCode: "a1", UserID: 1, ActivityID: id}); apperr.FieldOf(err) != "activity_id" {
		t.Errorf("progress of a leaderboard: %v, want INVALID_ARGUMENT naming activity_id", err)
	}
}

// TestBoardSetReads: with Redis down, a board page reads MySQL through
// the pool SetReads gave (standing in for a replica: here another
// database, where the board's scores are not).
func TestBoardSetReads(t *testing.T) {
	e := newScoreEnv(t, nil)
	id := e.activity(Activity{Metric: RoomGiftValue})
	red := testenv.RunRedis(t)
	rdb := red.Client()
	s := e.newScorer(rdb)
	r := e.room("a1", 0, 1)
	e.mustScore(s, e.gift(r, 5, 6, 1, 10, 1, t0+hour))
	b := e.boards(rdb)
	q := BoardQuery{AppCode: "a1", UserID: 5, ActivityID: id, Limit: 10, RoomID: r.id}
	red.Stop()
	if p, err := b.Board(context.Background(), q); err != nil || len(p.Items) != 1 {
		t.Fatalf("from the primary: %+v, %v", p, err)
	}
	b.SetReads(testenv.NewDB(t))
	if p, err := b.Board(context.Background(), q); err != nil || len(p.Items) != 0 {
		t.Fatalf("through SetReads: %+v, %v: want the other database's empty board", p, err)
	}
}
