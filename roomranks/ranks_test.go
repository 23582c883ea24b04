package roomranks

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
)

// A Tuesday noon in Shanghai (04:00 UTC).
var tuesdayNoon = time.UnixMilli(localMsAt("Asia/Shanghai", 2027, time.January, 5, 12))

func localMsAt(zone string, y int, mo time.Month, d, h int) int64 {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		panic(err)
	}
	return time.Date(y, mo, d, h, 0, 0, 0, loc).UnixMilli()
}

// TestGiftCountedOnceWhenDeliveredTwice: a gift event delivered again
// (published a second time, as a relay does after the stream's duplicate
// window) changes no rank; the ledger row names the receiver and carries
// the command's time.
func TestGiftCountedOnceWhenDeliveredTwice(t *testing.T) {
	e := newRanksEnv(t, shanghai, tuesdayNoon)
	room := e.room("a1")
	r := e.newReader(e.rdb)
	for _, by := range []By{BySender, ByReceiver} {
		for _, p := range []Period{Day, Week} {
			e.read(r, "a1", room, 11, by, p) // fills the empty sets
		}
	}
	e.startProjector()
	at := tuesdayNoon.UnixMilli() - 60_000
	g := e.gift("a1", room, 11, 21, 100, at)
	e.publish(g)
	mine := Page{RoomID: room, By: BySender, Period: Day, TimeZone: "Asia/Shanghai", Items: items(11, 100), Me: &Place{Rank: 1, Value: 100}}
	w := e.newReader(nil).cal.Window("a1", Day, tuesdayNoon.UnixMilli())
	mine.PeriodStartMs, mine.PeriodEndMs = w.StartMs, w.EndMs
	e.fromRedis(r, "a1", room, 11, BySender, Day, mine)
	if got := e.events(resultApplied); got != 1 {
		t.Fatalf("applied %v events, want 1", got)
	}

	e.publish(again(g))
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := e.events(resultDuplicate); got != 1 {
			return fmt.Errorf("duplicates %v, want 1", got)
		}
		return nil
	})
	e.fromRedis(r, "a1", room, 11, BySender, Day, mine)
	theirs := e.read(r, "a1", room, 21, ByReceiver, Week)
	if !reflect.DeepEqual(theirs.Items, items(21, 100)) || theirs.Me == nil || theirs.Me.Value != 100 {
		t.Fatalf("receiver week %+v", theirs)
	}
	if got := testenv.Scalar[int64](t, e.db, `SELECT peer_user_id FROM wallet_ledger WHERE app_code = 'a1' AND room_id = ?`, room); got != 21 {
		t.Fatalf("ledger receiver %d, want 21", got)
	}
	if got := testenv.Scalar[int64](t, e.db, `SELECT created_at_ms FROM wallet_ledger WHERE app_code = 'a1' AND room_id = ?`, room); got != at {
		t.Fatalf("ledger time %d, want the command's %d", got, at)
	}
	if got := e.read(e.newReader(nil), "a1", room, 11, BySender, Day); !reflect.DeepEqual(got, mine) {
		t.Fatalf("mysql answers %+v, redis %+v", got, mine)
	}
}

// TestFillRacesTheConsumer walks the orders in which a fill from MySQL
// and the consumer can meet, one step at a time: a gift the consumer
// handled between the fill's MySQL read and its Redis write, a gift the
// snapshot holds that the consumer handles after the fill, repeats of
// both. Each gift counts once.
func TestFillRacesTheConsumer(t *testing.T) {
	e := newRanksEnv(t, shanghai, tuesdayNoon)
	ctx := context.Background()
	room := e.room("a1")
	r := e.newReader(e.rdb)
	p := newTestProjector(t, e)
	now := tuesdayNoon.UnixMilli()
	day := r.cal.Window("a1", Day, now)

	g2 := e.gift("a1", room, 11, 21, 100, now-3000)
	snap, err := loadSums(ctx, e.db, "a1", room, BySender, day) // holds g2, at version 2
	if err != nil || snap.version != 2 {
		t.Fatalf("snapshot %+v %v", snap, err)
	}
	g3 := e.gift("a1", room, 12, 21, 30, now-2000)
	mustApply(t, p, g3, resultUncached) // no set yet: journaled
	if res, err := r.cache.fill(ctx, "a1", room, BySender, day, snap, false, now); err != nil || res != fillFilled {
		t.Fatalf("fill: %s %v", res, err)
	}
	mustApply(t, p, g2, resultDuplicate) // in the snapshot
	mustApply(t, p, g3, resultDuplicate) // in the journal
	g4 := e.gift("a1", room, 11, 22, 5, now-1000)
	mustApply(t, p, g4, resultApplied)
	mustApply(t, p, g4, resultDuplicate)
	if res, err := r.cache.fill(ctx, "a1", room, BySender, day, snap, false, now); err != nil || res != fillExists {
		t.Fatalf("second fill: %s %v", res, err)
	}
	want := e.read(e.newReader(nil), "a1", room, 11, BySender, Day)
	if !reflect.DeepEqual(want.Items, items(11, 105, 12, 30)) {
		t.Fatalf("mysql %+v", want.Items)
	}
	e.fromRedis(r, "a1", room, 11, BySender, Day, want)
}

// TestFillsWhileGiftsFlow: gifts of several senders flow through the
// consumer while readers keep dropping and refilling the sets; once the
// gifts stop, the sets in Redis answer what MySQL answers.
func TestFillsWhileGiftsFlow(t *testing.T) {
	e := newRanksEnv(t, shanghai, tuesdayNoon)
	room := e.room("a1")
	r := e.newReader(e.rdb)
	e.startProjector()
	now := tuesdayNoon.UnixMilli()
	k := newRoomKeys(e.cfg.KeyPrefix, "a1", room)
	day, week := r.cal.Window("a1", Day, now), r.cal.Window("a1", Week, now)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx := context.Background()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, by := range []By{BySender, ByReceiver} {
				for _, w := range []Window{day, week} {
					e.rdb.Del(ctx, k.set(by, w))
					if _, err := r.Read(ctx, Query{AppCode: "a1", RoomID: room, UserID: 1, By: by, Period: w.Period, Limit: 10}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}
	}()
	const n = 120
	for i := range n {
		e.publish(e.gift("a1", room, int64(11+i%4), int64(21+i%3), int64(1+i%7), now-int64(n-i)))
	}
	close(stop)
	wg.Wait()
	testenv.Eventually(t, 20*time.Second, func() error {
		handled := e.events(resultApplied) + e.events(resultUncached) + e.events(resultDuplicate) + e.events(resultInvalidated)
		if handled != n {
			return fmt.Errorf("%v of %d events handled", handled, n)
		}
		return nil
	})
	mysql := e.newReader(nil)
	for _, by := range []By{BySender, ByReceiver} {
		for _, p := range []Period{Day, Week} {
			want := e.read(mysql, "a1", room, 12, by, p)
			if len(want.Items) == 0 {
				t.Fatalf("%s %s: no gifts in MySQL", by, p)
			}
			e.fromRedis(r, "a1", room, 12, by, p, want)
		}
	}
}

// TestJournalOverflow: with more gifts after an event than the journal
// keeps, a late copy of it (applied or not) drops the sets it cannot
// vouch for, which fill again from MySQL; a fill whose MySQL read is
// older than the journal's floor is not stored.
func TestJournalOverflow(t *testing.T) {
	e := newRanksEnv(t, shanghai, tuesdayNoon)
	e.cfg.JournalSize = 16
	ctx := context.Background()
	room := e.room("a1")
	r := e.newReader(e.rdb)
	p := newTestProjector(t, e)
	now := tuesdayNoon.UnixMilli()
	day := r.cal.Window("a1", Day, now)
	e.read(r, "a1", room, 1, BySender, Day) // the set, empty, at version 1
	early := e.gift("a1", room, 11, 21, 100, now-100)
	mustApply(t, p, early, resultApplied)
	held := e.gift("a1", room, 12, 21, 7, now-99) // delivered only at the end
	snap, err := loadSums(ctx, e.db, "a1", room, ByReceiver, day)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		mustApply(t, p, e.gift("a1", room, 13, 22, 1, now-98+int64(i)), resultApplied)
	}
	if res, err := r.cache.fill(ctx, "a1", room, ByReceiver, day, snap, false, now); err != nil || res != fillBehind {
		t.Fatalf("fill older than the floor: %s %v", res, err)
	}
	mustApply(t, p, early, resultInvalidated) // applied, but the journal forgot it
	before := e.reads(sourceMySQL)
	want := e.read(e.newReader(nil), "a1", room, 11, BySender, Day)
	if got := e.read(r, "a1", room, 11, BySender, Day); !reflect.DeepEqual(got, want) || e.reads(sourceMySQL) != before+2 {
		t.Fatalf("after the drop: %+v from mysql %v times, want %+v", got, e.reads(sourceMySQL)-before, want)
	}
	mustApply(t, p, held, resultDuplicate) // the refill counted it
	e.fromRedis(r, "a1", room, 11, BySender, Day, want)
	if !reflect.DeepEqual(want.Items, items(11, 100, 13, 20, 12, 7)) {
		t.Fatalf("mysql %+v", want.Items)
	}
}

// TestDayAndWeekBoundaries: in Shanghai (UTC+8) a gift at Sunday
// 23:59:59.999 counts in Sunday and its week, one at Monday 00:00 in a
// new day and a new week that start empty; the projector puts each event
// in its own period's sets by occurred_at_ms, whatever the clock says
// when it arrives.
func TestDayAndWeekBoundaries(t *testing.T) {
	const z = "Asia/Shanghai"
	sundayLast := localMs(t, z, 2027, time.January, 10, 23, 59, 59, 999)
	mondayFirst := localMs(t, z, 2027, time.January, 11, 0, 0, 0, 0)
	weekFirst := localMs(t, z, 2027, time.January, 4, 0, 0, 0, 0)
	weekBefore := weekFirst - 1
	e := newRanksEnv(t, shanghai, time.UnixMilli(sundayLast))
	room := e.room("a1")
	sunday := e.newReader(e.rdb)
	mondayCfg := e.cfg
	mondayCfg.Now = testenv.NewClock(time.UnixMilli(mondayFirst)).Now
	monday, err := NewReader(e.db, e.rdb, mondayCfg, testenv.Logger(t), e.m)
	if err != nil {
		t.Fatal(err)
	}
	for _, rd := range []*Reader{sunday, monday} {
		for _, by := range []By{BySender, ByReceiver} {
			for _, p := range []Period{Day, Week} {
				e.read(rd, "a1", room, 11, by, p) // every set there, empty, before the gifts
			}
		}
	}
	e.startProjector()
	e.publish(e.gift("a1", room, 14, 21, 1000, weekBefore), e.gift("a1", room, 13, 21, 7, weekFirst),
		e.gift("a1", room, 11, 21, 100, sundayLast), e.gift("a1", room, 12, 22, 50, mondayFirst))

	mysqlSunday, err := NewReader(e.db, nil, e.cfg, testenv.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	mysqlMonday, err := NewReader(e.db, nil, mondayCfg, testenv.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name       string
		rd, mysql  *Reader
		by         By
		p          Period
		start, end int64
		want       []Item
	}{
		{"sunday day", sunday, mysqlSunday, BySender, Day, localMs(t, z, 2027, time.January, 10, 0, 0, 0, 0), mondayFirst, items(11, 100)},
		{"sunday week", sunday, mysqlSunday, BySender, Week, weekFirst, mondayFirst, items(11, 100, 13, 7)},
		{"sunday week received", sunday, mysqlSunday, ByReceiver, Week, weekFirst, mondayFirst, items(21, 107)},
		{"monday day", monday, mysqlMonday, BySender, Day, mondayFirst, localMs(t, z, 2027, time.January, 12, 0, 0, 0, 0), items(12, 50)},
		{"monday week", monday, mysqlMonday, BySender, Week, mondayFirst, localMs(t, z, 2027, time.January, 18, 0, 0, 0, 0), items(12, 50)},
		{"monday day received", monday, mysqlMonday, ByReceiver, Day, mondayFirst, localMs(t, z, 2027, time.January, 12, 0, 0, 0, 0), items(22, 50)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := Page{RoomID: room, By: tt.by, Period: tt.p, TimeZone: z, PeriodStartMs: tt.start, PeriodEndMs: tt.end, Items: tt.want}
			if got := e.read(tt.mysql, "a1", room, 99, tt.by, tt.p); !reflect.DeepEqual(got, want) {
				t.Fatalf("mysql: %+v, want %+v", got, want)
			}
			e.fromRedis(tt.rd, "a1", room, 99, tt.by, tt.p, want)
		})
	}
}

// TestCalendar: days and weeks of an app's zone, across a daylight-saving
// change (Berlin's 23-hour day), and UTC for an app without a zone.
func TestCalendar(t *testing.T) {
	c, err := NewCalendar(map[string]string{"de": "Europe/Berlin", "cn": "Asia/Shanghai"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		app, zone  string
		p          Period
		at         int64
		start, end int64
	}{
		{"de", "Europe/Berlin", Day, localMs(t, "Europe/Berlin", 2027, time.March, 28, 12, 0, 0, 0),
			localMs(t, "Europe/Berlin", 2027, time.March, 28, 0, 0, 0, 0), localMs(t, "Europe/Berlin", 2027, time.March, 29, 0, 0, 0, 0)},
		{"de", "Europe/Berlin", Week, localMs(t, "Europe/Berlin", 2027, time.March, 28, 23, 59, 59, 999),
			localMs(t, "Europe/Berlin", 2027, time.March, 22, 0, 0, 0, 0), localMs(t, "Europe/Berlin", 2027, time.March, 29, 0, 0, 0, 0)},
		{"cn", "Asia/Shanghai", Week, localMs(t, "Asia/Shanghai", 2027, time.January, 4, 0, 0, 0, 0),
			localMs(t, "Asia/Shanghai", 2027, time.January, 4, 0, 0, 0, 0), localMs(t, "Asia/Shanghai", 2027, time.January, 11, 0, 0, 0, 0)},
		{"other", "UTC", Day, localMs(t, "UTC", 2027, time.January, 4, 23, 0, 0, 0),
			localMs(t, "UTC", 2027, time.January, 4, 0, 0, 0, 0), localMs(t, "UTC", 2027, time.January, 5, 0, 0, 0, 0)},
	} {
		w := c.Window(tt.app, tt.p, tt.at)
		if w.StartMs != tt.start || w.EndMs != tt.end || c.Location(tt.app).String() != tt.zone {
			t.Errorf("%s %s at %d: [%d, %d) in %s, want [%d, %d) in %s", tt.app, tt.p, tt.at, w.StartMs, w.EndMs, c.Location(tt.app), tt.start, tt.end, tt.zone)
		}
	}
	if d := c.Window("de", Day, localMs(t, "Europe/Berlin", 2027, time.March, 28, 12, 0, 0, 0)); d.EndMs-d.StartMs != 23*3600*1000 {
		t.Errorf("Berlin's spring-forward day lasts %v", time.Duration(d.EndMs-d.StartMs)*time.Millisecond)
	}
	for _, zones := range []map[string]string{{"de": "Mars/Olympus"}, {"bad app": "UTC"}, {"de": ""}} {
		if err := (Config{TimeZones: zones}).Validate(); apperr.ConfigFieldOf(err) != "TimeZones" {
			t.Errorf("zones %v: %v, want an error on TimeZones", zones, err)
		}
	}
}

// TestCallersPlace: ties order by user id, the caller's place is given
// beyond the limit, and a caller without coins has none; Redis and MySQL
// agree.
func TestCallersPlace(t *testing.T) {
	e := newRanksEnv(t, nil, tuesdayNoon)
	room := e.room("a1")
	r := e.newReader(e.rdb)
	e.read(r, "a1", room, 1, BySender, Week)
	e.startProjector()
	now := tuesdayNoon.UnixMilli()
	e.publish(e.gift("a1", room, 32, 40, 100, now-5), e.gift("a1", room, 31, 40, 60, now-4), e.gift("a1", room, 33, 40, 300, now-3),
		e.gift("a1", room, 31, 40, 40, now-2))
	mysql := e.newReader(nil)
	want := e.read(mysql, "a1", room, 32, BySender, Week)
	if !reflect.DeepEqual(want.Items, items(33, 300, 31, 100, 32, 100)) || !reflect.DeepEqual(want.Me, &Place{Rank: 3, Value: 100}) {
		t.Fatalf("mysql %+v me %+v", want.Items, want.Me)
	}
	e.fromRedis(r, "a1", room, 32, BySender, Week, want)
	for _, rd := range []*Reader{r, mysql} {
		top, err := rd.Read(context.Background(), Query{AppCode: "a1", RoomID: room, UserID: 32, By: BySender, Period: Week, Limit: 1})
		if err != nil || !reflect.DeepEqual(top.Items, items(33, 300)) || !reflect.DeepEqual(top.Me, &Place{Rank: 3, Value: 100}) {
			t.Fatalf("limit 1: %+v %v", top, err)
		}
		nobody := e.read(rd, "a1", room, 99, BySender, Week)
		if nobody.Me != nil || nobody.TimeZone != "UTC" {
			t.Fatalf("a caller without coins: %+v", nobody)
		}
	}
}

// TestReadsWithoutRedis: with the set's keys deleted, or with Redis
// stopped, the answer comes from MySQL and is the same; once Redis is
// back (empty) the next reads fill the set again and answer from it.
func TestReadsWithoutRedis(t *testing.T) {
	e := newRanksEnv(t, shanghai, tuesdayNoon)
	srv := testenv.RunRedis(t)
	own := srv.Client()
	room := e.room("a1")
	now := tuesdayNoon.UnixMilli()
	for _, g := range [][3]int64{{11, 21, 10}, {12, 21, 20}, {11, 22, 5}} {
		e.gift("a1", room, g[0], g[1], g[2], now-1000)
	}
	want := e.read(e.newReader(nil), "a1", room, 11, ByReceiver, Day)
	if !reflect.DeepEqual(want.Items, items(21, 30, 22, 5)) {
		t.Fatalf("mysql %+v", want.Items)
	}

	t.Run("keys deleted", func(t *testing.T) {
		r := e.newReader(e.rdb)
		e.read(r, "a1", room, 11, ByReceiver, Day)
		e.fromRedis(r, "a1", room, 11, ByReceiver, Day, want)
		k := newRoomKeys(e.cfg.KeyPrefix, "a1", room)
		w := r.cal.Window("a1", Day, now)
		for _, keys := range [][]string{{k.set(ByReceiver, w)}, {k.set(ByReceiver, w), k.journal(), k.floor()}} {
			if err := e.rdb.Del(context.Background(), keys...).Err(); err != nil {
				t.Fatal(err)
			}
			before := e.reads(sourceMySQL)
			if got := e.read(r, "a1", room, 11, ByReceiver, Day); !reflect.DeepEqual(got, want) || e.reads(sourceMySQL) != before+1 {
				t.Fatalf("%v deleted: %+v (from mysql: %v), want %+v", keys, got, e.reads(sourceMySQL)-before, want)
			}
			e.fromRedis(r, "a1", room, 11, ByReceiver, Day, want)
		}
	})

	t.Run("redis stopped", func(t *testing.T) {
		r := e.newReader(own)
		e.read(r, "a1", room, 11, ByReceiver, Day)
		e.fromRedis(r, "a1", room, 11, ByReceiver, Day, want)
		srv.Stop()
		failures := testenv.MustMetric(t, e.reg, "voiceroom_ranks_redis_failures_total", "op", opRead)
		for range 3 {
			before := e.reads(sourceMySQL)
			if got := e.read(r, "a1", room, 11, ByReceiver, Day); !reflect.DeepEqual(got, want) || e.reads(sourceMySQL) != before+1 {
				t.Fatalf("redis stopped: %+v, want %+v from mysql", got, want)
			}
		}
		if got := testenv.MustMetric(t, e.reg, "voiceroom_ranks_redis_failures_total", "op", opRead); got != failures+1 {
			t.Fatalf("%v failed redis calls, want 1: the reads after it leave redis alone", got-failures)
		}
		srv.Start()
		e.fromRedis(r, "a1", room, 11, ByReceiver, Day, want) // probed, refilled, read
	})
}

// TestRebuild: a set that went wrong (a lost event, a restored snapshot)
// and a lost set are rebuilt from MySQL; a room of another app is refused.
func TestRebuild(t *testing.T) {
	e := newRanksEnv(t, shanghai, tuesdayNoon)
	ctx := context.Background()
	room, quiet := e.room("a1"), e.room("a1")
	r := e.newReader(e.rdb)
	now := tuesdayNoon.UnixMilli()
	e.gift("a1", room, 11, 21, 10, now-1000)
	e.gift("a1", room, 12, 22, 20, now-1000)
	mysql := e.newReader(nil)
	want := map[string]Page{}
	for _, by := range []By{BySender, ByReceiver} {
		for _, p := range []Period{Day, Week} {
			want[string(by)+string(p)] = e.read(mysql, "a1", room, 11, by, p)
			e.read(r, "a1", room, 11, by, p)
		}
	}
	k := newRoomKeys(e.cfg.KeyPrefix, "a1", room)
	day, week := r.cal.Window("a1", Day, now), r.cal.Window("a1", Week, now)
	e.rdb.ZIncrBy(ctx, k.set(BySender, day), 1000, member(11))
	e.rdb.Del(ctx, k.set(ByReceiver, week))
	res, err := Rebuild(ctx, e.db, e.rdb, e.cfg, "a1", "", testenv.Logger(t))
	if err != nil || res != (RebuildResult{AppCode: "a1", Rooms: 1, Sets: 4}) {
		t.Fatalf("rebuild: %+v %v (room %s has no gift: not rebuilt)", res, err, quiet)
	}
	for _, by := range []By{BySender, ByReceiver} {
		for _, p := range []Period{Day, Week} {
			e.fromRedis(r, "a1", room, 11, by, p, want[string(by)+string(p)])
		}
	}
	if res, err := Rebuild(ctx, e.db, e.rdb, e.cfg, "a1", quiet, nil); err != nil || res.Sets != 4 {
		t.Fatalf("rebuild of one room: %+v %v", res, err)
	}
	if _, err := Rebuild(ctx, e.db, e.rdb, e.cfg, "a2", room, nil); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("another app's room: %v", err)
	}
	if _, err := Rebuild(ctx, e.db, e.rdb, e.cfg, "a1", "a1_nosuchroom", nil); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("no such room: %v", err)
	}
}

// TestZeroValueAndBadReads: a gift of price 0 has no ledger row and counts
// nothing; a bad limit is INVALID_ARGUMENT, an unknown room NOT_FOUND.
func TestZeroValueAndBadReads(t *testing.T) {
	e := newRanksEnv(t, shanghai, tuesdayNoon)
	room := e.room("a1")
	r := e.newReader(e.rdb)
	e.read(r, "a1", room, 1, BySender, Day)
	e.startProjector()
	e.publish(e.gift("a1", room, 11, 21, 0, tuesdayNoon.UnixMilli()-10))
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := e.events(resultZero); got != 1 {
			return fmt.Errorf("zero-value events %v", got)
		}
		return nil
	})
	if got := e.read(r, "a1", room, 11, BySender, Day); len(got.Items) != 0 || got.Me != nil {
		t.Fatalf("a free gift counted: %+v", got)
	}
	if n := testenv.Scalar[int64](t, e.db, `SELECT COUNT(*) FROM wallet_ledger WHERE room_id = ?`, room); n != 0 {
		t.Fatalf("%d ledger rows for a free gift", n)
	}
	ctx := context.Background()
	for _, tt := range []struct {
		q    Query
		code apperr.Code
	}{
		{Query{AppCode: "a1", RoomID: room, By: BySender, Period: Day, Limit: 0}, apperr.InvalidArgument},
		{Query{AppCode: "a1", RoomID: room, By: BySender, Period: Day, Limit: MaxLimit + 1}, apperr.InvalidArgument},
		{Query{AppCode: "a1", RoomID: room, By: "both", Period: Day, Limit: 1}, apperr.InvalidArgument},
		{Query{AppCode: "a1", RoomID: room, By: BySender, Period: "month", Limit: 1}, apperr.InvalidArgument},
		{Query{AppCode: "a1", RoomID: "a1_nosuchroom", By: BySender, Period: Day, Limit: 1}, apperr.NotFound},
		{Query{AppCode: "a2", RoomID: room, By: BySender, Period: Day, Limit: 1}, apperr.NotFound},
	} {
		if _, err := r.Read(ctx, tt.q); !apperr.Is(err, tt.code) {
			t.Errorf("%+v: %v, want %s", tt.q, err, tt.code)
		}
	}
}

// TestSumsReadTheIndexOnly: both rank queries range over
// idx_ledger_room and read nothing else of wallet_ledger.
func TestSumsReadTheIndexOnly(t *testing.T) {
	db := testenv.NewDB(t)
	// A ledger of many rooms and many credits, as in production.
	for batch := range 20 {
		q := `INSERT INTO wallet_ledger (app_code, entry_key, user_id, peer_user_id, delta, kind, room_id, created_at_ms) VALUES `
		var args []any
		for i := range 500 {
			n := batch*500 + i
			if i > 0 {
				q += ","
			}
			if n%3 == 0 {
				q += "(?, ?, ?, 0, 100, 'credit', '', ?)"
				args = append(args, "a1", fmt.Sprint("credit:", n), n%50, n)
				continue
			}
			q += "(?, ?, ?, ?, -10, 'gift', ?, ?)"
			args = append(args, "a1", fmt.Sprint("gift:", n), n%50, n%40+1, fmt.Sprint("a1_r", n%100), n)
		}
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`ANALYZE TABLE wallet_ledger`); err != nil {
		t.Fatal(err)
	}
	for _, by := range []By{BySender, ByReceiver} {
		plan := testenv.Explain(t, db, sumsQuery(by), "a1", "a1_r7", "a1", "a1_r7", "a1", "a1_r7", 1000, 5000)
		found := false
		for _, row := range plan {
			if row["table"] != "wallet_ledger" {
				continue
			}
			found = true
			if row["key"] != "idx_ledger_room" || row["type"] != "range" || !strings.Contains(row["Extra"], "Using index") {
				t.Errorf("%s: wallet_ledger read by %s of %q (%s), want a range of idx_ledger_room alone", by, row["type"], row["key"], row["Extra"])
			}
		}
		if !found {
			t.Errorf("%s: no wallet_ledger in the plan %v", by, plan)
		}
	}
}

// newTestProjector is a projector the test calls by hand (not consuming).
func newTestProjector(tb testing.TB, e *ranksEnv) *Projector {
	tb.Helper()
	p, err := NewProjector(e.rdb, e.conn.JetStream(), ranksRun(), nil, e.cfg, testenv.Logger(tb), e.m)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
