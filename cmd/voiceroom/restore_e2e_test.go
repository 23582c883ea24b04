package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"voiceroom/internal/testenv"
)

// eventLog is a webhook receiver's record of the event ids it was sent,
// in arrival order.
type eventLog struct {
	mu  sync.Mutex
	ids []string
}

func (l *eventLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	l.mu.Lock()
	l.ids = append(l.ids, strings.Split(r.Header.Get("Voiceroom-Event-Ids"), ",")...)
	l.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// since returns the ids received after the first n.
func (l *eventLog) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ids[n:])
}

func (l *eventLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ids)
}

// TestBackupRestoreDrill is the backup and restore drill of docs/backup.md,
// run end to end: a deployment A serves an app (regions, users, rooms with
// members and seats, a closed room, coins, gifts and ranks, a pin, a
// webhook endpoint); `voiceroom backup` dumps its database while it
// serves, with three outbox rows its relay has not published yet;
// `voiceroom restore` loads the dump into an empty database of a fresh
// deployment B (its own JetStream and an empty Redis database) and
// rebuilds the list and the ranks; B's serve then re-provisions the
// streams and its relay publishes the three rows, which reach B's stream
// and the webhook endpoint. What the API shows in B (the rooms, the lists
// of each region, the ranks, the wallets, the operators' room list and
// pins) equals what it showed in A.
func TestBackupRestoreDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two deployments and the MariaDB client; skipped with -short")
	}
	for _, tool := range [][]string{{"mariadb-dump", "mysqldump"}, {"mariadb", "mysql"}} {
		if _, _, err := mysqlTool(tool...); err != nil {
			t.Skipf("the drill needs the MariaDB client tools: %v", err)
		}
	}
	receiver := &eventLog{}
	hooks := httptest.NewServer(receiver)
	t.Cleanup(hooks.Close)
	app := "drill" + hex.EncodeToString(randomBytes(4))
	shared := []string{
		// Both deployments share the keys, as a restored one must: the
		// JWT key signs the tokens (and the list's cursors), the
		// webhooks key opens the endpoints' secrets restored from MySQL.
		"VOICEROOM_WEBHOOKS_SECRET_KEY=" + hex.EncodeToString(randomBytes(32)),
		"VOICEROOM_WEBHOOKS_ALLOW_HTTP=true", "VOICEROOM_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES=true",
		// Nobody sends heartbeats here: keep the members present.
		"VOICEROOM_ROOMS_PRESENCE_TTL=1h",
		// The comparisons below read much, again and again.
		"VOICEROOM_HTTP_RATE_PER_USER=10000", "VOICEROOM_HTTP_RATE_BURST=10000",
	}
	// A's relay is off: its fast path publishes every event, and the rows
	// the test sets back to pending stay so, as behind a lagging relay.
	pa, varsA := startServe(t, append(shared, "VOICEROOM_OUTBOX_ENABLED=false")...)
	baseA := pa.waitServing(t, varsA)
	waitReady(t, pa, baseA)
	c := &client{t: t, base: baseA, secret: []byte(varsA["VOICEROOM_JWT_SECRET"]), app: app}

	// --- A: an app in use.
	var sea, mena struct {
		RegionID int64 `json:"region_id"`
	}
	c.ok("POST", "/admin/v1/regions", "admin", `{"region_code":"SEA","name":"South-East Asia"}`, &sea)
	c.ok("POST", "/admin/v1/regions", "admin", `{"region_code":"MENA","name":"Middle East"}`, &mena)
	c.ok("POST", "/admin/v1/countries", "admin", fmt.Sprintf(`{"country_code":"SG","name":"Singapore","region_id":%d}`, sea.RegionID), nil)
	c.ok("POST", "/admin/v1/countries", "admin", fmt.Sprintf(`{"country_code":"SA","name":"Saudi Arabia","region_id":%d}`, mena.RegionID), nil)
	users := map[string]string{"11": "SG", "12": "SG", "13": "SA", "14": "SA"}
	for u, country := range users {
		c.ok("PUT", "/api/v1/users/me", u, `{"display_user_id":"drill`+u+`","country":"`+country+`"}`, nil)
	}
	c.ok("POST", "/admin/v1/webhooks", "admin", `{"url":"`+hooks.URL+`/hooks"}`, nil)

	var r1, r2, r3 roomView
	c.ok("POST", "/api/v1/rooms/create", "11", `{"room_name":"Night owls"}`, &r1)
	c.ok("POST", "/api/v1/rooms/create", "13", `{"room_name":"Desert radio"}`, &r2)
	c.ok("POST", "/api/v1/rooms/create", "12", `{"room_name":"Closed soon"}`, &r3)
	p1, p2, p3 := "/api/v1/rooms/"+r1.RoomID, "/api/v1/rooms/"+r2.RoomID, "/api/v1/rooms/"+r3.RoomID
	for _, j := range []struct{ room, user string }{{p1, "11"}, {p1, "12"}, {p1, "13"}, {p2, "13"}, {p2, "14"}, {p3, "12"}} {
		c.ok("POST", j.room+"/join", j.user, ``, nil)
	}
	c.ok("POST", p1+"/mic/up", "12", `{"seat_index":2}`, nil)
	c.ok("POST", p3+"/close", "12", ``, nil)
	c.ok("POST", "/admin/v1/gifts", "admin", `{"gift_id":7,"name":"Rocket","price":100,"heat":40}`, nil)
	c.ok("POST", "/admin/v1/wallets/12/credit", "admin", `{"amount":1000,"idempotency_key":"drill-12"}`, nil)
	c.ok("POST", "/admin/v1/wallets/13/credit", "admin", `{"amount":500,"idempotency_key":"drill-13"}`, nil)
	c.ok("POST", p1+"/gift", "12", `{"gift_id":7,"count":3,"receiver_user_id":11}`, nil)
	c.ok("POST", p1+"/gift", "13", `{"gift_id":7,"count":1,"receiver_user_id":12}`, nil)
	c.ok("POST", p2+"/gift", "13", `{"gift_id":7,"count":2,"receiver_user_id":14}`, nil)
	c.ok("POST", "/admin/v1/pins", "admin", fmt.Sprintf(`{"room_id":%q,"visible_region_id":%d,"weight":100,"expires_at_ms":%d}`,
		r1.RoomID, sea.RegionID, time.Now().Add(24*time.Hour).UnixMilli()), nil)

	// What the API shows, as each kind of reader sees it.
	type read struct{ path, as string }
	reads := []read{
		{p1, "11"}, {p2, "13"}, {p3, "12"},
		{"/api/v1/rooms?tab=new&limit=50", "11"}, {"/api/v1/rooms?tab=new&limit=50", "13"},
		{"/api/v1/rooms?tab=hot&limit=50", "12"}, {"/api/v1/rooms?tab=hot&limit=50", "14"},
		{"/api/v1/wallet", "11"}, {"/api/v1/wallet", "12"}, {"/api/v1/wallet", "13"}, {"/api/v1/wallet", "14"},
		{"/admin/v1/rooms?visible_region_id=" + fmt.Sprint(sea.RegionID), "admin"},
		{"/admin/v1/rooms?visible_region_id=" + fmt.Sprint(mena.RegionID), "admin"},
		{"/admin/v1/pins?visible_region_id=" + fmt.Sprint(sea.RegionID), "admin"},
	}
	for _, room := range []string{p1, p2} {
		for _, q := range []string{"by=sender&period=day", "by=receiver&period=day", "by=sender&period=week", "by=receiver&period=week"} {
			reads = append(reads, read{room + "/ranks?" + q, "12"})
		}
	}
	shows := func(c *client) map[read]string {
		out := map[read]string{}
		for _, r := range reads {
			var data json.RawMessage
			if status, code := c.call("GET", r.path, r.as, ``, &data); status != 200 {
				t.Fatalf("GET %s as %s: %d %s", r.path, r.as, status, code)
			}
			var buf bytes.Buffer
			if err := json.Indent(&buf, data, "", " "); err != nil {
				t.Fatal(err)
			}
			out[r] = buf.String()
		}
		return out
	}
	// The list is eventually consistent: wait until it shows the pinned
	// room with its members and not the closed one.
	var before map[read]string
	testenv.Eventually(t, 30*time.Second, func() error {
		before = shows(c)
		list := before[read{"/api/v1/rooms?tab=new&limit=50", "11"}]
		if !strings.Contains(list, r1.RoomID) || strings.Contains(list, r3.RoomID) || !strings.Contains(list, `"online_count": 3`) {
			return fmt.Errorf("the SG list is not there yet:\n%s", list)
		}
		if hot := before[read{"/api/v1/rooms?tab=hot&limit=50", "14"}]; !strings.Contains(hot, r2.RoomID) || !strings.Contains(hot, `"online_count": 2`) {
			return fmt.Errorf("the SA list is not there yet:\n%s", hot)
		}
		return nil
	})

	// Three rows the relay has not published, then the dump, while A serves.
	dbA, err := sql.Open("mysql", varsA["VOICEROOM_MYSQL_DSN"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbA.Close() })
	rows, err := dbA.Query(`SELECT event_id FROM room_outbox WHERE app_code = ? ORDER BY id DESC LIMIT 3`, app)
	if err != nil {
		t.Fatal(err)
	}
	var lagging []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		lagging = append(lagging, id)
	}
	if err := rows.Err(); err != nil || len(lagging) != 3 {
		t.Fatalf("the newest outbox rows: %v %v", lagging, err)
	}
	rows.Close()
	testenv.Exec(t, dbA, fmt.Sprintf(`UPDATE room_outbox SET status = 'pending', published_at_ms = NULL WHERE event_id IN ('%s')`,
		strings.Join(lagging, "','")))
	// The read model is derived and may lag the rooms in a dump (a
	// projector behind): restore rebuilds it from the rooms.
	testenv.Exec(t, dbA, `UPDATE room_list_entries SET online_count = 0, occupied_seat_count = 0, heat = 0, room_version = 1,
		status = 'active' WHERE app_code = '`+app+`'`)
	dump := filepath.Join(t.TempDir(), "voiceroom.sql.gz")
	if code, out := runCommand(t, varsA, "backup", "--out", dump); code != 0 {
		t.Fatalf("backup: exit %d\n%s", code, out)
	}

	// --- B: a fresh deployment (an empty database, its own JetStream in a
	// new data dir, an empty Redis database), restored from the dump.
	dsnB, err := mysql.ParseDSN(varsA["VOICEROOM_MYSQL_DSN"])
	if err != nil {
		t.Fatal(err)
	}
	dsnB.DBName += "_restored"
	t.Cleanup(func() { dbA.Exec("DROP DATABASE IF EXISTS `" + dsnB.DBName + "`") })
	varsB := map[string]string{}
	for k, v := range varsA {
		varsB[k] = v
	}
	delete(varsB, "VOICEROOM_OUTBOX_ENABLED")
	varsB["VOICEROOM_MYSQL_DSN"] = dsnB.FormatDSN()
	varsB["VOICEROOM_DATA_DIR"] = t.TempDir()
	varsB["VOICEROOM_REDIS_DB"] = "1"
	for _, k := range []string{"VOICEROOM_HTTP_ADDR", "VOICEROOM_OPS_ADDR", "VOICEROOM_NATS_LISTEN"} {
		varsB[k] = "127.0.0.1:0"
	}
	code, out := runCommand(t, varsB, "restore", "--dump", dump, "--republish-window", "0")
	if code != 0 {
		t.Fatalf("restore: exit %d\n%s", code, out)
	}
	var rep restoreReport
	if err := json.Unmarshal([]byte(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), &rep); err != nil {
		t.Fatalf("restore's report: %v\n%s", err, out)
	}
	if rep.Outbox.Pending != 3 || rep.Webhooks.Endpoints != 1 || rep.List.Rooms != 3 || len(rep.Ranks) != 1 || rep.Ranks[0].Rooms != 2 {
		t.Fatalf("restore's report: %+v\n%s", rep, out)
	}
	if code, out := runCommand(t, varsB, "restore", "--dump", dump); code == 0 || !strings.Contains(out, "a dump is loaded into an empty database") {
		t.Fatalf("a second restore into the restored database: exit %d\n%s", code, out)
	}
	// The empty Redis got the list's sets and cards and the ranks' sets.
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(), DB: 1})
	t.Cleanup(func() { rdb.Close() })
	for _, pattern := range []string{
		fmt.Sprintf("room:list:{%s:%d}:ready", app, sea.RegionID), fmt.Sprintf("room:list:{%s:%d}:ready", app, mena.RegionID),
		"room:card:{" + app + ":*", "rank:{" + app + ":" + r1.RoomID + "}:*", "rank:{" + app + ":" + r2.RoomID + "}:*",
	} {
		keys, err := rdb.Keys(t.Context(), pattern).Result()
		if err != nil || len(keys) == 0 {
			t.Errorf("B's Redis has no %s after the restore: %v", pattern, err)
		}
	}
	t.Cleanup(func() {
		for _, pattern := range []string{"room:*{" + app + ":*", "rank:{" + app + ":*"} {
			if keys, err := rdb.Keys(context.Background(), pattern).Result(); err == nil && len(keys) > 0 {
				rdb.Del(context.Background(), keys...)
			}
		}
	})

	delivered := receiver.len()
	pb := startServeWith(t, varsB)
	baseB := pb.waitServing(t, varsB)
	waitReady(t, pb, baseB)
	cb := &client{t: t, base: baseB, secret: c.secret, app: app}

	// B's relay publishes the three rows to B's stream, and the webhooks
	// sink delivers them to the restored endpoint.
	js := mustJetStream(t, varsB)
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, id := range lagging {
			if n := testenv.StreamCount(t, js, id); n != 1 {
				return fmt.Errorf("event %s is %d times in B's ROOM_EVENTS, want once", id, n)
			}
		}
		if n := testenv.StreamLen(t, js); n != 3 {
			return fmt.Errorf("B's ROOM_EVENTS holds %d events, want the 3 pending ones", n)
		}
		var rep struct {
			PendingCount int64 `json:"pending_count"`
		}
		cb.ok("GET", "/admin/v1/outbox", "admin", ``, &rep)
		if rep.PendingCount != 0 {
			return fmt.Errorf("B's outbox has %d pending rows", rep.PendingCount)
		}
		got := receiver.since(delivered)
		for _, id := range lagging {
			if !slices.Contains(got, id) {
				return fmt.Errorf("the endpoint got %v from B, not yet %s", got, id)
			}
		}
		return nil
	})

	// What B shows is what A showed.
	var after map[read]string
	testenv.Eventually(t, 30*time.Second, func() error {
		after = shows(cb)
		for _, r := range reads {
			if after[r] != before[r] {
				return fmt.Errorf("GET %s as %s\nin A:\n%s\nin B:\n%s", r.path, r.as, before[r], after[r])
			}
		}
		return nil
	})
	// And B goes on from there: the next command is the room's next version.
	var next roomView
	cb.ok("POST", p1+"/mic/down", "12", ``, &next)
	var prev roomView
	if err := json.Unmarshal([]byte(before[read{p1, "11"}]), &prev); err != nil {
		t.Fatal(err)
	}
	if next.RoomVersion != prev.RoomVersion+1 {
		t.Fatalf("B's next command made version %d, want %d", next.RoomVersion, prev.RoomVersion+1)
	}
}
