package listprojector_test

import (
	"context"
	"testing"
	"time"

	"voiceroom/internal/testenv"
	"voiceroom/listprojector"
)

// TestReconcileRepairsRedisAndBoosts: a pass drops from Redis what MySQL
// no longer lists, and steps freshness boosts down as rooms age.
func TestReconcileRepairsRedisAndBoosts(t *testing.T) {
	db := testenv.NewDB(t)
	rdb, prefix := testenv.NewRedis(t)
	clk := testenv.NewClock(time.Time{})
	cfg := listprojector.Config{KeyPrefix: prefix, Now: clk.Now}
	ctx := context.Background()
	// Created now, heat 1: the score is the first boost step.
	ids := []string{"r0", "r1", "r2"}
	var cards []*listprojector.Card
	for _, id := range ids {
		c := &listprojector.Card{AppCode: "a1", Card: card(id, 1, 1, "room "+id, 0), SortScore: 1000 + 5000}
		c.Heat, c.CreatedAtMs = 1, clk.Now().UnixMilli()
		cards = append(cards, c)
	}
	if err := listprojector.UpsertCards(ctx, db, cards); err != nil {
		t.Fatal(err)
	}
	r, err := listprojector.NewReconciler(db, rdb, cfg, testenv.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	hot := listprojector.Keys{Prefix: prefix}.List("a1", 1, listprojector.TabHot)
	if n, err := rdb.ZCard(ctx, hot).Result(); err != nil || n != 3 {
		t.Fatalf("hot set holds %d rooms (%v)", n, err)
	}
	// A close Redis never heard of, and 20 minutes of age.
	if _, err := db.Exec(`UPDATE room_list_entries SET status = 'closed' WHERE room_id = ?`, ids[0]); err != nil {
		t.Fatal(err)
	}
	clk.Advance(20 * time.Minute)
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.ZCard(ctx, hot).Result(); err != nil || n != 2 {
		t.Errorf("hot set holds %d rooms after the close (%v)", n, err)
	}
	if score, err := rdb.ZScore(ctx, hot, ids[1]).Result(); err != nil || score != 1000+2000 {
		t.Errorf("redis score %v %v, want 3000", score, err)
	}
	var score int64
	if err := db.QueryRow(`SELECT sort_score FROM room_list_entries WHERE room_id = ?`, ids[2]).Scan(&score); err != nil || score != 3000 {
		t.Errorf("mysql score %d %v, want 3000", score, err)
	}
	clk.Advance(3 * time.Hour)
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT sort_score FROM room_list_entries WHERE room_id = ?`, ids[2]).Scan(&score); err != nil || score != 1000 {
		t.Errorf("mysql score %d %v, want 1000 (no boost)", score, err)
	}
}
