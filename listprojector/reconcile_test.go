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
	clk := newClock()
	cfg := listprojector.Config{KeyPrefix: prefix, Now: clk.now}
	ctx := context.Background()
	ids := seedRooms(t, db, "a1", 1, 0, 3, func(i int) int64 { return 0 })
	// Created now, no heat: the score is the first boost step.
	if _, err := db.Exec(`UPDATE room_list_entries SET created_at_ms = ?, heat = 1, sort_score = 1000 + 5000`, clk.nowMs()); err != nil {
		t.Fatal(err)
	}
	r, err := listprojector.NewReconciler(db, rdb, cfg, testenv.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	hot := prefix + "room:list:{a1}:1:hot"
	if n, err := rdb.ZCard(ctx, hot).Result(); err != nil || n != 3 {
		t.Fatalf("hot set holds %d rooms (%v)", n, err)
	}
	// A close Redis never heard of, and 20 minutes of age.
	if _, err := db.Exec(`UPDATE room_list_entries SET status = 'closed' WHERE room_id = ?`, ids[0]); err != nil {
		t.Fatal(err)
	}
	clk.add(20 * time.Minute)
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
	clk.add(3 * time.Hour)
	if err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT sort_score FROM room_list_entries WHERE room_id = ?`, ids[2]).Scan(&score); err != nil || score != 1000 {
		t.Errorf("mysql score %d %v, want 1000 (no boost)", score, err)
	}
}
