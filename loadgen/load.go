package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The command mix of a user in a room (weights out of 100); a user in no
// room joins one.
const (
	wHeartbeat = 40
	wLeave     = 12
	wMic       = 28 // up when off a seat; else change (2/3) or down (1/3)
	wGift      = 20
)

// The command mixes of Config.Mix.
const (
	MixMixed     = "mixed"
	MixJoinLeave = "joinleave"
	MixHosts     = "hosts" // hosts.go
)

// seats is the seat count of the bench's rooms.
const seats = 10

// load runs the clients, list readers and the list probe until ctx ends.
func (b *Bench) load(ctx context.Context, w *world, rec, lists *recorder, probe *listProbe) {
	cfg := b.cfg
	var wg sync.WaitGroup
	// Users are dealt to clients: one client owns each user, so a user's
	// commands never overlap.
	owned := make([][]*user, cfg.Clients)
	for i, u := range w.users {
		owned[i%cfg.Clients] = append(owned[i%cfg.Clients], u)
	}
	var arrivals chan time.Time
	if cfg.Rate > 0 {
		arrivals = make(chan time.Time, 1<<16)
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.schedule(ctx, arrivals)
		}()
	}
	for c := range cfg.Clients {
		if len(owned[c]) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(c)+100))
			b.client(ctx, w, owned[c], rng, rec, arrivals)
		}()
	}
	for l := range cfg.ListClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(l)+10000))
			b.listReader(ctx, w, rng, lists)
		}()
	}
	if probe != nil {
		for app, pr := range w.probes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				probe.run(ctx, b, app, pr)
			}()
		}
	}
	wg.Wait()
}

// schedule sends one arrival time per 1/Rate seconds; an arrival not
// taken yet counts as lag (behind).
func (b *Bench) schedule(ctx context.Context, out chan<- time.Time) {
	defer close(out)
	interval := time.Duration(float64(time.Second) / b.cfg.Rate)
	next := time.Now()
	for {
		next = next.Add(interval)
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		select {
		case out <- next:
		case <-ctx.Done():
			return
		default:
			b.dropped.Add(1) // more than 65,536 behind: counted, not queued
		}
	}
}

// client runs the commands of its users in turn: closed loop (next
// command when the answer arrives) or, with arrivals, open loop.
func (b *Bench) client(ctx context.Context, w *world, users []*user, rng *rand.Rand, rec *recorder, arrivals <-chan time.Time) {
	for i := 0; ctx.Err() == nil; i++ {
		start := time.Now()
		if arrivals != nil {
			var ok bool
			select {
			case start, ok = <-arrivals:
				if !ok {
					return
				}
			case <-ctx.Done():
				return
			}
		}
		u := users[i%len(users)]
		op, a := b.step(ctx, w, u, rng)
		if ctx.Err() != nil && a.code == "transport" {
			return // cut off by the end of the phase, not the server's fault
		}
		rec.add(op, time.Since(start), a.code, a.server())
	}
}

// step sends the user's next command and updates what the client believes
// of its state from the answer.
func (b *Bench) step(ctx context.Context, w *world, u *user, rng *rand.Rand) (string, answer) {
	if u.room < 0 {
		rooms := w.byApp[u.app]
		ri := rooms[rng.IntN(len(rooms))]
		a := b.http.do(ctx, http.MethodPost, "/api/v1/rooms/"+w.rooms[ri].id+"/join", u.token, map[string]any{})
		if a.code == "" {
			u.room, u.seat = ri, -1
		}
		return "join", a
	}
	if b.cfg.Mix == MixHosts {
		op, a := b.hostsStep(ctx, w, u, rng)
		resync(u, a)
		return op, a
	}
	path := "/api/v1/rooms/" + w.rooms[u.room].id
	var op string
	var a answer
	r := rng.IntN(100)
	switch {
	case b.cfg.Mix == MixJoinLeave:
		r = wHeartbeat // leave
	case giftsOnly(b.cfg.Mix):
		r = wHeartbeat + wLeave + wMic // gift
	}
	switch {
	case r < wHeartbeat:
		op = "heartbeat"
		a = b.http.do(ctx, http.MethodPost, path+"/heartbeat", u.token, map[string]any{})
	case r < wHeartbeat+wLeave:
		op = "leave"
		a = b.http.do(ctx, http.MethodPost, path+"/leave", u.token, map[string]any{})
		if a.code == "" {
			u.room, u.seat = -1, -1
		}
	case r < wHeartbeat+wLeave+wMic:
		seat := rng.IntN(seats)
		switch {
		case u.seat < 0:
			op = "mic_up"
			a = b.http.do(ctx, http.MethodPost, path+"/mic/up", u.token, map[string]any{"seat_index": seat})
		case rng.IntN(3) < 2:
			op = "mic_change"
			a = b.http.do(ctx, http.MethodPost, path+"/mic/change", u.token, map[string]any{"seat_index": seat})
		default:
			op = "mic_down"
			a = b.http.do(ctx, http.MethodPost, path+"/mic/down", u.token, map[string]any{})
			if a.code == "" {
				u.seat = -1
			}
		}
		if a.code == "" && op != "mic_down" {
			u.seat = seat
		}
	default:
		op = "gift"
		a = b.http.do(ctx, http.MethodPost, path+"/gift", u.token,
			map[string]any{"gift_id": benchGiftID, "count": 1 + rng.IntN(3), "receiver_user_id": u.id})
	}
	resync(u, a)
	return op, a
}

// resync corrects the client's belief after a rejection that shows it was
// wrong (the sweeper removed a silent user, a seat moved).
func resync(u *user, a answer) {
	if a.code == "" {
		return
	}
	m := a.message
	switch {
	case strings.Contains(m, "not in the room"), strings.Contains(m, "room is closed"):
		// Gone from the room, and so are its request to speak and invitation.
		u.room, u.seat = -1, -1
		u.hosts.requested, u.hosts.invited = false, false
	case strings.Contains(m, "not on a seat"):
		u.seat = -1
	case strings.HasPrefix(m, "already on seat "):
		if n, err := strconv.Atoi(strings.TrimSuffix(strings.Fields(m[len("already on seat "):])[0], ":")); err == nil {
			u.seat = n
		}
	}
}

// listReader reads the hot and new tabs and searches a room by short id.
func (b *Bench) listReader(ctx context.Context, w *world, rng *rand.Rand, rec *recorder) {
	apps := b.cfg.Apps
	for ctx.Err() == nil {
		app := apps[rng.IntN(len(apps))]
		var op, q string
		switch r := rng.IntN(10); {
		case r < 4:
			op, q = "list_hot", "tab=hot&limit=20"
		case r < 7:
			op, q = "list_new", "tab=new&limit=20"
		default:
			rooms := w.byApp[app]
			op, q = "list_search", "tab=hot&limit=20&query="+url.QueryEscape(w.rooms[rooms[rng.IntN(len(rooms))]].shortID)
		}
		tok := w.probes[app].users[0].token
		start := time.Now()
		a := b.http.do(ctx, http.MethodGet, "/api/v1/rooms?"+q, tok, nil)
		if ctx.Err() != nil && a.code == "transport" {
			return
		}
		rec.add(op, time.Since(start), a.code, a.server())
	}
}

// listAvailable asks the room list once: a 404 (route absent) or 405 means
// the feature is not there.
func (b *Bench) listAvailable(ctx context.Context, w *world) (bool, string) {
	app := b.cfg.Apps[0]
	a := b.http.do(ctx, http.MethodGet, "/api/v1/rooms?tab=hot&limit=1", w.probes[app].users[0].token, nil)
	switch {
	case a.code == "":
		return true, ""
	case a.status == http.StatusNotFound || a.status == http.StatusMethodNotAllowed:
		return false, fmt.Sprintf("GET /api/v1/rooms answers %d: the room list is not in this build", a.status)
	default:
		return false, fmt.Sprintf("GET /api/v1/rooms fails: %s %s", a.code, a.message)
	}
}

// counter is an atomic count shown in progress.
type counter = atomic.Int64
