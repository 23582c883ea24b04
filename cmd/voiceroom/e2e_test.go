package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"voiceroom/authtoken"
	"voiceroom/internal/testenv"
)

// client calls a running voiceroom over HTTP as app "e2e" (or app).
type client struct {
	t      *testing.T
	base   string
	secret []byte
	app    string // default "e2e"
}

// call sends a request as a user id ("11") or as "admin" and decodes the
// envelope's data into out.
func (c *client) call(method, path, as, body string, out any, headers ...string) (int, string) {
	c.t.Helper()
	var user int64
	role := ""
	if as == "admin" {
		role = authtoken.RoleAdmin
	} else {
		fmt.Sscan(as, &user)
	}
	app := c.app
	if app == "" {
		app = "e2e"
	}
	tok, err := authtoken.Issue(c.secret, app, user, role, time.Hour, time.Now())
	if err != nil {
		c.t.Fatal(err)
	}
	req, err := http.NewRequest(method, c.base+path, bytes.NewBufferString(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	var env struct {
		Code string          `json:"code"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		c.t.Fatalf("%s %s: %s", method, path, raw)
	}
	if out != nil && len(env.Data) > 0 {
		if err := json.Unmarshal(env.Data, out); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, env.Data)
		}
	}
	return resp.StatusCode, env.Code
}

func (c *client) ok(method, path, as, body string, out any) {
	c.t.Helper()
	if status, code := c.call(method, path, as, body, out); status != 200 {
		c.t.Fatalf("%s %s as %s: %d %s", method, path, as, status, code)
	}
}

func waitReady(t testing.TB, p *proc, base string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, func() error {
		select {
		case err := <-p.done:
			t.Fatalf("serve exited early: %v", err)
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
}

type roomView struct {
	RoomID          string `json:"room_id"`
	RoomShortID     string `json:"room_short_id"`
	VisibleRegionID int64  `json:"visible_region_id"`
	RoomVersion     int64  `json:"room_version"`
	Heat            int64  `json:"heat"`
	OnlineCount     int    `json:"online_count"`
	Seats           []struct {
		UserID int64 `json:"user_id"`
	} `json:"seats"`
	GiftRank []struct {
		UserID int64 `json:"user_id"`
		Value  int64 `json:"value"`
	} `json:"gift_rank"`
}

// TestServeRoomFlowSurvivesKill drives the product over HTTP: a region, a
// country, profiles, a room, joins, a seat and a paid gift; checks the events
// reached ROOM_EVENTS through the fast path; kills the process with SIGKILL
// and checks the restarted one serves the room exactly as of its last
// command, with the coins moved once.
func TestServeRoomFlowSurvivesKill(t *testing.T) {
	p, vars := startServe(t)
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	c := &client{t: t, base: base, secret: []byte(vars["VOICEROOM_JWT_SECRET"])}

	var region struct {
		RegionID int64 `json:"region_id"`
	}
	c.ok("POST", "/admin/v1/regions", "admin", `{"region_code":"SEA","name":"South-East Asia"}`, &region)
	c.ok("POST", "/admin/v1/countries", "admin", fmt.Sprintf(`{"country_code":"SG","name":"Singapore","region_id":%d}`, region.RegionID), nil)
	for _, u := range []string{"11", "12", "13"} {
		c.ok("PUT", "/api/v1/users/me", u, `{"display_user_id":"user`+u+`","country":"SG","region_id":999}`, nil)
	}
	var room roomView
	c.ok("POST", "/api/v1/rooms/create", "11", `{"room_name":"Night owls"}`, &room)
	if room.RoomShortID != "user11" || room.VisibleRegionID != region.RegionID {
		t.Fatalf("room %+v, want short id user11 in region %d", room, region.RegionID)
	}
	rp := "/api/v1/rooms/" + room.RoomID
	c.ok("POST", rp+"/join", "11", ``, nil)
	c.ok("POST", rp+"/join", "12", ``, nil)
	c.ok("POST", rp+"/join", "13", ``, nil)
	c.ok("POST", rp+"/mic/up", "12", `{"seat_index":3}`, nil)
	c.ok("POST", "/admin/v1/gifts", "admin", `{"gift_id":7,"name":"Rocket","price":100,"heat":40}`, nil)
	c.ok("POST", "/admin/v1/wallets/13/credit", "admin", `{"amount":1000,"idempotency_key":"e2e-1"}`, nil)
	c.ok("POST", rp+"/gift", "13", `{"gift_id":7,"count":3,"receiver_user_id":12}`, nil)
	if status, code := c.call("POST", rp+"/gift", "13", `{"gift_id":7,"count":10,"receiver_user_id":12}`, nil); status != 402 || code != "INSUFFICIENT_BALANCE" {
		t.Fatalf("gift beyond balance: %d %s", status, code)
	}
	var before roomView
	c.ok("GET", rp, "12", ``, &before)
	if before.RoomVersion != 6 || before.Heat != 120 || before.OnlineCount != 3 || before.Seats[3].UserID != 12 || before.GiftRank[0].Value != 300 {
		t.Fatalf("before kill: %+v", before)
	}

	// Every event reached the stream through the fast path: created, three
	// joins, mic up, and the gift's sent, heat and rank events.
	js := mustJetStream(t, vars)
	testenv.Eventually(t, 10*time.Second, func() error {
		s, err := js.Stream(t.Context(), "ROOM_EVENTS")
		if err != nil {
			return err
		}
		if n := s.CachedInfo().State.Msgs; n != 8 {
			return fmt.Errorf("stream holds %d messages, want 8", n)
		}
		return nil
	})
	js.Conn().Close()

	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t, 10*time.Second)

	p2 := startServeWith(t, vars)
	waitReady(t, p2, base)
	var after roomView
	c.ok("GET", rp, "12", ``, &after)
	b1, err := json.Marshal(before)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := json.Marshal(after)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1, b2) {
		t.Fatalf("after restart:\n%s\nbefore kill:\n%s", b2, b1)
	}
	var wallet struct{ Balance int64 }
	c.ok("GET", "/api/v1/wallet", "13", ``, &wallet)
	if wallet.Balance != 700 {
		t.Fatalf("balance %d after restart, want 700", wallet.Balance)
	}
	var next roomView
	c.ok("POST", rp+"/mic/down", "12", ``, &next)
	if next.RoomVersion != 7 {
		t.Fatalf("next version %d", next.RoomVersion)
	}
	// Recovery runs in the background once the node holds its
	// partitions: the commands above may come first.
	testenv.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(p2.logs.String(), "recovering rooms with users") {
			return errors.New("the restart did not load the room that lists users")
		}
		return nil
	})
}
