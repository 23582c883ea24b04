package roomlist_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/internal/redisconn"
	"voiceroom/internal/testenv"
	"voiceroom/listprojector"
	"voiceroom/roomlist"
)

// countReads counts the MGET commands (card reads) a client sends.
type countReads struct{ mgets atomic.Int64 }

func (c *countReads) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *countReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "mget" {
			c.mgets.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *countReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if cmd.Name() == "mget" {
				c.mgets.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// nearSetup is the read model with the rooms r1 ("one") and r2
// ("other") of a1 in region 1, in MySQL and Redis, and one api process
// whose list reads Redis through a counting client, with a near cache that
// only invalidations can empty (its max age is an hour).
func nearSetup(t *testing.T) (*fixture, hideProc, *countReads, roomlist.Config) {
	t.Helper()
	s := newFixture(t)
	for i, id := range []string{"r1", "r2"} { // the rooms rows hides check
		if _, err := s.db.Exec(`INSERT INTO rooms (app_code, room_id, room_short_id, owner_user_id, status, visible_region_id,
			mode, room_version, created_at_ms, updated_at_ms) VALUES ('a1', ?, ?, ?, 'active', 1, 'voice', 1, 1, 1)`,
			id, fmt.Sprintf("s%d", i), 7000+i); err != nil {
			t.Fatal(err)
		}
		setTitle(t, s, id, []string{"one", "other"}[i], 1)
	}
	refill(t, s.db, s.rdb, s.prefix, nil)
	counted := testenv.RedisClient(t)
	t.Cleanup(func() { counted.Close() })
	reads := &countReads{}
	counted.AddHook(reads)
	cfg := s.cfg
	cfg.NearCacheMaxAge = time.Hour
	return s, newHideProc(t, s, counted, cfg), reads, cfg
}

// setTitle writes a1's room r in MySQL, titled title at version, as the
// projector would; refill mirrors it to Redis.
func setTitle(t *testing.T, s *fixture, r, title string, version int64) {
	t.Helper()
	if _, err := s.db.Exec(`INSERT INTO room_list_entries (app_code, room_id, room_short_id, im_group_id, visible_region_id,
		owner_user_id, host_user_id, title, mode, status, room_version, created_at_ms, updated_at_ms, seat_count)
		VALUES ('a1', ?, ?, ?, 1, 7, 7, ?, 'voice', 'active', ?, 1, 1, 10)
		ON DUPLICATE KEY UPDATE title = VALUES(title), room_version = VALUES(room_version)`,
		r, "short_"+r, r, title, version); err != nil {
		t.Fatal(err)
	}
}

// titles lists region 1 of a1 through l: room id -> title.
func titles(t *testing.T, l *roomlist.Lister) map[string]string {
	t.Helper()
	p, err := l.List(context.Background(), roomlist.ListRequest{AppCode: "a1", RegionID: 1, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, it := range p.Rooms {
		out[it.RoomID] = it.Title
	}
	return out
}

// TestNearCacheServesRepeatsFromMemory: once a page's cards and hides were
// read, the same page is served again without reading Redis, until a
// write changes a card: then the new card shows (its invalidation, not the
// hour-long max age, dropped the old one) and is kept again.
func TestNearCacheServesRepeatsFromMemory(t *testing.T) {
	s, p, reads, _ := nearSetup(t)
	eventuallyFilled(t, p.lister, s.rdb, s.prefix, "a1", 1) // hide set filled in Redis
	titles(t, p.lister)                                     // and read into the near cache
	before, nearBefore := reads.mgets.Load(), testenv.MetricValue(t, p.reg, "voiceroom_list_cache_requests_total", "result", "near")
	for range 20 {
		if got := titles(t, p.lister); got["r1"] != "one" || got["r2"] != "other" {
			t.Fatalf("page: %v", got)
		}
	}
	if n := reads.mgets.Load() - before; n != 0 {
		t.Fatalf("%d card reads from Redis for 20 repeated pages, want 0", n)
	}
	if n := testenv.MetricValue(t, p.reg, "voiceroom_list_cache_requests_total", "result", "near") - nearBefore; n != 20 {
		t.Fatalf("near hits %v, want 20", n)
	}

	setTitle(t, s, "r1", "two", 2)
	refill(t, s.db, s.rdb, s.prefix, nil) // rewrites the cards: Redis invalidates them
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := titles(t, p.lister); got["r1"] != "two" || got["r2"] != "other" {
			return fmt.Errorf("page: %v", got)
		}
		return nil
	})
	before = reads.mgets.Load()
	for range 5 {
		if got := titles(t, p.lister); got["r1"] != "two" {
			t.Fatalf("page: %v", got)
		}
	}
	if n := reads.mgets.Load() - before; n != 0 {
		t.Fatalf("%d card reads after the new card was read, want 0", n)
	}
}

// TestNearCacheHides: a hide made in a process shows in its very next
// list request; another process that had the region's hide set in its
// near cache drops it when Redis's invalidation arrives; an unhide brings
// the room back in both.
func TestNearCacheHides(t *testing.T) {
	s, writer, _, cfg := nearSetup(t)
	reader := newHideProc(t, s, s.rdb, cfg)
	for _, p := range []hideProc{writer, reader} {
		eventuallyFilled(t, p.lister, s.rdb, s.prefix, "a1", 1)
		if got := titles(t, p.lister); got["r1"] != "one" {
			t.Fatalf("before the hide: %v", got)
		}
	}
	ctx := context.Background()
	h, err := writer.hides.Create(ctx, "a1", "op", roomlist.NewHide{RoomID: "r1", VisibleRegionID: 1, Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got := titles(t, writer.lister); got["r1"] != "" || got["r2"] != "other" {
		t.Fatalf("the writer's next page after the hide: %v", got)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := titles(t, reader.lister); got["r1"] != "" || got["r2"] != "other" {
			return fmt.Errorf("the reader's page after the hide: %v", got)
		}
		return nil
	})
	if _, err := writer.hides.Delete(ctx, "a1", "op", h.HideID, "done"); err != nil {
		t.Fatal(err)
	}
	if got := titles(t, writer.lister); got["r1"] != "one" {
		t.Fatalf("the writer's next page after the unhide: %v", got)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := titles(t, reader.lister); got["r1"] != "one" {
			return fmt.Errorf("the reader's page after the unhide: %v", got)
		}
		return nil
	})
}

// TestNearCacheFlushesWhenTrackingDrops: when the tracking connection (to
// the server, or to the master of the card on a cluster) dies, the
// invalidations Redis would have sent it are lost, so the near cache drops
// everything; a card written meanwhile shows, and the cache comes back on
// a new tracking connection.
func TestNearCacheFlushesWhenTrackingDrops(t *testing.T) {
	s, p, _, _ := nearSetup(t)
	if got := titles(t, p.lister); got["r1"] != "one" {
		t.Fatalf("before: %v", got)
	}
	ctx := context.Background()
	key := listprojector.Keys{Prefix: s.prefix}.Card("a1", "r1")
	addr, old := killTracking(t, s.rdb, p.lister, key)
	// Straight into Redis while no tracking connection listens: no
	// invalidation reaches the process for this write.
	raw, err := s.rdb.Get(ctx, key).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	c["title"] = "written while untracked"
	raw, _ = json.Marshal(c)
	if err := s.rdb.Set(ctx, key, raw, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := titles(t, p.lister); got["r1"] != "written while untracked" {
			return fmt.Errorf("page: %v", got)
		}
		if !roomlist.NearCacheUp(p.lister) || roomlist.NearCacheConnIDs(p.lister)[addr] == old {
			return fmt.Errorf("tracking not back on a new connection")
		}
		return nil
	})
}

// killTracking kills l's tracking connection to the server that holds key
// (its master on a cluster) and returns the server's address and the
// connection's id.
func killTracking(t *testing.T, rdb redis.UniversalClient, l *roomlist.Lister, key string) (string, int64) {
	t.Helper()
	ctx := context.Background()
	ids := roomlist.NearCacheConnIDs(l)
	var server interface {
		Do(context.Context, ...any) *redis.Cmd
	} = rdb
	addr := ""
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		server, addr = m, m.Options().Addr
	} else {
		for a := range ids {
			addr = a
		}
	}
	id, ok := ids[addr]
	if !ok {
		t.Fatalf("no tracking connection to %s: %v", addr, ids)
	}
	if err := server.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err != nil {
		t.Fatal(err)
	}
	return addr, id
}

// TestNearCacheOffReadsRedis: with the near cache off, every page reads
// its cards from Redis (hits), none from MySQL for lack of a near cache.
func TestNearCacheOffReadsRedis(t *testing.T) {
	s, _, _, cfg := nearSetup(t)
	cfg.NearCacheCards = -1
	counted := testenv.RedisClient(t)
	t.Cleanup(func() { counted.Close() })
	reads := &countReads{}
	counted.AddHook(reads)
	p := newHideProc(t, s, counted, cfg)
	eventuallyFilled(t, p.lister, s.rdb, s.prefix, "a1", 1)
	titles(t, p.lister)
	before, missBefore := reads.mgets.Load(), testenv.MetricValue(t, p.reg, "voiceroom_list_cache_requests_total", "result", "miss")
	for range 5 {
		if got := titles(t, p.lister); got["r1"] != "one" || got["r2"] != "other" {
			t.Fatalf("page: %v", got)
		}
	}
	// A page's cards are one MGET, or on a cluster one per hash slot.
	perPage := int64(1)
	if redisconn.IsCluster(s.rdb) {
		keys := listprojector.Keys{Prefix: s.prefix}
		perPage = int64(len(map[int]bool{redisconn.Slot(keys.Card("a1", "r1")): true, redisconn.Slot(keys.Card("a1", "r2")): true}))
	}
	if n := reads.mgets.Load() - before; n != 5*perPage {
		t.Fatalf("%d card reads (MGET) from Redis for 5 pages, want %d", n, 5*perPage)
	}
	if n := testenv.MustMetric(t, p.reg, "voiceroom_list_cache_requests_total", "result", "miss") - missBefore; n != 0 {
		t.Fatalf("%v misses, want 0", n)
	}
}
