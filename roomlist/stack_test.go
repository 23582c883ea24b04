package roomlist_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"voiceroom"
	"voiceroom/authtoken"
	"voiceroom/bus"
	"voiceroom/gateway"
	"voiceroom/internal/testenv"
	"voiceroom/listprojector"
	"voiceroom/regions"
	"voiceroom/roomlist"
	"voiceroom/rooms"
	"voiceroom/wallet"
)

var testSecret = []byte("list-test-secret-0123456789")

// syncPublisher hands every committed event to JetStream at once (the
// outbox fast path's job in production).
type syncPublisher struct {
	tb  testing.TB
	pub *bus.Publisher
}

// Behind: these tests start with no pending outbox rows of other processes.
func (syncPublisher) Behind(voiceroom.RoomKey, string) {}

// Taking is false: rows are written pending (these tests read the list,
// not the outbox).
func (syncPublisher) Taking() bool { return false }

func (s syncPublisher) Committed(msgs []bus.Message, _ voiceroom.OutboxGroup, _ time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, m := range msgs {
		if _, err := s.pub.PublishMessage(ctx, m); err != nil {
			s.tb.Errorf("publish %s: %v", m.Subject, err)
		}
	}
}

// stack is the whole product around the list: regions, rooms publishing
// to JetStream, the projector, the list and pin routes, over HTTP.
type stack struct {
	tb      testing.TB
	db      *sql.DB
	rdb     redis.UniversalClient
	prefix  string
	js      jetstream.JetStream
	pcfg    listprojector.Config
	cfg     roomlist.Config
	regions *regions.Service
	rooms   *rooms.Service
	lister  *roomlist.Lister
	srv     *gateway.Server
	reg     *prometheus.Registry
	ids     map[string]int64 // region code -> id, app demo
	// skew moves the list's clock (cfg.Now) ahead of the wall clock, so
	// a test can let hides and pins expire without waiting.
	skew *atomic.Int64
}

func newStack(tb testing.TB) *stack {
	tb.Helper()
	ctx := context.Background()
	db := testenv.NewDB(tb)
	rdb, prefix := testenv.NewRedis(tb)
	conn := testenv.NewJetStream(tb)
	log := testenv.Logger(tb)
	reg := prometheus.NewRegistry()

	rsvc, err := regions.New(ctx, db, log, reg, regions.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(rsvc.Close)
	for _, app := range []string{"demo", "other"} {
		if _, err := rsvc.Seed(ctx, app, regions.DemoData()); err != nil {
			tb.Fatal(err)
		}
	}
	pub, err := bus.NewPublisher(conn.JetStream(), bus.PublisherConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	roomSvc, err := rooms.New(db, rsvc, rsvc, syncPublisher{tb, pub}, rooms.Config{BcryptCost: 4}, log, reg, time.Now)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(roomSvc.Close)

	skew := new(atomic.Int64)
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	pcfg := listprojector.Config{KeyPrefix: prefix, FetchBatch: 100, Now: now}
	cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond, Now: now}
	pm, err := listprojector.NewMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	proj, err := listprojector.New(db, rdb, conn.JetStream(), bus.ConsumerRunConfig{Durable: bus.DurableListProjector,
		NakDelays: []time.Duration{50 * time.Millisecond}}, nil, pcfg, log, pm)
	if err != nil {
		tb.Fatal(err)
	}
	testenv.Start(tb, proj.Run)
	<-proj.Running()

	mirror, err := listprojector.NewMirror(db, rdb, pcfg, pm)
	if err != nil {
		tb.Fatal(err)
	}
	qm, err := roomlist.NewMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	lister, err := roomlist.NewLister(db, mirror, cfg, log, qm)
	if err != nil {
		tb.Fatal(err)
	}
	runLister(tb, lister, rdb)
	moderation, err := rooms.NewModerationCounter(reg)
	if err != nil {
		tb.Fatal(err)
	}
	pins, err := roomlist.NewPins(db, moderation, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	hides, err := roomlist.NewHides(db, lister, moderation, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := gateway.New(gateway.Config{JWTSecret: testSecret, RatePerUser: 100000, RateBurst: 100000}, log, reg, reg, nil,
		gateway.RegionRoutes(rsvc), gateway.RoomRoutes(roomSvc), gateway.WalletRoutes(wallet.New(db, time.Now)),
		gateway.RoomListRoutes(lister, pins, rsvc), gateway.HideRoutes(hides))
	if err != nil {
		tb.Fatal(err)
	}
	s := &stack{tb: tb, db: db, rdb: rdb, prefix: prefix, js: conn.JetStream(), pcfg: pcfg, cfg: cfg, regions: rsvc, rooms: roomSvc, lister: lister, srv: srv, reg: reg,
		ids: map[string]int64{"GLOBAL": 0}, skew: skew}
	list, err := rsvc.ListRegions(ctx, "demo")
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := json.Marshal(list)
	if err != nil {
		tb.Fatal(err)
	}
	var parsed struct {
		Regions []struct {
			RegionID   int64  `json:"region_id"`
			RegionCode string `json:"region_code"`
		} `json:"regions"`
	}
	if err := json.Unmarshal(raw, &parsed); err != nil {
		tb.Fatalf("regions %s: %v", raw, err)
	}
	for _, r := range parsed.Regions {
		s.ids[r.RegionCode] = r.RegionID
	}
	if s.ids["SEA"] == 0 || s.ids["MENA"] == 0 {
		tb.Fatalf("demo regions not found in %s", raw)
	}
	return s
}

// runLister runs l's near cache until the test ends and, when rdb answers,
// waits until it is in use: the tests then read through it, as a serving
// process does.
func runLister(tb testing.TB, l *roomlist.Lister, rdb redis.UniversalClient) {
	tb.Helper()
	testenv.Start(tb, l.Run)
	if rdb == nil || !roomlist.NearCacheOn(l) || rdb.Ping(context.Background()).Err() != nil {
		return
	}
	testenv.Eventually(tb, 10*time.Second, func() error {
		if !roomlist.NearCacheUp(l) {
			return errors.New("the near cache did not come up")
		}
		return nil
	})
}

// call sends a request as "app:user" ("app:admin" for an operator) and
// decodes the envelope's data into out.
func (s *stack) call(method, path, as, body string, out any) (int, string) {
	s.tb.Helper()
	app, user, _ := strings.Cut(as, ":")
	var id int64
	role := ""
	if user == "admin" {
		role = authtoken.RoleAdmin
	} else {
		fmt.Sscan(user, &id)
	}
	tok, err := authtoken.Issue(testSecret, app, id, role, time.Hour, time.Now())
	if err != nil {
		s.tb.Fatal(err)
	}
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.srv.App().Test(req, 10000)
	if err != nil {
		s.tb.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.tb.Fatalf("%s %s: read body: %v", method, path, err)
	}
	var env struct {
		Code string          `json:"code"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		s.tb.Fatalf("%s %s: not an envelope: %s", method, path, raw)
	}
	if out != nil && len(env.Data) > 0 {
		if err := json.Unmarshal(env.Data, out); err != nil {
			s.tb.Fatalf("%s %s: %v in %s", method, path, err, env.Data)
		}
	}
	return resp.StatusCode, env.Code
}

func (s *stack) mustOK(method, path, as, body string, out any) {
	s.tb.Helper()
	if status, code := s.call(method, path, as, body, out); status != 200 {
		s.tb.Fatalf("%s %s as %s: %d %s", method, path, as, status, code)
	}
}

// user registers app:id in country with a display id.
func (s *stack) user(as, display, country string) {
	s.tb.Helper()
	s.mustOK("PUT", "/api/v1/users/me", as, fmt.Sprintf(`{"display_user_id":%q,"country":%q}`, display, country), nil)
}

// createRoom creates as's room and returns its id.
func (s *stack) createRoom(as, title string) string {
	s.tb.Helper()
	var room rooms.View
	s.mustOK("POST", "/api/v1/rooms/create", as, fmt.Sprintf(`{"room_name":%q}`, title), &room)
	return room.RoomID
}

// page is a decoded GET /api/v1/rooms.
type page struct {
	Rooms      []roomlist.Item `json:"rooms"`
	NextCursor string          `json:"next_cursor"`
}

// list fetches one page as as with the query parameters q.
func (s *stack) list(as string, q url.Values) (int, page) {
	s.tb.Helper()
	var p page
	status, _ := s.call("GET", "/api/v1/rooms?"+q.Encode(), as, "", &p)
	return status, p
}

// ids lists the room ids of all pages of as's list (tab, query).
func (s *stack) walk(as, tab, query string, limit int) []roomlist.Item {
	s.tb.Helper()
	var all []roomlist.Item
	cursor := ""
	for range 1000 {
		q := url.Values{"tab": {tab}, "limit": {fmt.Sprint(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if query != "" {
			q.Set("query", query)
		}
		status, p := s.list(as, q)
		if status != 200 {
			s.tb.Fatalf("list as %s: %d", as, status)
		}
		all = append(all, p.Rooms...)
		if p.NextCursor == "" {
			return all
		}
		cursor = p.NextCursor
	}
	s.tb.Fatal("cursor chain does not end")
	return nil
}

func roomIDs(items []roomlist.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.RoomID
	}
	return out
}
