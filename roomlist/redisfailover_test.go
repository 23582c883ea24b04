package roomlist_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"voiceroom/internal/testenv"
	"voiceroom/listprojector"
	"voiceroom/roomlist"
)

// failoverFixture is the list of 60 rooms of a1 in region 1, over rdb, with
// its metrics, and the full list walked once (from Redis: the test checks
// that pages were Redis hits).
type failoverFixture struct {
	db     *sql.DB
	lister *roomlist.Lister
	reg    *prometheus.Registry
	req    roomlist.ListRequest
	want   []roomlist.Item
}

func newFailoverFixture(t *testing.T, rdb redis.UniversalClient, prefix string, cfg roomlist.Config) *failoverFixture {
	t.Helper()
	db := testenv.NewDB(t)
	seedRooms(t, db, "a1", 1, 0, 60, func(i int) int64 { return int64(1000 - i) })
	refill(t, db, rdb, prefix, nil)
	f := &failoverFixture{db: db, reg: prometheus.NewRegistry(), req: roomlist.ListRequest{AppCode: "a1", RegionID: 1, Limit: 20}}
	m, err := roomlist.NewMetrics(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	f.lister = newTestLister(t, db, rdb, prefix, cfg, m)
	f.want = walkLister(t, f.lister, f.req, nil)
	if len(f.want) != 60 {
		t.Fatalf("%d rooms listed, want 60", len(f.want))
	}
	if f.fromRedis(t) == 0 {
		t.Fatal("no page was read from Redis before the failover")
	}
	return f
}

// fromRedis is how many reads Redis served: hits and near-cache hits.
func (f *failoverFixture) fromRedis(t *testing.T) float64 {
	return f.reads(t, "hit") + f.reads(t, "near")
}

// walkSame walks the list and fails unless it is the list before.
func (f *failoverFixture) walkSame(t *testing.T, when string) {
	t.Helper()
	if got := walkLister(t, f.lister, f.req, nil); fmt.Sprint(got) != fmt.Sprint(f.want) {
		t.Fatalf("%s: %v\nwant %v", when, roomIDs(got), roomIDs(f.want))
	}
}

// servedFromRedisAgain waits until a walk of the list is the list before
// and Redis served some of it.
func (f *failoverFixture) servedFromRedisAgain(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, func() error {
		before := f.fromRedis(t)
		f.walkSame(t, "after the failover")
		if f.fromRedis(t) == before {
			return errors.New("the list is not read from Redis yet")
		}
		return nil
	})
}

// TestListThroughClusterFailover: on a Redis Cluster of three masters (a
// replica each), the list is read from Redis; the master of the region's
// slot is stopped, and every page stays the same (read from MySQL while
// the slot has no master), until the replica, promoted, serves it again.
func TestListThroughClusterFailover(t *testing.T) {
	rc := testenv.RunRedisCluster(t, 3)
	rdb := rc.Client()
	prefix := testenv.RandomPrefix()
	f := newFailoverFixture(t, rdb, prefix, roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond})

	master := rc.MasterOf(listprojector.Keys{Prefix: prefix}.List("a1", 1, listprojector.TabHot))
	master.Stop()
	t.Log("stopped the master of the region's slot")
	f.walkSame(t, "with the region's master stopped")
	t.Log("walked the list with the master stopped")
	testenv.Eventually(t, 60*time.Second, func() error {
		if m := rc.MasterOf(listprojector.Keys{Prefix: prefix}.List("a1", 1, listprojector.TabHot)); m == master {
			return errors.New("the stopped master still serves the slot")
		}
		return nil
	})
	t.Log("the replica serves the slot")
	f.servedFromRedisAgain(t)
}

// newSentinelFixture is the failover fixture over a Sentinel setup of the
// test's own, read through a client that follows its master.
func newSentinelFixture(t *testing.T) (*testenv.RedisSentinelSetup, redis.UniversalClient, string, *failoverFixture) {
	t.Helper()
	s := testenv.RunRedisSentinel(t)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.Master, SentinelAddrs: []string{s.Sentinel.Addr},
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second})
	testenv.CheckSlots(t, rdb)
	t.Cleanup(func() { rdb.Close() })
	prefix := testenv.RandomPrefix()
	return s, rdb, prefix, newFailoverFixture(t, rdb, prefix, roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond})
}

// TestListThroughSentinelFailover: with Redis behind Sentinel (a master,
// a replica, one sentinel), the list and its near cache read the master;
// the master is stopped while pages are read, every page stays the same,
// and once Sentinel promoted the replica the list reads Redis again, and
// a change written then shows at the next page.
func TestListThroughSentinelFailover(t *testing.T) {
	s, rdb, prefix, f := newSentinelFixture(t)
	if !roomlist.NearCacheOn(f.lister) {
		t.Fatal("the near cache is off behind Sentinel")
	}

	old := s.MasterAddr()
	stopped := make(chan struct{})
	go func() { s.Node(old).Stop(); close(stopped) }()
	f.walkSame(t, "while the master stops")
	<-stopped
	f.walkSame(t, "with the master stopped")
	testenv.Eventually(t, 60*time.Second, func() error {
		if a := s.MasterAddr(); a == old || a == "" {
			return fmt.Errorf("sentinel's master is still %q", a)
		}
		return nil
	})
	f.servedFromRedisAgain(t)
	testenv.Eventually(t, 30*time.Second, func() error {
		if !roomlist.NearCacheUp(f.lister) {
			return errors.New("the near cache is not up on the new master")
		}
		return nil
	})
	// A card rewritten on the new master shows at the next page: the near
	// cache tracks the new master.
	f.nearFollowsFailover(t, rdb, listprojector.Keys{Prefix: prefix}.Card("a1", f.want[0].RoomID))
}

// TestNearCacheThroughSentinelSwitchover: Sentinel moves the master to
// the replica while the old master stays up (SENTINEL FAILOVER, as for
// maintenance); the tracking connection moves to the new master (none is
// left on the old one, which would report the writes only as they
// replicate), and a card written there shows at once.
func TestNearCacheThroughSentinelSwitchover(t *testing.T) {
	s, rdb, prefix, f := newSentinelFixture(t)

	old := s.MasterAddr()
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel.Addr})
	t.Cleanup(func() { sc.Close() })
	if err := sc.Failover(t.Context(), s.Master).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, func() error {
		if a := s.MasterAddr(); a == old || a == "" {
			return fmt.Errorf("sentinel's master is still %q", a)
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := nearClients(t, s.Node(old)); n != 0 {
			return fmt.Errorf("%d tracking connections left on the old master", n)
		}
		if n := nearClients(t, s.Node(s.MasterAddr())); n != 1 {
			return fmt.Errorf("%d tracking connections on the new master, want 1", n)
		}
		return nil
	})
	f.nearFollowsFailover(t, rdb, listprojector.Keys{Prefix: prefix}.Card("a1", f.want[0].RoomID))
}

// nearClients counts the near cache's tracking connections on node.
func nearClients(t *testing.T, node *testenv.RedisNode) int {
	t.Helper()
	list, err := node.Client().ClientList(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, "name=voiceroom-list-near ")
}

// TestNearCacheOnCluster: on a Redis Cluster the near cache tracks every
// master (a connection each), serves repeated pages from memory, and a
// card rewritten on any master shows at the very next page: the barrier
// waits for every master's invalidations. (Tracked on one master only,
// the cards of the others would be served stale.)
func TestNearCacheOnCluster(t *testing.T) {
	rdb := testenv.NewRedisCluster(t)
	prefix := testenv.RandomPrefix()
	t.Cleanup(func() { testenv.DeleteRedisKeys(t, rdb, prefix) })
	f := newFailoverFixture(t, rdb, prefix, roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond})
	var nMasters atomic.Int64
	if err := rdb.ForEachMaster(t.Context(), func(context.Context, *redis.Client) error { nMasters.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	if ids, masters := roomlist.NearCacheConnIDs(f.lister), int(nMasters.Load()); len(ids) != masters || masters < 3 {
		t.Fatalf("tracking connections %v, want one per master of %d", ids, masters)
	}
	f.walkServedBy(t, "near") // pages from the near cache

	if _, err := f.db.Exec(`UPDATE room_list_entries SET title = CONCAT('renamed ', room_id) WHERE app_code = 'a1'`); err != nil {
		t.Fatal(err)
	}
	refill(t, f.db, rdb, prefix, nil) // every card rewritten, on its own master
	for _, it := range walkLister(t, f.lister, f.req, nil) {
		if it.Title != "renamed "+it.RoomID {
			t.Errorf("room %s served as %q after its card was rewritten", it.RoomID, it.Title)
		}
	}
}

// TestCardsFromEveryMasterOfCluster: without the near cache, the list
// reads its cards from the masters by one MGET per slot, all found.
func TestCardsFromEveryMasterOfCluster(t *testing.T) {
	rdb := testenv.NewRedisCluster(t)
	prefix := testenv.RandomPrefix()
	t.Cleanup(func() { testenv.DeleteRedisKeys(t, rdb, prefix) })
	f := newFailoverFixture(t, rdb, prefix, roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond,
		NearCacheCards: noNearCache})
	f.walkServedBy(t, "hit") // pages read from Redis
}

// TestNearCacheThroughClusterFailover: the master of a room's card is
// stopped and its replica promoted; the near cache tracks the new master
// (and no longer the stopped one), a card written there after the
// failover is never served stale, and pages come from memory again.
func TestNearCacheThroughClusterFailover(t *testing.T) {
	rc := testenv.RunRedisCluster(t, 3)
	rdb := rc.Client()
	prefix := testenv.RandomPrefix()
	f := newFailoverFixture(t, rdb, prefix, roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond})
	key := listprojector.Keys{Prefix: prefix}.Card("a1", f.want[0].RoomID)
	master := rc.MasterOf(key)
	if _, ok := roomlist.NearCacheConnIDs(f.lister)[master.Addr]; !ok {
		t.Fatalf("no tracking connection to the card's master %s: %v", master.Addr, roomlist.NearCacheConnIDs(f.lister))
	}
	master.Stop()
	testenv.Eventually(t, 60*time.Second, func() error {
		if m := rc.MasterOf(key); m == master {
			return errors.New("the stopped master still serves the card's slot")
		}
		return nil
	})
	t.Log("the replica serves the card's slot")
	f.nearFollowsFailover(t, rdb, key)
	if _, ok := roomlist.NearCacheConnIDs(f.lister)[master.Addr]; ok {
		t.Errorf("a tracking connection to the stopped master %s is kept", master.Addr)
	}
}

// reads is the list's Redis reads of a result so far (hit, miss, error,
// near: see voiceroom_list_cache_requests_total).
func (f *failoverFixture) reads(t *testing.T, result string) float64 {
	return testenv.MetricValue(t, f.reg, "voiceroom_list_cache_requests_total", "result", result)
}

// walkServedBy walks the list again and fails unless it is the list
// before, no read missed a card or failed, and some were served as result.
func (f *failoverFixture) walkServedBy(t *testing.T, result string) {
	t.Helper()
	miss, failed, served := f.reads(t, "miss"), f.reads(t, "error"), f.reads(t, result)
	f.walkSame(t, "again")
	if n := f.reads(t, "miss") - miss; n != 0 {
		t.Errorf("%v misses reading cards Redis holds", n)
	}
	if n := f.reads(t, "error") - failed; n != 0 {
		t.Errorf("%v failed Redis reads", n)
	}
	if f.reads(t, result) == served {
		t.Errorf("no page served as %s", result)
	}
}

// nearFollowsFailover writes the first room's card (key) in Redis, after a
// failover, again and again until the near cache serves it: a page read
// from Redis (or from memory) must show each write at once (no stale
// card), and the cache must be up and serve the latest write from memory.
func (f *failoverFixture) nearFollowsFailover(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	ctx := t.Context()
	i := 0
	testenv.Eventually(t, 60*time.Second, func() error {
		i++
		title := fmt.Sprintf("written after the failover %d", i)
		if err := setCardTitle(ctx, rdb, key, title); err != nil {
			return err // the slot's new master does not take writes yet
		}
		fromNear := false
		for range 3 {
			redisReads, nearReads := f.fromRedis(t), f.reads(t, "near")
			page, err := f.lister.List(ctx, f.req)
			if err != nil {
				t.Fatal(err)
			}
			if f.fromRedis(t) == redisReads {
				continue // read from MySQL: Redis is not back for the list yet
			}
			if len(page.Rooms) == 0 || page.Rooms[0].Title != title {
				t.Fatalf("stale card after the failover: %+v, want the title %q", page.Rooms[:min(1, len(page.Rooms))], title)
			}
			fromNear = fromNear || f.reads(t, "near") > nearReads
		}
		if !fromNear || !roomlist.NearCacheUp(f.lister) {
			return fmt.Errorf("the near cache does not serve the card yet (up %v)", roomlist.NearCacheUp(f.lister))
		}
		return nil
	})
}

// setCardTitle rewrites the card at key with another title, straight in
// Redis.
func setCardTitle(ctx context.Context, rdb redis.UniversalClient, key, title string) error {
	raw, err := rdb.Get(ctx, key).Bytes()
	if err != nil {
		return err
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	c["title"] = title
	raw, _ = json.Marshal(c)
	return rdb.Set(ctx, key, raw, redis.KeepTTL).Err()
}
