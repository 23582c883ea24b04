//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/authtoken"
	"voiceroom/regions"
)

const (
	app    = "chaos"
	giftID = 77
	seats  = 8
)

// outcome is one command as the client saw it, after its retries.
type outcome struct {
	key, room, op string
	user          int64
	status        int    // 0: no answer
	code          string // "" on 200
	at            time.Time
}

// definite reports whether the answer settles the command's fate: a 200,
// or a rejection by the rules (4xx other than a rate limit).
func (o outcome) definite() bool {
	return o.status == http.StatusOK || (o.status >= 400 && o.status < 500 && o.status != http.StatusTooManyRequests)
}

type vuser struct {
	id    int64
	token string
	room  int
	seat  int
}

// driver is the continuous load: clients sending room commands with an
// Idempotency-Key each, retried with the same key while the answer is a
// transport error or a 5xx.
type driver struct {
	c     *cluster
	hc    *http.Client
	users []*vuser
	rooms []string
	// shortIDs are the rooms' short ids (the owners' display ids).
	shortIDs []string
	// owners are the rooms' owners' tokens: an owner is in the region
	// its room is listed in, so it sees the room in its list.
	owners []string
	admin  string
	mu     sync.Mutex
	out    []outcome
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newDriver(t *testing.T, c *cluster, nRooms, nUsers int) *driver {
	t.Helper()
	ctx := context.Background()
	d := &driver{c: c, hc: &http.Client{Timeout: 10 * time.Second}}
	secret := []byte(c.secret)
	var err error
	if d.admin, err = authtoken.Issue(secret, app, 0, authtoken.RoleAdmin, 24*time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	svc, err := regions.New(ctx, c.db, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), regions.Config{DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	data := regions.SeedData{Regions: []regions.SeedRegion{{Code: "R1", Name: "R1", Countries: []string{"SG", "MY"}}, {Code: "R2", Name: "R2", Countries: []string{"SA"}}}}
	countries := []string{"SG", "MY", "SA"}
	for i := range nRooms + nUsers {
		id := int64(10_000 + i)
		data.Users = append(data.Users, regions.SeedUser{UserID: id, DisplayUserID: fmt.Sprintf("c%d", id), Country: countries[i%3]})
	}
	if _, err := svc.Seed(ctx, app, data); err != nil {
		t.Fatalf("seed: %v", err)
	}
	if st, code, _ := d.send(ctx, "POST", "/admin/v1/gifts", d.admin, "", map[string]any{"gift_id": giftID, "name": "rose", "price": 2, "heat": 5}); st != 200 {
		t.Fatalf("create gift: %d %s", st, code)
	}
	// Before any room: every room event is the receiver's.
	c.hooks.register(t, d, c.webhooks)
	for i := range nRooms {
		id := int64(10_000 + i)
		tok, err := authtoken.Issue(secret, app, id, "", 24*time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		st, code, data := d.send(ctx, "POST", "/api/v1/rooms/create", tok, uuid.NewString(), map[string]any{"room_name": "chaos", "seat_count": seats})
		if st != 200 {
			t.Fatalf("create room: %d %s", st, code)
		}
		var snap struct {
			RoomID      string `json:"room_id"`
			RoomShortID string `json:"room_short_id"`
		}
		if err := json.Unmarshal(data, &snap); err != nil || snap.RoomID == "" {
			t.Fatalf("create room: answer %s: %v", data, err)
		}
		d.rooms = append(d.rooms, snap.RoomID)
		d.shortIDs = append(d.shortIDs, snap.RoomShortID)
		d.owners = append(d.owners, tok)
	}
	for i := range nUsers {
		id := int64(10_000 + nRooms + i)
		tok, err := authtoken.Issue(secret, app, id, "", 24*time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		d.users = append(d.users, &vuser{id: id, token: tok, room: -1, seat: -1})
		if st, code, _ := d.send(ctx, "POST", fmt.Sprintf("/admin/v1/wallets/%d/credit", id), d.admin, "",
			map[string]any{"amount": 1_000_000, "idempotency_key": fmt.Sprintf("chaos-%d", id)}); st != 200 {
			t.Fatalf("credit: %d %s", st, code)
		}
	}
	return d
}

// send makes one request; status 0 means no answer (none, or one that
// could not be read: the command's fate is unknown).
func (d *driver) send(ctx context.Context, method, path, token, key string, body any) (int, string, json.RawMessage) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, "encode: " + err.Error(), nil
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.c.api.url+path, rd)
	if err != nil {
		return 0, "transport", nil
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return 0, "transport", nil
	}
	defer resp.Body.Close()
	var env struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, "transport", nil
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return 0, fmt.Sprintf("transport: answer %d is not the envelope: %.200s", resp.StatusCode, raw), nil
	}
	if resp.StatusCode == http.StatusOK {
		return 200, "", env.Data
	}
	return resp.StatusCode, env.Code + ": " + env.Message, nil
}

// start runs the clients until stop.
func (d *driver) start(clients int) {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	for c := range clients {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			var mine []*vuser
			for i := c; i < len(d.users); i += clients {
				mine = append(mine, d.users[i])
			}
			for i := 0; ctx.Err() == nil; i++ {
				d.step(ctx, mine[i%len(mine)], rng)
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
	}
}

// stop ends the load and waits for every client's last command.
func (d *driver) stop() {
	d.cancel()
	d.wg.Wait()
}

func (d *driver) step(ctx context.Context, u *vuser, rng *rand.Rand) {
	if u.room < 0 {
		ri := rng.IntN(len(d.rooms))
		if d.command(ctx, u, ri, "join", "/join", map[string]any{}) {
			u.room, u.seat = ri, -1
		}
		return
	}
	switch r := rng.IntN(100); {
	case r < 15:
		if d.command(ctx, u, u.room, "leave", "/leave", map[string]any{}) {
			u.room, u.seat = -1, -1
		}
	case r < 55:
		seat := rng.IntN(seats)
		switch {
		case u.seat == -1:
			if d.command(ctx, u, u.room, "mic_up", "/mic/up", map[string]any{"seat_index": seat}) {
				u.seat = seat
			}
		case rng.IntN(2) == 0:
			if d.command(ctx, u, u.room, "mic_change", "/mic/change", map[string]any{"seat_index": seat}) {
				u.seat = seat
			}
		default:
			if d.command(ctx, u, u.room, "mic_down", "/mic/down", map[string]any{}) {
				u.seat = -1
			}
		}
	case r < 80:
		d.command(ctx, u, u.room, "gift", "/gift", map[string]any{"gift_id": giftID, "count": 1, "receiver_user_id": u.id})
	default:
		d.command(ctx, u, u.room, "heartbeat", "/heartbeat", map[string]any{})
	}
}

// command sends one command with a fresh key, retrying with the same key
// for up to 15 s while there is no definite answer, records the outcome and
// reports whether it was a 200. A rejection resyncs the client's belief.
func (d *driver) command(ctx context.Context, u *vuser, ri int, op, suffix string, body any) bool {
	key := uuid.NewString()
	room := d.rooms[ri]
	o := outcome{key: key, room: room, op: op, user: u.id}
	deadline := time.Now().Add(15 * time.Second)
	for {
		// The last attempt is not cut by the end of the phase: its answer
		// decides what the client believes.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		st, code, _ := d.send(rctx, "POST", "/api/v1/rooms/"+room+suffix, u.token, key, body)
		cancel()
		o.status, o.code, o.at = st, code, time.Now()
		if o.definite() || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	d.mu.Lock()
	d.out = append(d.out, o)
	d.mu.Unlock()
	if o.status != 200 {
		m := o.code
		switch {
		case strings.Contains(m, "not in the room"), !o.definite():
			u.room, u.seat = -1, -1 // unknown: start over with a join
		case strings.Contains(m, "not on a seat"):
			u.seat = -1
		case strings.Contains(m, "already on seat"):
			u.seat = -2 // on some seat: change or leave it
		}
	}
	return o.status == 200
}

// outcomes returns a copy of everything recorded so far.
func (d *driver) outcomes() []outcome {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]outcome(nil), d.out...)
}
