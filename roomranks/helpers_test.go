package roomranks

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/mysqldb"
	"voiceroom/roomevent"
	"voiceroom/wallet"
)

// ranksEnv is the ranks over real MySQL, Redis and JetStream, with gifts
// written as the gift command writes them (command-log row and ledger row
// in one transaction) and their events published by hand.
type ranksEnv struct {
	tb     testing.TB
	db     *sql.DB
	rdb    redis.UniversalClient
	conn   *bus.Conn
	pub    *bus.Publisher
	reg    *prometheus.Registry
	m      *Metrics
	cfg    Config
	clock  *testenv.Clock
	seq    int
	vers   map[string]int64 // each room's latest version
	credit int
}

// shanghai is UTC+8 all year: its days start at 16:00 UTC.
var shanghai = map[string]string{"a1": "Asia/Shanghai"}

// newRanksEnv starts the servers; the readers' clock starts at now.
func newRanksEnv(tb testing.TB, zones map[string]string, now time.Time) *ranksEnv {
	tb.Helper()
	db := testenv.NewDB(tb)
	rdb, prefix := testenv.NewRedis(tb)
	conn := testenv.NewJetStream(tb)
	pub, err := bus.NewPublisher(conn.JetStream(), bus.PublisherConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	clock := testenv.NewClock(now)
	return &ranksEnv{tb: tb, db: db, rdb: rdb, conn: conn, pub: pub, reg: reg, m: m, clock: clock, vers: map[string]int64{},
		cfg: Config{TimeZones: zones, KeyPrefix: prefix, Now: clock.Now}}
}

// room creates a room of app at version 1 and returns its id.
func (e *ranksEnv) room(app string) string {
	e.tb.Helper()
	id := app + "_" + uuid.NewString()
	ctx := context.Background()
	err := mysqldb.Update(ctx, e.db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO rooms (app_code, room_id, room_short_id, owner_user_id, status, room_version, created_at_ms, updated_at_ms)
			VALUES (?, ?, ?, ?, 'active', 1, 1, 1)`, app, id, fmt.Sprint("owner", len(e.vers)+1), len(e.vers)+1); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO room_command_log (app_code, room_id, room_version, command_id, command_type, command, created_at_ms)
			VALUES (?, ?, 1, 'create', 'CreateRoom', '{}', 1)`, app, id)
		return err
	})
	if err != nil {
		e.tb.Fatal(err)
	}
	e.vers[id] = 1
	return id
}

// gift commits a gift of value coins from sender to receiver in room at
// atMs, as the gift command does (no ledger row for value 0), and returns
// its RoomGiftSent event, not yet published.
func (e *ranksEnv) gift(app, room string, sender, receiver, value, atMs int64) bus.Envelope {
	e.tb.Helper()
	ctx := context.Background()
	e.credit++
	if value > 0 {
		if _, err := wallet.New(e.db, time.Now).Credit(ctx, app, sender, value, fmt.Sprint("topup-", e.credit), "test"); err != nil {
			e.tb.Fatal(err)
		}
	}
	v := e.vers[room] + 1
	cmd := fmt.Sprintf("gift-%d", v)
	err := mysqldb.Update(ctx, e.db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO room_command_log (app_code, room_id, room_version, command_id, command_type, actor_user_id, command, created_at_ms)
			VALUES (?, ?, ?, ?, 'SendGift', ?, '{}', ?)`, app, room, v, cmd, sender, atMs); err != nil {
			return err
		}
		if value == 0 {
			return nil
		}
		ok, err := wallet.DebitTx(ctx, tx, []wallet.Debit{{AppCode: app, UserID: sender, Amount: value, EntryKey: wallet.GiftEntryKey(room, cmd),
			RoomID: room, ReceiverUserID: receiver, AtMs: atMs}}, time.Now().UnixMilli(), nil)
		if err == nil && !ok[0] {
			err = fmt.Errorf("debit of %d refused", value)
		}
		return err
	})
	if err != nil {
		e.tb.Fatal(err)
	}
	e.vers[room] = v
	card, err := json.Marshal(roomevent.Card{Listing: roomevent.Listing{RoomID: room, Status: "active", CreatedAtMs: 1}, RoomVersion: v})
	if err != nil {
		e.tb.Fatal(err)
	}
	payload, err := roomevent.EncodePayload(card, roomevent.GiftSent{SenderUserID: sender, ReceiverUserID: receiver, GiftID: 1,
		GiftName: "Rose", Count: 1, Value: value, HeatDelta: value})
	if err != nil {
		e.tb.Fatal(err)
	}
	e.seq++
	return bus.Envelope{EventID: fmt.Sprintf("ev-%d", e.seq), AppCode: app, RoomID: room, RoomVersion: v,
		EventType: roomevent.RoomGiftSent, CommandID: cmd, OccurredAtMs: atMs, Payload: payload}
}

// publish stores events in ROOM_EVENTS.
func (e *ranksEnv) publish(envs ...bus.Envelope) {
	e.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, env := range envs {
		if _, err := e.pub.Publish(ctx, env); err != nil {
			e.tb.Fatal(err)
		}
	}
}

// again is env as published a second time (a relay's repeat after the
// stream's duplicate window): a new event id, the same room_version.
func again(env bus.Envelope) bus.Envelope {
	env.EventID += "-again"
	return env
}

// startProjector runs a projector until the test ends.
func (e *ranksEnv) startProjector() *Projector {
	e.tb.Helper()
	p, err := NewProjector(e.rdb, e.conn.JetStream(), ranksRun(), nil, e.cfg, testenv.Logger(e.tb), e.m)
	if err != nil {
		e.tb.Fatal(err)
	}
	testenv.Start(e.tb, p.Run)
	<-p.Running()
	return p
}

// newReader returns a reader over rdb (nil: MySQL only).
func (e *ranksEnv) newReader(rdb redis.UniversalClient) *Reader {
	e.tb.Helper()
	r, err := NewReader(e.db, rdb, e.cfg, testenv.Logger(e.tb), e.m)
	if err != nil {
		e.tb.Fatal(err)
	}
	return r
}

// read asks r for a rank of room as user.
func (e *ranksEnv) read(r *Reader, app, room string, user int64, by By, p Period) Page {
	e.tb.Helper()
	page, err := r.Read(context.Background(), Query{AppCode: app, RoomID: room, UserID: user, By: by, Period: p, Limit: MaxLimit})
	if err != nil {
		e.tb.Fatalf("read %s %s of %s: %v", by, p, room, err)
	}
	return page
}

// reads returns how many reads came from source.
func (e *ranksEnv) reads(source string) float64 {
	return testenv.MustMetric(e.tb, e.reg, "voiceroom_ranks_reads_total", "source", source)
}

// events returns how many gift events had result.
func (e *ranksEnv) events(result string) float64 {
	return testenv.MustMetric(e.tb, e.reg, "voiceroom_ranks_events_total", "result", result)
}

// fromRedis reads through r and returns the page once it came from Redis
// and equals want (the projector applies events asynchronously).
func (e *ranksEnv) fromRedis(r *Reader, app, room string, user int64, by By, p Period, want Page) {
	e.tb.Helper()
	testenv.Eventually(e.tb, 10*time.Second, func() error {
		before := e.reads(sourceRedis)
		got := e.read(r, app, room, user, by, p)
		if e.reads(sourceRedis) == before {
			return fmt.Errorf("%s %s answered from MySQL", by, p)
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("%s %s from redis\n%+v\nwant\n%+v", by, p, got, want)
		}
		return nil
	})
}

// items is a rank's items from (user, value) pairs, ranked in order.
func items(pairs ...int64) []Item {
	out := []Item{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, Item{UserID: pairs[i], Value: pairs[i+1], Rank: i/2 + 1})
	}
	return out
}

// localMs is the instant of a wall time in zone.
func localMs(tb testing.TB, zone string, y int, mo time.Month, d, h, mi, s, ms int) int64 {
	tb.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		tb.Fatal(err)
	}
	return time.Date(y, mo, d, h, mi, s, ms*int(time.Millisecond), loc).UnixMilli()
}

// ranksRun is the consume loop of the tests: retries after 50ms.
func ranksRun() bus.ConsumerRunConfig {
	return bus.ConsumerRunConfig{Durable: bus.DurableRoomRanks, NakDelays: []time.Duration{50 * time.Millisecond}}
}

// mustApply applies env as the projector does and checks its outcome.
func mustApply(tb testing.TB, p *Projector, env bus.Envelope, want string) {
	tb.Helper()
	got, err := p.apply(context.Background(), env)
	if err != nil || got != want {
		tb.Fatalf("apply %s@%d: %q %v, want %q", env.RoomID, env.RoomVersion, got, err, want)
	}
}
