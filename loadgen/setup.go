package loadgen

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"voiceroom/authtoken"
	"voiceroom/regions"
)

// benchGiftID is the gift every sender sends (price 1, heat 10).
const benchGiftID = 9001

// coinsPerUser are credited once per user and app (by idempotency key), for
// gifts.
const coinsPerUser = 1_000_000_000

// user is one simulated user. Only its client touches it during the load.
type user struct {
	app   string
	id    int64
	token string
	room  int // index into rooms, -1 when in none
	seat  int // -1 when on none
	hosts hostsState
}

func newUser(app string, id int64) *user {
	return &user{app: app, id: id, room: -1, seat: -1, hosts: newHostsState()}
}

// room is one room of the bench. hostToken is its owner's, who is its
// host.
type room struct {
	app, id, shortID string
	hostToken        string
}

// world is what setup created.
type world struct {
	rooms   []room
	byApp   map[string][]int // room indexes per app
	users   []*user
	admins  map[string]string // operator token per app
	probes  map[string]probeRoom
	created time.Time
}

// probeRoom is a room no load client touches, where the list probe can
// know the expected online count.
type probeRoom struct {
	room
	users []*user
}

func ownerID(app, i int) int64  { return 1_000_000*int64(app+1) + int64(i) }
func memberID(app, i int) int64 { return 1_000_000*int64(app+1) + 500_000 + int64(i) }

// setup seeds regions and users in MySQL, creates the gift, credits coins
// and creates the rooms over HTTP. Every step is repeatable: a second run
// with the same seed finds the same users and rooms.
func (b *Bench) setup(ctx context.Context) (*world, error) {
	cfg := b.cfg
	w := &world{byApp: map[string][]int{}, admins: map[string]string{}, probes: map[string]probeRoom{}}
	svc, err := regions.New(ctx, b.db, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), regions.Config{DisableCache: true})
	if err != nil {
		return nil, fmt.Errorf("regions: %w", err)
	}
	defer svc.Close()
	now := time.Now()
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 7))
	countries := func(k int) []string {
		var out []string
		for i := k; i < len(countryCodes); i += cfg.Regions {
			out = append(out, countryCodes[i])
		}
		return out
	}
	type owner struct {
		app, idx int
		u        *user
	}
	var owners []owner
	for ai, app := range cfg.Apps {
		tok, err := cfg.Keys[app].Issue(app, 0, authtoken.RoleAdmin, 24*time.Hour, now)
		if err != nil {
			return nil, fmt.Errorf("admin token %s: %w", app, err)
		}
		w.admins[app] = tok
		data := regions.SeedData{}
		for k := range cfg.Regions {
			data.Regions = append(data.Regions, regions.SeedRegion{Code: fmt.Sprintf("R%d", k+1), Name: fmt.Sprintf("Bench region %d", k+1), Countries: countries(k)})
		}
		if _, err := svc.Seed(ctx, app, data); err != nil {
			return nil, fmt.Errorf("seed regions of %s: %w", app, err)
		}
		// Rooms and users of this app, plus one probe room and its users.
		nRooms := share(cfg.Rooms, len(cfg.Apps), ai) + 1
		nUsers := share(cfg.Users, len(cfg.Apps), ai) + 4
		var users []regions.SeedUser
		for i := range nRooms {
			id := ownerID(ai, i)
			users = append(users, regions.SeedUser{UserID: id, DisplayUserID: fmt.Sprintf("o%d", id), Country: countryCodes[rng.IntN(len(countryCodes))]})
			owners = append(owners, owner{app: ai, idx: i, u: newUser(app, id)})
		}
		var probeUsers []*user
		for i := range nUsers {
			id := memberID(ai, i)
			country := countryCodes[rng.IntN(len(countryCodes))]
			if i < 4 {
				// Probe users live in the probe room's region (its owner's,
				// owner 0), so the room is in the list they read.
				country = users[0].Country
			}
			users = append(users, regions.SeedUser{UserID: id, DisplayUserID: fmt.Sprintf("u%d", id), Country: country})
			u := newUser(app, id)
			if i < 4 {
				probeUsers = append(probeUsers, u)
			} else {
				w.users = append(w.users, u)
			}
		}
		if err := seedUsers(ctx, svc, app, users); err != nil {
			return nil, err
		}
		pr := w.probes[app]
		pr.users = probeUsers
		w.probes[app] = pr
	}
	for _, u := range w.users {
		if u.token, err = cfg.Keys[u.app].Issue(u.app, u.id, "", 24*time.Hour, now); err != nil {
			return nil, err
		}
	}
	for app, pr := range w.probes {
		for _, u := range pr.users {
			if u.token, err = cfg.Keys[app].Issue(app, u.id, "", 24*time.Hour, now); err != nil {
				return nil, err
			}
		}
	}

	// The gift, in every app.
	for _, app := range cfg.Apps {
		a := b.http.setupCall(ctx, http.MethodPost, "/admin/v1/gifts", "", w.admins[app],
			map[string]any{"gift_id": benchGiftID, "name": "bench rose", "price": 1, "heat": 10})
		if a.code != "" {
			return nil, fmt.Errorf("create gift in %s: %s %s", app, a.code, a.message)
		}
	}

	// Coins and rooms, concurrently.
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Clients)
	for _, u := range w.users {
		g.Go(func() error {
			a := b.http.setupCall(gctx, http.MethodPost, fmt.Sprintf("/admin/v1/wallets/%d/credit", u.id), "", w.admins[u.app],
				map[string]any{"amount": coinsPerUser, "idempotency_key": fmt.Sprintf("bench-coins-%d", u.id)})
			if a.code != "" {
				return fmt.Errorf("credit user %d of %s: %s %s", u.id, u.app, a.code, a.message)
			}
			return nil
		})
	}
	rooms := make([]room, len(owners))
	for i, o := range owners {
		g.Go(func() error {
			tok, err := cfg.Keys[o.u.app].Issue(o.u.app, o.u.id, "", 24*time.Hour, now)
			if err != nil {
				return err
			}
			a := b.http.setupCall(gctx, http.MethodPost, "/api/v1/rooms/create", fmt.Sprintf("bench-create-%d", o.u.id), tok,
				map[string]any{"room_name": fmt.Sprintf("bench room %d", o.idx), "seat_count": 10})
			if a.code != "" {
				return fmt.Errorf("create room of %d in %s: %s %s", o.u.id, o.u.app, a.code, a.message)
			}
			var snap struct {
				RoomID      string `json:"room_id"`
				RoomShortID string `json:"room_short_id"`
			}
			if err := a.decode(&snap); err != nil || snap.RoomID == "" {
				return fmt.Errorf("create room of %d: unexpected answer %s", o.u.id, a.raw)
			}
			mu.Lock()
			rooms[i] = room{app: o.u.app, id: snap.RoomID, shortID: snap.RoomShortID, hostToken: tok}
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	// The first room of each app is its probe room; the others take load.
	seen := map[string]bool{}
	for _, r := range rooms {
		if !seen[r.app] {
			seen[r.app] = true
			pr := w.probes[r.app]
			pr.room = r
			w.probes[r.app] = pr
			continue
		}
		w.byApp[r.app] = append(w.byApp[r.app], len(w.rooms))
		w.rooms = append(w.rooms, r)
	}
	w.created = time.Now()
	return w, nil
}

// share is the part of n that the i-th of k gets.
func share(n, k, i int) int {
	s := n / k
	if i < n%k {
		s++
	}
	return s
}

// seedUsers registers users through the regions service, eight at a time.
func seedUsers(ctx context.Context, svc *regions.Service, app string, users []regions.SeedUser) error {
	g, gctx := errgroup.WithContext(ctx)
	const chunks = 8
	for c := range chunks {
		var part []regions.SeedUser
		for i := c; i < len(users); i += chunks {
			part = append(part, users[i])
		}
		g.Go(func() error {
			if _, err := svc.Seed(gctx, app, regions.SeedData{Users: part}); err != nil {
				return fmt.Errorf("seed users of %s: %w", app, err)
			}
			return nil
		})
	}
	return g.Wait()
}
