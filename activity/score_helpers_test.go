package activity

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/regions"
	"voiceroom/roomevent"
)

// scoreEnv is the scoring over real MySQL, Redis and JetStream, with
// activities inserted as rows and room events built and published by
// hand.
type scoreEnv struct {
	tb     testing.TB
	db     *sql.DB
	rdb    redis.UniversalClient
	prefix string
	conn   *bus.Conn
	pub    *bus.Publisher
	reg    *prometheus.Registry
	m      *ScoreMetrics
	cfg    ScoreConfig
	clock  *testenv.Clock
	seq    int
	vers   map[string]int64

	regionSvc *regions.Service
}

// t0 is 2026-03-02 00:00 UTC, a Monday.
var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC).UnixMilli()

const (
	sec  = int64(1000)
	hour = 3600 * sec
	day  = 24 * hour
)

func newScoreEnv(tb testing.TB, zones map[string]string) *scoreEnv {
	tb.Helper()
	db := testenv.NewDB(tb)
	rdb, prefix := testenv.NewRedis(tb)
	conn := testenv.NewJetStream(tb)
	pub, err := bus.NewPublisher(conn.JetStream(), bus.PublisherConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewScoreMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	clock := testenv.NewClock(time.UnixMilli(t0 + 12*hour))
	return &scoreEnv{tb: tb, db: db, rdb: rdb, prefix: prefix, conn: conn, pub: pub, reg: reg, m: m, clock: clock, vers: map[string]int64{},
		cfg: ScoreConfig{TimeZones: zones, KeyPrefix: prefix, Now: clock.Now, Refresh: 50 * time.Millisecond}}
}

// activity inserts a as a row (as the definitions do) and returns its id.
func (e *scoreEnv) activity(a Activity) int64 {
	e.tb.Helper()
	js := func(v any, null bool) any {
		if null {
			return nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			e.tb.Fatal(err)
		}
		return string(b)
	}
	if a.Kind == "" {
		a.Kind = Leaderboard
	}
	if a.AppCode == "" {
		a.AppCode = "a1"
	}
	if a.EndsAtMs == 0 {
		a.StartsAtMs, a.EndsAtMs = t0, t0+7*day
	}
	res, err := e.db.Exec(`INSERT INTO activities (app_code, name, kind, metric, gift_ids, region_ids, starts_at_ms, ends_at_ms, rewards,
		target, period, reward_coins, status, created_at_ms, updated_at_ms) VALUES (?, 'test', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?)`,
		a.AppCode, a.Kind, a.Metric, js(a.GiftIDs, a.GiftIDs == nil), js(a.RegionIDs, a.RegionIDs == nil), a.StartsAtMs, a.EndsAtMs,
		js(a.Rewards, a.Rewards == nil), a.Target, a.Period, a.RewardCoins, a.StartsAtMs-day, a.StartsAtMs-day)
	if err != nil {
		e.tb.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		e.tb.Fatal(err)
	}
	return id
}

// get reads activity id back.
func (e *scoreEnv) get(id int64) Activity {
	e.tb.Helper()
	a, err := NewStore(e.db, e.clock.Now).Get(context.Background(), "a1", id)
	if err != nil {
		e.tb.Fatal(err)
	}
	return a
}

// room is a room of app (ids only: the scoring reads no room row).
type room struct {
	app, id string
	region  int64
	owner   int64
}

func (e *scoreEnv) room(app string, region, owner int64) room {
	e.seq++
	r := room{app: app, id: fmt.Sprintf("%s_r%d", app, e.seq), region: region, owner: owner}
	return r
}

// event builds an event of r of type t with body at atMs.
func (e *scoreEnv) event(r room, t string, body any, atMs int64) bus.Envelope {
	e.tb.Helper()
	e.vers[r.id]++
	v := e.vers[r.id]
	card, err := json.Marshal(roomevent.Card{Listing: roomevent.Listing{RoomID: r.id, Status: "active", VisibleRegionID: r.region,
		OwnerUserID: r.owner, CreatedAtMs: 1}, RoomVersion: v})
	if err != nil {
		e.tb.Fatal(err)
	}
	var payload json.RawMessage
	if body == nil {
		payload = json.RawMessage(`{"room":` + string(card) + `}`)
	} else if payload, err = roomevent.EncodePayload(card, body); err != nil {
		e.tb.Fatal(err)
	}
	e.seq++
	return bus.Envelope{EventID: fmt.Sprintf("ev-%d", e.seq), AppCode: r.app, RoomID: r.id, RoomVersion: v,
		EventType: t, CommandID: fmt.Sprintf("c-%d", e.seq), OccurredAtMs: atMs, Payload: payload}
}

func (e *scoreEnv) gift(r room, sender, receiver, giftID, value, count, atMs int64) bus.Envelope {
	return e.event(r, roomevent.RoomGiftSent, roomevent.GiftSent{SenderUserID: sender, ReceiverUserID: receiver, GiftID: giftID,
		GiftName: "g", Count: count, Value: value}, atMs)
}

func (e *scoreEnv) mic(r room, t string, user int64, atMs int64) bus.Envelope {
	return e.event(r, t, roomevent.MicMoved{UserID: user, SeatIndex: 1}, atMs)
}

// publish stores events in ROOM_EVENTS.
func (e *scoreEnv) publish(envs ...bus.Envelope) {
	e.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, env := range envs {
		if _, err := e.pub.Publish(ctx, env); err != nil {
			e.tb.Fatal(err)
		}
	}
}

// newScorer is a Scorer over the env's Redis (rdb: nil for none) that
// the test calls by hand or starts.
func (e *scoreEnv) newScorer(rdb redis.UniversalClient) *Scorer {
	e.tb.Helper()
	s, err := NewScorer(e.db, rdb, e.conn.JetStream(), scoreRun(), nil, e.cfg, testenv.Logger(e.tb), e.m)
	if err != nil {
		e.tb.Fatal(err)
	}
	return s
}

// start runs a scorer until the test ends.
func (e *scoreEnv) start(rdb redis.UniversalClient) *Scorer {
	e.tb.Helper()
	s := e.newScorer(rdb)
	testenv.Start(e.tb, s.Run)
	<-s.Running()
	return s
}

// scoreRun is the consume loop of the tests: retries after 50ms.
func scoreRun() bus.ConsumerRunConfig {
	return bus.ConsumerRunConfig{Durable: bus.DurableActivity, NakDelays: []time.Duration{50 * time.Millisecond}}
}

// mustScore scores env by hand.
func (e *scoreEnv) mustScore(s *Scorer, envs ...bus.Envelope) {
	e.tb.Helper()
	for _, env := range envs {
		if err := s.Score(context.Background(), env); err != nil {
			e.tb.Fatalf("score %s %s: %v", env.EventID, env.EventType, err)
		}
	}
}

// scores reads activity id's scores of the period starting at ps.
func (e *scoreEnv) scores(id, ps int64) map[string]int64 {
	e.tb.Helper()
	rows, err := e.db.Query(`SELECT subject, score FROM activity_scores WHERE activity_id = ? AND period_start_ms = ?`, id, ps)
	if err != nil {
		e.tb.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var s string
		var v int64
		if err := rows.Scan(&s, &v); err != nil {
			e.tb.Fatal(err)
		}
		out[s] = v
	}
	if err := rows.Err(); err != nil {
		e.tb.Fatal(err)
	}
	return out
}

// waitScores waits until activity id's scores of period ps are want.
func (e *scoreEnv) waitScores(id, ps int64, want map[string]int64) {
	e.tb.Helper()
	testenv.Eventually(e.tb, 20*time.Second, func() error {
		if got := e.scores(id, ps); !maps.Equal(got, want) {
			return fmt.Errorf("activity %d scores %v, want %v", id, got, want)
		}
		return nil
	})
}

// mustEqualScores checks activity id's scores of period ps now.
func (e *scoreEnv) mustEqualScores(id, ps int64, want map[string]int64) {
	e.tb.Helper()
	if got := e.scores(id, ps); !maps.Equal(got, want) {
		e.tb.Fatalf("activity %d scores %v, want %v", id, got, want)
	}
}

// events returns the scored events by result.
func (e *scoreEnv) events(result string) float64 {
	return testenv.MustMetric(e.tb, e.reg, "voiceroom_activity_events_total", "result", result)
}

// payouts reads activity id's task payouts as "period_start:user:score:coins".
func (e *scoreEnv) payouts(id int64) []string {
	e.tb.Helper()
	rows, err := e.db.Query(`SELECT period_start_ms, user_id, score, coins, entry_key FROM activity_payouts WHERE activity_id = ? AND reason = 'task'`, id)
	if err != nil {
		e.tb.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var ps, user, score, coins int64
		var key string
		if err := rows.Scan(&ps, &user, &score, &coins, &key); err != nil {
			e.tb.Fatal(err)
		}
		if key != EntryKey(id, ReasonTask, ps, user) {
			e.tb.Errorf("payout entry key %q, want %q", key, EntryKey(id, ReasonTask, ps, user))
		}
		out = append(out, fmt.Sprintf("%d:%d:%d:%d", ps, user, score, coins))
	}
	if err := rows.Err(); err != nil {
		e.tb.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// regions is the env's regions service (real: users get their region
// from their country).
func (e *scoreEnv) regions() *regions.Service {
	e.tb.Helper()
	if e.regionSvc == nil {
		svc, err := regions.New(context.Background(), e.db, testenv.Logger(e.tb), nil, regions.Config{})
		if err != nil {
			e.tb.Fatal(err)
		}
		e.tb.Cleanup(svc.Close)
		e.regionSvc = svc
	}
	return e.regionSvc
}

// region creates a region of app with one country (code) in it.
func (e *scoreEnv) region(app, code, country string) int64 {
	e.tb.Helper()
	ctx := context.Background()
	r, err := e.regions().CreateRegion(ctx, app, code, code)
	if err != nil {
		e.tb.Fatal(err)
	}
	if _, err := e.regions().CreateCountry(ctx, app, country, "", r.ID); err != nil {
		e.tb.Fatal(err)
	}
	return r.ID
}

// user gives user of app a profile in country.
func (e *scoreEnv) user(app string, user int64, country string) {
	e.tb.Helper()
	display := fmt.Sprint("user", user)
	if _, err := e.regions().PutProfile(context.Background(), app, user, regions.ProfileUpdate{DisplayUserID: &display, Country: &country}); err != nil {
		e.tb.Fatalf("profile of %d: %v", user, err)
	}
}

// boards are the reads over rdb (nil: MySQL only).
func (e *scoreEnv) boards(rdb redis.UniversalClient) *Boards {
	e.tb.Helper()
	b, err := NewBoards(e.db, rdb, e.regions(), e.cfg, testenv.Logger(e.tb), e.m)
	if err != nil {
		e.tb.Fatal(err)
	}
	return b
}

// reads returns the board reads answered from source.
func (e *scoreEnv) reads(source string) float64 {
	return testenv.MustMetric(e.tb, e.reg, "voiceroom_activity_board_reads_total", "source", source)
}

// setClock sets the env's clock to ms.
func (e *scoreEnv) setClock(ms int64) { e.clock.Advance(time.UnixMilli(ms).Sub(e.clock.Now())) }
