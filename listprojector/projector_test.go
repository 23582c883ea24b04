package listprojector_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/listprojector"
	"voiceroom/roomevent"
)

// sink is the projector over real MySQL, Redis and JetStream, fed with
// hand-made events.
type sink struct {
	tb     testing.TB
	db     *sql.DB
	rdb    redis.UniversalClient
	prefix string
	conn   *bus.Conn
	pub    *bus.Publisher
	reg    *prometheus.Registry
	cfg    listprojector.Config
	seq    int
	// workers is the consume loop's Concurrency (0: the default).
	workers int
}

func newSink(tb testing.TB) *sink {
	tb.Helper()
	db := testenv.NewDB(tb)
	rdb, prefix := testenv.NewRedis(tb)
	conn := testenv.NewJetStream(tb)
	pub, err := bus.NewPublisher(conn.JetStream(), bus.PublisherConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	return &sink{tb: tb, db: db, rdb: rdb, prefix: prefix, conn: conn, pub: pub, reg: prometheus.NewRegistry(),
		cfg: listprojector.Config{KeyPrefix: prefix}}
}

func (s *sink) metrics() *listprojector.Metrics {
	m, err := listprojector.NewMetrics(s.reg)
	if err != nil {
		s.tb.Fatal(err)
	}
	return m
}

// start runs a projector until the test ends.
func (s *sink) start() {
	s.tb.Helper()
	p, err := listprojector.New(s.db, s.rdb, s.conn.JetStream(), bus.ConsumerRunConfig{Durable: bus.DurableListProjector,
		Concurrency: s.workers, NakDelays: []time.Duration{50 * time.Millisecond}}, nil, s.cfg, testenv.Logger(s.tb), s.metrics())
	if err != nil {
		s.tb.Fatal(err)
	}
	testenv.Start(s.tb, p.Run)
	<-p.Running()
}

// card is a room card as events carry it.
func card(room string, version, region int64, title string, online int) roomevent.Card {
	return roomevent.Card{Listing: roomevent.Listing{RoomID: room, RoomShortID: "short_" + room, OwnerUserID: 7, HostUserID: 7,
		VisibleRegionID: region, Title: title, Mode: "voice", Status: "active", OnlineCount: online, SeatCount: 10,
		CreatedAtMs: 1_700_000_000_000 + version}, RoomVersion: version}
}

// publish sends one event of app's room carrying c (and extra payload fields).
func (s *sink) publish(app, eventType string, c roomevent.Card) {
	s.tb.Helper()
	s.publishRaw(app, c.RoomID, c.RoomVersion, eventType, map[string]any{"room": c})
}

func (s *sink) publishRaw(app, room string, version int64, eventType string, payload any) {
	s.tb.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		s.tb.Fatal(err)
	}
	s.seq++
	env := bus.Envelope{EventID: fmt.Sprintf("ev-%d", s.seq), AppCode: app, RoomID: room, RoomVersion: version,
		EventType: eventType, CommandID: "cmd", OccurredAtMs: time.Now().UnixMilli(), Payload: raw}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.pub.Publish(ctx, env); err != nil {
		s.tb.Fatal(err)
	}
}

// listed returns the cards the read model lists in app's region, in hot
// order: MySQL's rows, once Redis's hot set holds the same rooms with the
// same cards (the mirror is written after MySQL, so it may lag).
func (s *sink) listed(app string, region int64) ([]*listprojector.Card, error) {
	ctx := context.Background()
	rows, err := s.db.QueryContext(ctx, `SELECT `+listprojector.CardColumns("e")+` FROM room_list_entries e WHERE `+
		listprojector.ListedSQL+` ORDER BY e.sort_score DESC, e.room_id`, app, region)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cards []*listprojector.Card
	for rows.Next() {
		c, err := listprojector.ScanCard(rows)
		if err != nil {
			return nil, err
		}
		cards = append(cards, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	keys := listprojector.Keys{Prefix: s.prefix}
	members, err := s.rdb.ZRange(ctx, keys.List(app, region, listprojector.TabHot), 0, -1).Result()
	if err != nil {
		return nil, err
	}
	if len(members) != len(cards) {
		return nil, fmt.Errorf("redis lists %v, mysql %d rooms", members, len(cards))
	}
	for _, c := range cards {
		var cached listprojector.Card
		raw, err := s.rdb.Get(ctx, keys.Card(app, c.RoomID)).Bytes()
		if err == nil {
			err = json.Unmarshal(raw, &cached)
		}
		if err != nil || cached != *c || !slices.Contains(members, c.RoomID) {
			return nil, fmt.Errorf("redis holds %s as %+v (%v), mysql as %+v", c.RoomID, cached, err, *c)
		}
	}
	return cards, nil
}

// eventually waits until the read model lists app's region as check wants.
func (s *sink) eventually(app string, region int64, check func([]*listprojector.Card) error) {
	s.tb.Helper()
	testenv.Eventually(s.tb, 10*time.Second, func() error {
		cards, err := s.listed(app, region)
		if err != nil {
			return err
		}
		return check(cards)
	})
}

// counter reads voiceroom_list_projector_events_total{result}.
func (s *sink) counter(result string) float64 {
	s.tb.Helper()
	return testenv.MetricValue(s.tb, s.reg, "voiceroom_list_projector_events_total", "result", result)
}

// TestDuplicatesAndOutOfOrder: redelivered, repeated and reordered events
// leave each room's newest card; one pull's events of a room coalesce.
func TestDuplicatesAndOutOfOrder(t *testing.T) {
	s := newSink(t)
	// Published before the projector starts, so a pull brings them together.
	for _, v := range []int64{3, 1, 2, 3, 5, 4, 5} {
		s.publish("a1", roomevent.RoomUserJoined, card("r1", v, 1, fmt.Sprintf("v%d", v), int(v)))
	}
	s.start()
	s.eventually("a1", 1, func(items []*listprojector.Card) error {
		if len(items) != 1 || items[0].Title != "v5" || items[0].OnlineCount != 5 {
			return fmt.Errorf("%+v", items)
		}
		return nil
	})
	// Every event is accounted for: applied, stale or coalesced (which
	// one depends on how the pulls cut them; TestCoalescing pins that).
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := s.counter("applied") + s.counter("stale") + s.counter("coalesced"); n != 7 {
			return fmt.Errorf("%v events accounted for", n)
		}
		return nil
	})
	// Older events after the newest change nothing: stale, or coalesced
	// into a stale one when a pull brings both.
	before := s.counter("stale") + s.counter("coalesced")
	s.publish("a1", roomevent.RoomUserLeft, card("r1", 4, 1, "v4", 4))
	s.publish("a1", roomevent.RoomUserLeft, card("r1", 5, 1, "v5 again", 0))
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := s.counter("stale") + s.counter("coalesced") - before; n != 2 {
			return fmt.Errorf("stale or coalesced %v, want 2", n)
		}
		return nil
	})
	s.eventually("a1", 1, func(items []*listprojector.Card) error {
		if len(items) != 1 || items[0].Title != "v5" {
			return fmt.Errorf("%+v", items)
		}
		return nil
	})
	var version int64
	if err := s.db.QueryRow(`SELECT room_version FROM room_list_entries WHERE app_code = 'a1' AND room_id = 'r1'`).Scan(&version); err != nil || version != 5 {
		t.Errorf("stored version %d, %v", version, err)
	}
}

// TestWorkersKeepEachRoomsNewestCard: with four workers writing batches at
// once (VOICEROOM_PROJECTOR_CONCURRENCY), every room of a backlog, its
// versions interleaved with other rooms' and out of order, ends at its
// newest card, and every event is accounted for once.
func TestWorkersKeepEachRoomsNewestCard(t *testing.T) {
	s := newSink(t)
	s.workers = 4
	const rooms, versions = 120, 5
	for v := int64(1); v <= versions; v++ {
		for r := range rooms {
			version := v
			if r%3 == 0 { // some rooms' versions arrive newest first
				version = versions + 1 - v
			}
			s.publish("a1", roomevent.RoomUserJoined, card(fmt.Sprintf("r%03d", r), version, int64(1+r%4), fmt.Sprintf("v%d", version), int(version)))
		}
	}
	s.start()
	testenv.Eventually(t, 30*time.Second, func() error {
		n := testenv.Scalar[int](t, s.db, `SELECT COUNT(*) FROM room_list_entries WHERE app_code = 'a1' AND room_version = ? AND title = ?`,
			versions, fmt.Sprintf("v%d", versions))
		if n != rooms {
			return fmt.Errorf("%d of %d rooms at their newest card", n, rooms)
		}
		if n := s.counter("applied") + s.counter("stale") + s.counter("coalesced"); n != rooms*versions {
			return fmt.Errorf("%v of %d events accounted for", n, rooms*versions)
		}
		return nil
	})
}

// TestAppsNeverMix: equal room ids, regions and short ids in two apps.
func TestAppsNeverMix(t *testing.T) {
	s := newSink(t)
	s.start()
	s.publish("a1", roomevent.RoomCreated, card("r1", 1, 1, "of a1", 1))
	s.publish("a2", roomevent.RoomCreated, card("r1", 1, 1, "of a2", 2))
	s.publish("a2", roomevent.RoomUserJoined, card("r1", 2, 1, "of a2", 3))
	for app, want := range map[string]string{"a1": "of a1", "a2": "of a2"} {
		s.eventually(app, 1, func(items []*listprojector.Card) error {
			if len(items) != 1 || items[0].Title != want {
				return fmt.Errorf("%s: %+v", app, items)
			}
			return nil
		})
	}
}

// TestCloseMoveAndUnknownEvents: RoomClosed removes, RoomVisibleRegionChanged
// moves, unknown types never block, broken known ones are dead-lettered,
// an activity's events (no room, no card) are acked.
func TestCloseMoveAndUnknownEvents(t *testing.T) {
	s := newSink(t)
	s.start()
	s.publish("a1", roomevent.RoomCreated, card("r1", 1, 1, "one", 0))
	s.publish("a1", roomevent.RoomCreated, card("r2", 1, 1, "two", 0))
	s.publishRaw("a1", "r1", 2, roomevent.RoomUserJoined, map[string]any{"room": "not a card"})       // dead-lettered
	s.publishRaw("a1", "r1", 2, "RoomSomethingNew", map[string]any{"x": 1})                           // acked, nothing to apply
	s.publishRaw("a1", "activity-7", 1, roomevent.ActivityRewarded, map[string]any{"activity_id": 7}) // not a room's: acked
	moved := card("r2", 2, 2, "two", 0)
	s.publish("a1", roomevent.RoomVisibleRegionChanged, moved)
	closed := card("r1", 3, 1, "one", 0)
	closed.Status = "closed"
	s.publish("a1", roomevent.RoomClosed, closed)
	banned := card("r3", 2, 1, "three", 0)
	s.publish("a1", roomevent.RoomCreated, card("r3", 1, 1, "three", 0))
	banned.Status = "banned"
	s.publish("a1", "RoomSomethingNewer", banned) // unknown type with a card: applied

	s.eventually("a1", 1, func(items []*listprojector.Card) error {
		if len(items) != 0 {
			return fmt.Errorf("region 1: %+v", items)
		}
		return nil
	})
	s.eventually("a1", 2, func(items []*listprojector.Card) error {
		if len(items) != 1 || items[0].RoomID != "r2" {
			return fmt.Errorf("region 2: %+v", items)
		}
		return nil
	})
	if n := s.counter("unknown"); n != 2 {
		t.Errorf("unknown events %v, want 2", n)
	}
	ctx := context.Background()
	// The list above may have come from MySQL; Redis follows it, written
	// after each batch by the mirror writer.
	testenv.Eventually(t, 10*time.Second, func() error {
		for _, key := range []string{s.prefix + "room:list:{a1:1}:hot", s.prefix + "room:list:{a1:1}:new"} {
			if n, err := s.rdb.ZCard(ctx, key).Result(); err != nil || n != 0 {
				return fmt.Errorf("%s holds %d members (%v)", key, n, err)
			}
		}
		return nil
	})
	testenv.Eventually(t, 10*time.Second, func() error {
		info, err := s.conn.JetStream().Stream(ctx, bus.DLQStreamName)
		if err != nil {
			return err
		}
		if n := info.CachedInfo().State.Msgs; n != 1 {
			return fmt.Errorf("%d dead letters", n)
		}
		return nil
	})
}

// TestRedisDownKeepsWritingMySQL: with Redis stopped the projector still
// writes MySQL, and counts the failed Redis writes (the reconcile job
// repairs them).
func TestRedisDownKeepsWritingMySQL(t *testing.T) {
	s := newSink(t)
	down := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr(t), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { down.Close() })
	s.rdb = down
	s.start()
	s.publish("a1", roomevent.RoomCreated, card("fresh", 1, 1, "fresh", 0))
	testenv.Eventually(t, 10*time.Second, func() error {
		var n int
		if err := s.db.QueryRow(`SELECT COUNT(*) FROM room_list_entries WHERE app_code = 'a1' AND room_id = 'fresh'`).Scan(&n); err != nil || n != 1 {
			return fmt.Errorf("fresh room: %d %v", n, err)
		}
		if n := testenv.MetricValue(t, s.reg, "voiceroom_list_redis_write_failures_total", "writer", "projector"); n < 1 {
			return fmt.Errorf("%v failed redis writes counted", n)
		}
		return nil
	})
}

// TestCountsWaitUnacked: over JetStream, joins that change only the
// online count are held: the newest one's message unacked until its card
// is written together within the delay, the older ones acked at once; a
// projector that stops writes what it holds before Run returns, and every
// event is acked.
func TestCountsWaitUnacked(t *testing.T) {
	s := newSink(t)
	s.cfg.CountsDelay = 3 * time.Second
	js := s.conn.JetStream()
	ackPending := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := js.Consumer(ctx, bus.StreamName, bus.DurableListProjector)
		if err != nil {
			t.Fatal(err)
		}
		return c.CachedInfo().NumAckPending
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := listprojector.New(s.db, s.rdb, js, bus.ConsumerRunConfig{Durable: bus.DurableListProjector,
		NakDelays: []time.Duration{50 * time.Millisecond}}, nil, s.cfg, testenv.Logger(t), s.metrics())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-p.Running()
	online := func(want int) func([]*listprojector.Card) error {
		return func(cards []*listprojector.Card) error {
			if len(cards) != 1 || cards[0].OnlineCount != want {
				return fmt.Errorf("listed %+v, want r1 with %d online", cards, want)
			}
			return nil
		}
	}
	room := func(version int64, online int) roomevent.Card {
		c := card("r1", version, 1, "t", online)
		c.CreatedAtMs = 1_700_000_000_000 // card's varies with the version
		return c
	}
	s.publish("a1", roomevent.RoomCreated, room(1, 0))
	s.eventually("a1", 1, online(0))
	start := time.Now()
	for v := int64(2); v <= 5; v++ {
		s.publish("a1", roomevent.RoomUserJoined, room(v, int(v-1)))
	}
	testenv.Eventually(t, 2*time.Second, func() error {
		if n, held := ackPending(), testenv.MetricValue(t, s.reg, "voiceroom_list_projector_held_rooms"); n != 1 || held != 1 {
			return fmt.Errorf("ack pending %d, held rooms %v; want 1 and 1", n, held)
		}
		return nil
	})
	if cards, err := s.listed("a1", 1); err != nil || online(0)(cards) != nil {
		t.Fatalf("held joins already listed: %v %v", online(0)(cards), err)
	}
	s.eventually("a1", 1, online(4))
	if waited := time.Since(start); waited < 2*time.Second {
		t.Errorf("joins listed after %s, before the delay", waited)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := ackPending(); n != 0 {
			return fmt.Errorf("ack pending %d after the write", n)
		}
		return nil
	})

	s.publish("a1", roomevent.RoomUserJoined, room(6, 5))
	testenv.Eventually(t, 2*time.Second, func() error {
		if n, held := ackPending(), testenv.MetricValue(t, s.reg, "voiceroom_list_projector_held_rooms"); n != 1 || held != 1 {
			return fmt.Errorf("ack pending %d, held rooms %v; want the join held", n, held)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if cards, err := s.listed("a1", 1); err != nil || online(5)(cards) != nil {
		t.Errorf("after stop: %v %v", online(5)(cards), err)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := ackPending(); n != 0 {
			return fmt.Errorf("ack pending %d after stop", n)
		}
		return nil
	})
}
