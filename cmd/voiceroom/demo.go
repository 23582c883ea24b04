package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"voiceroom/apiclient"
	"voiceroom/authtoken"

	"voiceroom"
)

// demoConfig is what `voiceroom demo` runs against.
type demoConfig struct {
	// URL is the running voiceroom's base URL. Default http://127.0.0.1:8080;
	// demo sets it from --url, else from VOICEROOM_HTTP_ADDR.
	URL string
	// OpsURL is the base URL of its operators' listener (/metrics); empty:
	// the metrics step is skipped. demo sets it from --ops-url, else from
	// URL's host and VOICEROOM_OPS_ADDR's port.
	OpsURL string
	// IMEmuURL is the base URL of the Tencent IM emulator serve delivers
	// system messages to. Default http://127.0.0.1:18080; demo sets it from
	// --imemu, else from VOICEROOM_IMEMU_LISTEN.
	IMEmuURL string
	// App is the app_code the demo acts in. Default "demo" (the seeded app).
	App string
	// Wait bounds each wait for an eventually consistent view (the room
	// lists, the emulator's messages). Default 20s.
	Wait time.Duration
	// RequestTimeout bounds each HTTP request. Default 10s.
	RequestTimeout time.Duration
}

// WithDefaults returns a copy with zero fields defaulted.
func (c demoConfig) WithDefaults() demoConfig {
	if c.URL == "" {
		c.URL = "http://127.0.0.1:8080"
	}
	if c.IMEmuURL == "" {
		c.IMEmuURL = "http://127.0.0.1:18080"
	}
	if c.App == "" {
		c.App = "demo"
	}
	if c.Wait == 0 {
		c.Wait = 20 * time.Second
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 10 * time.Second
	}
	c.URL = strings.TrimRight(c.URL, "/")
	c.OpsURL = strings.TrimRight(c.OpsURL, "/")
	c.IMEmuURL = strings.TrimRight(c.IMEmuURL, "/")
	return c
}

// Validate reports the first bad field, named by its flag. It never
// mutates.
func (c demoConfig) Validate() error {
	for _, f := range []struct{ name, v string }{{"--url", c.URL}, {"--imemu", c.IMEmuURL}, {"--ops-url", c.OpsURL}} {
		if f.name == "--ops-url" && f.v == "" {
			continue
		}
		u, err := url.Parse(f.v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s: want an http(s) URL, got %q", f.name, f.v)
		}
	}
	switch {
	case c.App == "":
		return errors.New("--app: is required")
	case !voiceroom.ValidAppCode(c.App):
		return fmt.Errorf("--app: want %s, got %q", voiceroom.AppCodeRule, c.App)
	case c.Wait <= 0:
		return fmt.Errorf("--wait: want > 0, got %v", c.Wait)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("RequestTimeout: want > 0, got %v", c.RequestTimeout)
	}
	return nil
}

// imemuListenVar is where deploy/run.sh (task run) starts the IM emulator;
// the demo looks for it there.
const imemuListenVar = "VOICEROOM_IMEMU_LISTEN"

// fromEnv fills what the flags left empty from where task run puts things:
// URL from VOICEROOM_HTTP_ADDR, OpsURL from URL's host and
// VOICEROOM_OPS_ADDR's port, IMEmuURL from VOICEROOM_IMEMU_LISTEN (each on
// loopback when it listens on every address).
func (c demoConfig) fromEnv(cfg config) (demoConfig, error) {
	var err error
	if c.URL == "" {
		if c.URL, err = localURL(cfg.HTTPAddr, ""); err != nil {
			return c, badVar("VOICEROOM_HTTP_ADDR", "%v", err)
		}
	}
	if c.IMEmuURL == "" {
		if listen := os.Getenv(imemuListenVar); listen != "" {
			if c.IMEmuURL, err = localURL(listen, ""); err != nil {
				return c, badVar(imemuListenVar, "%v", err)
			}
		}
	}
	if c.OpsURL == "" {
		if c.OpsURL, err = defaultOpsURL(c.WithDefaults().URL, cfg.OpsAddr); err != nil {
			return c, err
		}
	}
	return c, nil
}

// demo walks a newcomer through the running product: users, rooms, seats,
// gifts, the hosts' tools, region lists, an operator's pin, hide and ban, the IM system
// messages, and where to look next. Every run makes fresh users and rooms
// and undoes what operators did; a step whose feature this server lacks is
// skipped. It fails only on an unexpected answer.
func demo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var dc demoConfig
	fs.StringVar(&dc.URL, "url", "", "base URL of the running voiceroom (default VOICEROOM_HTTP_ADDR on loopback, http://127.0.0.1:8080)")
	fs.StringVar(&dc.IMEmuURL, "imemu", "", "base URL of the IM emulator (default VOICEROOM_IMEMU_LISTEN, http://127.0.0.1:18080, where task run starts it)")
	fs.StringVar(&dc.OpsURL, "ops-url", "", "base URL of voiceroom's operators' listener, for /metrics (default --url's host on VOICEROOM_OPS_ADDR's port, 9090)")
	fs.StringVar(&dc.App, "app", "", "app_code to act in (default demo)")
	fs.DurationVar(&dc.Wait, "wait", 0, "how long to wait for the lists and the emulator (default 20s)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Println("usage: voiceroom demo [flags]\n\nWalks through the running product; see the README's demo section and docs/api.md.")
		fs.SetOutput(os.Stdout)
		fs.PrintDefaults()
		return nil
	} else if err != nil {
		return fmt.Errorf("%w: demo: %v", errUsage, err)
	}
	if err := dc.WithDefaults().Validate(); err != nil { // before looking for the key
		return fmt.Errorf("%w: demo: %v", errUsage, err)
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	if dc, err = dc.fromEnv(cfg); err != nil {
		return fmt.Errorf("%w: demo: %v", errUsage, err)
	}
	key, note, err := cfg.signingKey(ctx, newLogger(cfg), dc.WithDefaults().App)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintln(os.Stderr, "demo:", note)
	}
	d, err := newDemoRun(dc, key, os.Stdout)
	if err != nil {
		return fmt.Errorf("%w: demo: %v", errUsage, err)
	}
	return d.run(ctx)
}

// demoGiftID is the catalog entry the demo creates (or updates) in its app.
const demoGiftID = 90001

// demoUser is one of the run's fresh users and the room it owns.
type demoUser struct {
	demoActor
	country    string
	display    string
	regionID   int64
	regionCode string
	room       demoRoom
}

// demoRun is one run of the demo.
type demoRun struct {
	cfg   demoConfig
	c     *demoClient
	out   io.Writer
	tag   string
	admin demoActor

	sg, my, sa *demoUser
	receiver   *demoReceiver // the app's backend; nil when the server refused it
	names      map[int64]string
	regions    map[int64]string
	hasList    bool
	undo       undoStack
}

// newDemoRun prepares a run with fresh users; cfg is defaulted, then
// validated.
func newDemoRun(cfg demoConfig, key authtoken.Key, out io.Writer) (*demoRun, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	tag := make([]byte, 6)
	for i := range tag {
		tag[i] = alphabet[rand.IntN(len(alphabet))]
	}
	d := &demoRun{
		cfg: cfg,
		c: &demoClient{
			api: apiclient.Client{BaseURL: cfg.URL, HTTP: &http.Client{Timeout: cfg.RequestTimeout}},
			app: cfg.App, key: key, out: out,
			aliases: map[string]string{},
		},
		out:     out,
		tag:     string(tag),
		admin:   demoActor{name: "operator", userID: 1, admin: true},
		names:   map[int64]string{},
		regions: map[int64]string{0: "GLOBAL"},
	}
	user := func(country string) *demoUser {
		id := 1_000_000_000 + rand.Int64N(8_000_000_000)
		display := "demo_" + strings.ToLower(country) + "_" + d.tag
		d.names[id] = display
		return &demoUser{demoActor: demoActor{name: display, userID: id}, country: country, display: display}
	}
	d.sg, d.my, d.sa = user("SG"), user("MY"), user("SA")
	return d, nil
}

func (d *demoRun) users() []*demoUser { return []*demoUser{d.sg, d.my, d.sa} }

func (d *demoRun) say(format string, args ...any) {
	fmt.Fprintf(d.out, "   "+format+"\n", args...)
}

// skipped reports whether err is a missing route, and if so says so.
func (d *demoRun) skipped(err error, feature string) bool {
	if !errors.Is(err, errRouteMissing) {
		return false
	}
	d.say("skipped: %s is not on this server (%v)", feature, err)
	return true
}

// run runs every step in order, then undoes what is left to undo, also
// after a failure or an interrupt.
func (d *demoRun) run(ctx context.Context) (err error) {
	fmt.Fprintf(d.out, "voiceroom demo: app %q at %s, run %q (every run makes fresh users and rooms)\n", d.cfg.App, d.cfg.URL, d.tag)
	if err := d.checkServer(ctx); err != nil {
		return err
	}
	defer func() {
		if uerr := d.undo.run(ctx, d.out); err == nil {
			err = uerr
		}
	}()
	steps := []struct {
		title string
		fn    func(context.Context) error
	}{
		{"Users in SG, MY and SA (the server computes each one's region)", d.stepUsers},
		{"Rooms, joins, seats and heartbeats", d.stepRooms},
		{"Gifts and coins, and a PK battle between two rooms", d.stepGifts},
		{"Hosts' tools: a room admin, apply mode, a request approved, a muted seat, the member list", d.stepHosts},
		{"Region lists: SG and MY see one list, SA another", d.stepLists},
		{"An operator pins a room, then unpins it", d.stepPin},
		{"An operator hides a room, then unhides it", d.stepHide},
		{"An operator bans a room, then restores it", d.stepBan},
		{"The IM emulator holds the rooms' system messages", d.stepIM},
		{"The owners close the demo rooms", d.stepClose},
		{"The app's backend got each room's events by webhook: signed, in order", d.stepWebhooks},
		{"Where to look next", d.stepNext},
	}
	fmt.Fprintf(d.out, "\n0. The app's backend: a webhook receiver on this machine\n")
	if err := d.startReceiver(ctx); err != nil {
		return fmt.Errorf("demo step 0 (webhook receiver): %w", err)
	}
	for i, s := range steps {
		fmt.Fprintf(d.out, "\n%d. %s\n", i+1, s.title)
		if err := s.fn(ctx); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("demo interrupted in step %d (%s)", i+1, s.title)
			}
			return fmt.Errorf("demo step %d (%s): %w", i+1, s.title, err)
		}
	}
	fmt.Fprintf(d.out, "\ndemo finished: run %q left its users and closed rooms behind, and undid every pin, hide and ban\n", d.tag)
	return nil
}

// checkServer fails early, with a hint, when the server is not there or
// does not take the demo's tokens.
func (d *demoRun) checkServer(ctx context.Context) error {
	status, _, err := d.c.getPlain(ctx, d.cfg.URL+"/readyz", 4096)
	if err != nil {
		return fmt.Errorf("cannot reach voiceroom at %s (%v): start it first, e.g. go tool -modfile=tools.mod task run", d.cfg.URL, err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("voiceroom at %s is not ready (/readyz answers %d): wait for it, or look at its log", d.cfg.URL, status)
	}
	err = d.c.send(ctx, http.MethodGet, "/admin/v1/regions", d.admin, nil, nil)
	if isCode(err, "UNAUTHENTICATED") {
		return fmt.Errorf("voiceroom at %s refuses the demo's tokens (%v): it signs with another key; run the demo with the "+
			"VOICEROOM_MYSQL_DSN, VOICEROOM_APPS_SECRET_KEY and VOICEROOM_DATA_DIR serve has (task demo from the repository root does), "+
			"or with the app's key in VOICEROOM_APP_KEYS", d.cfg.URL, err)
	}
	return err
}

func (d *demoRun) stepUsers(ctx context.Context) error {
	var list struct {
		Regions []struct {
			RegionID   int64  `json:"region_id"`
			RegionCode string `json:"region_code"`
			Status     string `json:"status"`
			Countries  []struct {
				Code    string `json:"country_code"`
				Enabled bool   `json:"enabled"`
			} `json:"countries"`
		} `json:"regions"`
		Unassigned []struct {
			Code string `json:"country_code"`
		} `json:"unassigned_countries"`
	}
	if err := d.c.call(ctx, http.MethodGet, "/admin/v1/regions", d.admin, nil, &list); err != nil {
		return err
	}
	where := map[string]string{}
	for _, r := range list.Regions {
		d.regions[r.RegionID] = r.RegionCode
		for _, c := range r.Countries {
			where[c.Code] = r.RegionCode
		}
	}
	for _, c := range list.Unassigned {
		where[c.Code] = "GLOBAL"
	}
	for _, u := range d.users() {
		if where[u.country] == "" {
			return fmt.Errorf("app %q does not offer country %s: seed it first (go tool -modfile=tools.mod task seed -- %s)",
				d.cfg.App, u.country, d.cfg.App)
		}
	}
	d.say("-> the app maps SG to %s, MY to %s, SA to %s", where["SG"], where["MY"], where["SA"])
	for _, u := range d.users() {
		var p struct {
			RegionID   int64  `json:"region_id"`
			RegionCode string `json:"region_code"`
		}
		// A region_id in the body is ignored: the server computes it.
		body := map[string]any{"display_user_id": u.display, "country": u.country, "region_id": 999}
		if err := d.c.call(ctx, http.MethodPut, "/api/v1/users/me", u.demoActor, body, &p); err != nil {
			return err
		}
		u.regionID, u.regionCode = p.RegionID, p.RegionCode
		d.say("-> user %d %s: country %s, region %s (%d)", u.userID, u.display, u.country, p.RegionCode, p.RegionID)
	}
	if d.sg.regionID != d.my.regionID {
		d.say("note: MY is not in SG's region now (an operator moved it; the region walk-through in docs/api.md shows how, and puts it back)")
	}
	return nil
}

// showRoom prints a room snapshot in one line.
func (d *demoRun) showRoom(r demoRoom) {
	var seats, rank []string
	for _, s := range r.Seats {
		if s.UserID != 0 {
			seat := fmt.Sprintf("%d:%s", s.Index, d.name(s.UserID))
			if s.Muted {
				seat += "(muted)"
			}
			seats = append(seats, seat)
		}
	}
	for _, c := range r.GiftRank {
		rank = append(rank, fmt.Sprintf("%s=%d", d.name(c.UserID), c.Value))
	}
	d.say("-> room %q: status %s, region %s, online %d, seats [%s], heat %d, gift rank (senders) [%s], room_version %d",
		r.Title, r.Status, d.region(r.VisibleRegionID), r.OnlineCount, strings.Join(seats, " "), r.Heat, strings.Join(rank, " "), r.RoomVersion)
}

func (d *demoRun) region(id int64) string {
	if code, ok := d.regions[id]; ok {
		return code
	}
	return itoa(id)
}

func (d *demoRun) name(id int64) string {
	if n, ok := d.names[id]; ok {
		return n
	}
	return itoa(id)
}

func roomPath(r demoRoom, tail string) string { return "/api/v1/rooms/" + r.RoomID + tail }

func (d *demoRun) stepRooms(ctx context.Context) error {
	for _, u := range d.users() {
		body := map[string]any{"room_name": u.country + " demo room " + d.tag, "seat_count": 8}
		if err := d.c.call(ctx, http.MethodPost, "/api/v1/rooms/create", u.demoActor, body, &u.room); err != nil {
			return err
		}
		room := u.room
		d.undo.push("room "+room.RoomID, func(ctx context.Context) error {
			err := d.c.call(ctx, http.MethodPost, "/admin/v1/rooms/"+room.RoomID+"/close", d.admin, map[string]any{"reason": "demo cleanup"}, nil)
			if isCode(err, "FAILED_PRECONDITION") { // closed already
				return nil
			}
			return err
		})
		alias := "$ROOM_" + u.country
		d.c.aliases[room.RoomID] = alias
		group := room.IMGroupID
		if group == room.RoomID {
			group = "the room_id"
		}
		d.say("-> %s = room_id %s: room_short_id %s (the owner's display id), region %s (the owner's), im_group_id %s",
			alias, room.RoomID, room.RoomShortID, d.region(room.VisibleRegionID), group)
		if err := d.c.call(ctx, http.MethodPost, roomPath(room, "/join"), u.demoActor, nil, &u.room); err != nil {
			return err
		}
	}
	d.say("rooms are listed only in their region, but anyone may join one by its id:")
	for _, u := range []*demoUser{d.my, d.sa} {
		if err := d.c.call(ctx, http.MethodPost, roomPath(d.sg.room, "/join"), u.demoActor, nil, nil); err != nil {
			return err
		}
	}
	for i, u := range []*demoUser{d.sg, d.my} {
		if err := d.c.call(ctx, http.MethodPost, roomPath(d.sg.room, "/mic/up"), u.demoActor, map[string]any{"seat_index": i}, nil); err != nil {
			return err
		}
	}
	d.say("a taken seat is refused, and nothing changes:")
	err := d.c.call(ctx, http.MethodPost, roomPath(d.sg.room, "/mic/up"), d.sa.demoActor, map[string]any{"seat_index": 1}, nil)
	if !isCode(err, "FAILED_PRECONDITION") {
		return fmt.Errorf("a taken seat: want FAILED_PRECONDITION, got %v", err)
	}
	d.say("-> %s", refusal(err))
	d.say("present users must send heartbeats more often than VOICEROOM_ROOMS_PRESENCE_TTL (30 s by default),")
	d.say("or the presence sweeper takes them out of the room (RoomUserLeft, reason stale):")
	for _, u := range []*demoUser{d.sg, d.my, d.sa} {
		if err := d.c.call(ctx, http.MethodPost, roomPath(d.sg.room, "/heartbeat"), u.demoActor, nil, nil); err != nil {
			return err
		}
	}
	if err := d.c.call(ctx, http.MethodGet, roomPath(d.sg.room, ""), d.sg.demoActor, nil, &d.sg.room); err != nil {
		return err
	}
	d.showRoom(d.sg.room)
	return nil
}

// showRanks prints the room's ranks of the day, by sender and by
// receiver (kept from the gift ledger, in the app's time zone).
func (d *demoRun) showRanks(ctx context.Context) error {
	for _, by := range []string{"sender", "receiver"} {
		var rank struct {
			TimeZone string `json:"time_zone"`
			Items    []struct {
				UserID int64 `json:"user_id"`
				Value  int64 `json:"value"`
				Rank   int   `json:"rank"`
			} `json:"items"`
		}
		if err := d.c.call(ctx, http.MethodGet, roomPath(d.sg.room, "/ranks?by="+by+"&period=day&limit=3"), d.sg.demoActor, nil, &rank); err != nil {
			return err
		}
		var items []string
		for _, it := range rank.Items {
			items = append(items, fmt.Sprintf("#%d user %d: %d coins", it.Rank, it.UserID, it.Value))
		}
		d.say("-> today's %s rank (%s): [%s]", by, rank.TimeZone, strings.Join(items, ", "))
	}
	return nil
}

func (d *demoRun) stepGifts(ctx context.Context) error {
	d.say("gifts come from the app's catalog, and the sender pays price x count coins:")
	gift := map[string]any{"gift_id": demoGiftID, "name": "Demo rose", "price": 10, "heat": 10}
	if err := d.c.call(ctx, http.MethodPost, "/admin/v1/gifts", d.admin, gift, nil); err != nil {
		return err
	}
	d.say("-> gift %d \"Demo rose\": 10 coins, 10 heat each", demoGiftID)
	var w struct {
		Balance  int64 `json:"balance"`
		Replayed bool  `json:"replayed"`
	}
	credit := map[string]any{"amount": 100, "idempotency_key": "demo-" + d.tag + "-sg"}
	path := "/admin/v1/wallets/" + itoa(d.sg.userID) + "/credit"
	for range 2 {
		if err := d.c.call(ctx, http.MethodPost, path, d.admin, credit, &w); err != nil {
			return err
		}
		d.say("-> balance %d (replayed %v: the same idempotency_key credits once)", w.Balance, w.Replayed)
	}
	send := func(count int) error {
		body := map[string]any{"gift_id": demoGiftID, "count": count, "receiver_user_id": d.my.userID}
		return d.c.call(ctx, http.MethodPost, roomPath(d.sg.room, "/gift"), d.sg.demoActor, body, &d.sg.room)
	}
	if err := send(3); err != nil {
		return err
	}
	d.showRoom(d.sg.room)
	if err := d.showRanks(ctx); err != nil {
		return err
	}
	if err := d.c.call(ctx, http.MethodGet, "/api/v1/wallet", d.sg.demoActor, nil, &w); err != nil {
		return err
	}
	d.say("-> %s has %d coins left", d.sg.display, w.Balance)
	d.say("20 roses cost 200 coins: refused, and nothing changes:")
	err := send(20)
	if !isCode(err, "INSUFFICIENT_BALANCE") {
		return fmt.Errorf("a gift beyond the balance: want INSUFFICIENT_BALANCE, got %v", err)
	}
	d.say("-> %s", refusal(err))
	return d.stepPK(ctx)
}
