package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/authtoken"
	"voiceroom/internal/testenv"
	"voiceroom/rooms"
)

// roomUsers gives every user below 1000 a profile in region 3.
type roomUsers struct{}

func (roomUsers) UserRegion(_ context.Context, app string, id int64) (string, int64, error) {
	if id >= 1000 {
		return "", 0, apperr.New(apperr.NotFound, "no profile")
	}
	return fmt.Sprintf("%s%d", app, id), 3, nil
}

func (roomUsers) CheckRegion(_ context.Context, _ string, id int64) error {
	if id == 0 || id == 3 || id == 4 {
		return nil
	}
	return apperr.Invalid("region_id", "no such active region")
}

type roomAPI struct {
	t   testing.TB
	srv *Server
}

func newRoomAPI(t testing.TB) *roomAPI {
	t.Helper()
	return newRoomAPIClock(t, rooms.Config{}, time.Now)
}

// newRoomAPIClock is newRoomAPI with the rooms service's configuration
// (bcrypt cost 4 unless set) and clock.
func newRoomAPIClock(t testing.TB, cfg rooms.Config, now func() time.Time) *roomAPI {
	t.Helper()
	return newRoomAPIOn(t, cfg, now, func(svc *rooms.Service) Rooms { return svc })
}

// newRoomAPIOn is newRoomAPIClock with the routes mounted on what mount
// makes of the rooms service.
func newRoomAPIOn(t testing.TB, cfg rooms.Config, now func() time.Time, mount func(*rooms.Service) Rooms) *roomAPI {
	t.Helper()
	db := testenv.NewDB(t)
	reg := prometheus.NewRegistry()
	if cfg.BcryptCost == 0 {
		cfg.BcryptCost = 4
	}
	svc, err := rooms.New(db, roomUsers{}, roomUsers{}, nil, cfg, testenv.Logger(t), reg, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	srv, err := New(Config{Addr: "127.0.0.1:0", JWTSecret: testSecret, RatePerUser: 10000, RateBurst: 10000}, testenv.Logger(t), reg, reg, nil, RoomRoutes(mount(svc)), WalletRoutes(svc.Wallet()))
	if err != nil {
		t.Fatal(err)
	}
	return &roomAPI{t: t, srv: srv}
}

// call sends a request as user (app "app1" unless app is given as "app:user")
// and decodes the envelope; data is decoded into out when given.
func (a *roomAPI) call(method, path, as, body string, out any, headers ...string) (int, Envelope) {
	a.t.Helper()
	app, user := "app1", as
	if i := strings.IndexByte(as, ':'); i >= 0 {
		app, user = as[:i], as[i+1:]
	}
	var id int64
	fmt.Sscan(user, &id)
	role := ""
	if user == "admin" {
		role, id = authtoken.RoleAdmin, 0
	}
	tok := mustToken(a.t, app, id, role, time.Hour)
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := a.srv.App().Test(req, 10000)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	var env struct {
		Envelope
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		a.t.Fatalf("%s %s: not an envelope: %s", method, path, raw)
	}
	if out != nil && len(env.Data) > 0 {
		if err := json.Unmarshal(env.Data, out); err != nil {
			a.t.Fatalf("%s %s: data %s: %v", method, path, env.Data, err)
		}
	}
	env.Envelope.Data = env.Data
	return resp.StatusCode, env.Envelope
}

func (a *roomAPI) mustOK(method, path, as, body string, out any, headers ...string) {
	a.t.Helper()
	if status, env := a.call(method, path, as, body, out, headers...); status != 200 {
		a.t.Fatalf("%s %s as %s: %d %s %s", method, path, as, status, env.Code, env.Message)
	}
}

func TestRoomRoutes(t *testing.T) {
	a := newRoomAPI(t)
	var room rooms.View
	a.mustOK("POST", "/api/v1/rooms/create", "1", `{"room_name":"Evening chat","seat_count":8,"visible_region_id":99,"room_id":"app1_mine"}`, &room)
	if room.RoomShortID != "app11" || room.VisibleRegionID != 3 || room.SeatCount != 8 || !strings.HasPrefix(room.RoomID, "app1_") || room.RoomID == "app1_mine" {
		t.Fatalf("created %+v (client-sent region and id must be ignored)", room)
	}
	base := "/api/v1/rooms/" + room.RoomID

	tests := []struct {
		name, method, path, as, body string
		status                       int
		code, field                  string
	}{
		{"second room", "POST", "/api/v1/rooms/create", "1", `{"room_name":"x"}`, 409, "ALREADY_EXISTS", ""},
		{"no profile", "POST", "/api/v1/rooms/create", "5000", `{"room_name":"x"}`, 409, "FAILED_PRECONDITION", ""},
		{"missing room name", "POST", "/api/v1/rooms/create", "2", `{}`, 400, "INVALID_ARGUMENT", "room_name"},
		{"oversized room name", "POST", "/api/v1/rooms/create", "2", `{"room_name":"` + strings.Repeat("n", 65) + `"}`, 400, "INVALID_ARGUMENT", "room_name"},
		{"malformed", "POST", base + "/join", "2", `{"password":`, 400, "INVALID_ARGUMENT", ""},
		{"join", "POST", base + "/join", "2", ``, 200, "OK", ""},
		{"join 3", "POST", base + "/join", "3", ``, 200, "OK", ""},
		{"mic up without index", "POST", base + "/mic/up", "2", `{}`, 400, "INVALID_ARGUMENT", "seat_index"},
		{"mic up out of range", "POST", base + "/mic/up", "2", `{"seat_index":8}`, 400, "INVALID_ARGUMENT", "seat_index"},
		{"mic up wrong type", "POST", base + "/mic/up", "2", `{"seat_index":"one"}`, 400, "INVALID_ARGUMENT", "seat_index"},
		{"mic up", "POST", base + "/mic/up", "2", `{"seat_index":1}`, 200, "OK", ""},
		{"seat taken", "POST", base + "/mic/up", "3", `{"seat_index":1}`, 409, "FAILED_PRECONDITION", ""},
		{"mic change", "POST", base + "/mic/change", "2", `{"seat_index":2}`, 200, "OK", ""},
		{"lock seat by guest", "POST", base + "/mic/lock", "3", `{"seat_index":5,"locked":true}`, 403, "PERMISSION_DENIED", ""},
		{"lock seat", "POST", base + "/mic/lock", "1", `{"seat_index":5,"locked":true}`, 200, "OK", ""},
		{"locked seat", "POST", base + "/mic/up", "3", `{"seat_index":5}`, 409, "FAILED_PRECONDITION", ""},
		{"transfer by guest", "POST", base + "/host/transfer", "3", `{"user_id":2}`, 403, "PERMISSION_DENIED", ""},
		{"transfer", "POST", base + "/host/transfer", "1", `{"user_id":2}`, 200, "OK", ""},
		{"gift unknown", "POST", base + "/gift", "2", `{"gift_id":9,"count":1,"receiver_user_id":3}`, 400, "INVALID_ARGUMENT", "gift_id"},
		{"gift count", "POST", base + "/gift", "2", `{"gift_id":9,"count":0,"receiver_user_id":3}`, 400, "INVALID_ARGUMENT", "count"},
		{"gift catalog by user", "POST", "/admin/v1/gifts", "2", `{"gift_id":1,"name":"Rose","price":10,"heat":5}`, 403, "PERMISSION_DENIED", ""},
		{"gift catalog", "POST", "/admin/v1/gifts", "admin", `{"gift_id":1,"name":"Rose","price":10,"heat":5}`, 200, "OK", ""},
		{"gift without coins", "POST", base + "/gift", "2", `{"gift_id":1,"count":1,"receiver_user_id":3}`, 402, "INSUFFICIENT_BALANCE", ""},
		{"credit", "POST", "/admin/v1/wallets/2/credit", "admin", `{"amount":100,"idempotency_key":"c1"}`, 200, "OK", ""},
		{"credit bad amount", "POST", "/admin/v1/wallets/2/credit", "admin", `{"amount":-5,"idempotency_key":"c2"}`, 400, "INVALID_ARGUMENT", "amount"},
		{"gift", "POST", base + "/gift", "2", `{"gift_id":1,"count":3,"receiver_user_id":3}`, 200, "OK", ""},
		{"password by guest", "POST", base + "/password", "3", `{"password":"abcd"}`, 403, "PERMISSION_DENIED", ""},
		{"password", "POST", base + "/password", "2", `{"password":"abcd"}`, 200, "OK", ""},
		{"join locked", "POST", base + "/join", "4", `{"password":"nope"}`, 403, "PERMISSION_DENIED", ""},
		{"join locked right", "POST", base + "/join", "4", `{"password":"abcd"}`, 200, "OK", ""},
		{"kick owner", "POST", base + "/kick", "2", `{"user_id":1}`, 403, "PERMISSION_DENIED", ""},
		{"kick bad ban", "POST", base + "/kick", "2", `{"user_id":4,"ban_seconds":-1}`, 400, "INVALID_ARGUMENT", "ban_seconds"},
		{"kick", "POST", base + "/kick", "2", `{"user_id":4,"ban_seconds":600}`, 200, "OK", ""},
		{"banned join", "POST", base + "/join", "4", `{"password":"abcd"}`, 409, "FAILED_PRECONDITION", ""},
		{"heartbeat", "POST", base + "/heartbeat", "3", ``, 200, "OK", ""},
		{"heartbeat absent", "POST", base + "/heartbeat", "5", ``, 409, "FAILED_PRECONDITION", ""},
		{"leave", "POST", base + "/leave", "3", ``, 200, "OK", ""},
		{"region by user", "POST", "/admin/v1/rooms/" + room.RoomID + "/region", "2", `{"visible_region_id":4,"reason":"x"}`, 403, "PERMISSION_DENIED", ""},
		{"region unknown", "POST", "/admin/v1/rooms/" + room.RoomID + "/region", "admin", `{"visible_region_id":8,"reason":"x"}`, 400, "INVALID_ARGUMENT", "region_id"},
		{"region", "POST", "/admin/v1/rooms/" + room.RoomID + "/region", "admin", `{"visible_region_id":4,"reason":"ops move"}`, 200, "OK", ""},
		{"other app's room", "GET", base, "app2:1", ``, 404, "NOT_FOUND", ""},
		{"other app's room join", "POST", base + "/join", "app2:1", ``, 404, "NOT_FOUND", ""},
		{"other app's admin", "POST", "/admin/v1/rooms/" + room.RoomID + "/region", "app2:admin", `{"visible_region_id":0,"reason":"x"}`, 404, "NOT_FOUND", ""},
		{"unknown room", "GET", "/api/v1/rooms/app1_nope", "2", ``, 404, "NOT_FOUND", ""},
		{"close by host", "POST", base + "/close", "2", ``, 403, "PERMISSION_DENIED", ""},
		{"close", "POST", base + "/close", "1", ``, 200, "OK", ""},
		{"after close", "POST", base + "/join", "2", ``, 409, "FAILED_PRECONDITION", ""},
	}
	for _, tt := range tests {
		status, env := a.call(tt.method, tt.path, tt.as, tt.body, nil)
		if status != tt.status || env.Code != tt.code {
			t.Fatalf("%s: %d %s %q, want %d %s", tt.name, status, env.Code, env.Message, tt.status, tt.code)
		}
		if tt.field != "" && !strings.HasPrefix(env.Message, tt.field) {
			t.Fatalf("%s: message %q does not name %s", tt.name, env.Message, tt.field)
		}
	}

	var snap rooms.View
	a.mustOK("GET", base, "3", "", &snap)
	if snap.Status != "closed" || snap.Heat != 15 || snap.VisibleRegionID != 4 || !snap.Locked || snap.OnlineCount != 0 ||
		len(snap.GiftRank) != 1 || snap.GiftRank[0].UserID != 2 {
		t.Fatalf("final snapshot %+v", snap)
	}
	raw, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "password") || strings.Contains(string(raw), "$2a$") {
		t.Fatalf("snapshot leaks the password hash: %s", raw)
	}
	var wallet struct{ Balance int64 }
	a.mustOK("GET", "/api/v1/wallet", "2", "", &wallet)
	if wallet.Balance != 70 {
		t.Fatalf("balance %d", wallet.Balance)
	}
}

func TestRoomIdempotencyKeyOverHTTP(t *testing.T) {
	a := newRoomAPI(t)
	var room rooms.View
	a.mustOK("POST", "/api/v1/rooms/create", "1", `{"room_name":"r"}`, &room)
	base := "/api/v1/rooms/" + room.RoomID
	var first, second rooms.View
	a.mustOK("POST", base+"/join", "2", ``, &first, "Idempotency-Key", "join-2-a")
	a.mustOK("POST", base+"/join", "3", ``, nil)
	a.mustOK("POST", base+"/join", "2", ``, &second, "Idempotency-Key", "join-2-a")
	if first.RoomVersion != 2 || second.RoomVersion != 2 || second.OnlineCount != 1 {
		t.Fatalf("first %d/%d second %d/%d", first.RoomVersion, first.OnlineCount, second.RoomVersion, second.OnlineCount)
	}
	// The same key on a create returns the same room.
	var c1, c2 rooms.View
	a.mustOK("POST", "/api/v1/rooms/create", "7", `{"room_name":"r7"}`, &c1, "Idempotency-Key", "create-7")
	a.mustOK("POST", "/api/v1/rooms/create", "7", `{"room_name":"r7"}`, &c2, "Idempotency-Key", "create-7")
	if c1.RoomID != c2.RoomID {
		t.Fatalf("same key created %s and %s", c1.RoomID, c2.RoomID)
	}
	if status, env := a.call("POST", base+"/leave", "2", ``, nil, "Idempotency-Key", strings.Repeat("k", 65)); status != 400 || env.Code != "INVALID_ARGUMENT" {
		t.Fatalf("oversized key: %d %s", status, env.Code)
	}
}

// remoteOwner answers commands as a router does when another node runs
// them: a command that asks for its view as JSON gets the owner's JSON
// of it, and no view.
type remoteOwner struct{ *rooms.Service }

func (r remoteOwner) Execute(ctx context.Context, cmd *rooms.Command) (rooms.Result, error) {
	res, err := r.Service.Execute(ctx, cmd)
	if err != nil || !cmd.ViewJSON {
		return res, err
	}
	data, err := json.Marshal(res.View)
	return rooms.Result{ViewJSON: data, Replayed: res.Replayed}, err
}

// TestRoutedViewWrittenAsSent: the HTTP edge asks for a command's view as
// JSON, and writes a routed command's view as its owner sent it: the
// answer is the room's view, the same as the in-process path answers.
func TestRoutedViewWrittenAsSent(t *testing.T) {
	a := newRoomAPIOn(t, rooms.Config{BcryptCost: 4}, time.Now, func(svc *rooms.Service) Rooms { return remoteOwner{svc} })
	var room rooms.View
	a.mustOK("POST", "/api/v1/rooms/create", "1", `{"room_name":"Routed","seat_count":8}`, &room)
	if room.RoomID == "" || room.Title != "Routed" || room.OwnerUserID != 1 {
		t.Fatalf("create answered %+v", room)
	}
	var joined, got rooms.View
	a.mustOK("POST", "/api/v1/rooms/"+room.RoomID+"/join", "2", ``, &joined)
	a.mustOK("GET", "/api/v1/rooms/"+room.RoomID, "2", ``, &got)
	if joined.OnlineCount != 1 || !reflect.DeepEqual(joined, got) {
		t.Fatalf("join answered %+v, want the room's view %+v", joined, got)
	}
}
