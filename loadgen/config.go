package loadgen

import (
	"io"
	"net/url"
	"slices"
	"time"

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/authtoken"
)

// Config is one bench run.
type Config struct {
	// BaseURL is the target's HTTP root, e.g. http://127.0.0.1:8080. Required.
	BaseURL string
	// OpsURL is the root of the target's operators' listener, e.g.
	// http://127.0.0.1:9090, where its /metrics (CPU, memory, the publish
	// latency histogram) and /debug/pprof (a GC before reading the heap)
	// are read. Empty: those figures are n/a.
	OpsURL string
	// Keys sign each app's users' and operator's tokens: a key the target
	// verifies that app's tokens with (an app's own key, or the single
	// secret in development). Required for every app of Apps.
	Keys map[string]authtoken.Key
	// Apps are the app codes the load is spread over. Default
	// ["bencha", "benchb"]. Their rows are the bench's: a run adds to them.
	Apps []string
	// Rooms is the number of rooms R, split evenly across Apps. Default 1000.
	Rooms int
	// Regions is K, the regions created in each app. Default 4.
	Regions int
	// Users is U, the users joining rooms, split across Apps (room owners
	// come on top). Default 4 × Rooms.
	Users int
	// Clients is the number of concurrent closed-loop clients (and the
	// concurrency of the ceilings). Default 64.
	Clients int
	// ListClients read and search the room list at the same time. Default
	// 4; NoListClients (-1) runs none.
	ListClients int
	// Rate, when positive, switches to open loop: commands start at this many
	// per second whatever the answers' speed, and latency counts from each
	// command's scheduled start. Default 0 (closed loop).
	Rate float64
	// Mix is the command mix: MixMixed (the default: heartbeats, leaves,
	// seat changes and gifts, below), MixJoinLeave (a user in no room
	// joins one, a user in a room leaves it: every command answered OK is
	// durable) or MixHosts (the hosts' tools: requests to speak,
	// invitations, seat mutes and self-mutes, room information, chat mutes
	// and room admins, beside joins, leaves and today's seat commands),
	// MixGifts (every command of a user in a room a gift) or MixGiftsPK
	// (the same, every room paired into a PK battle first: pk.go).
	Mix string
	// Duration is the load phase. Default 30s.
	Duration time.Duration
	// Seed makes the users, rooms and choices repeatable. Default 1.
	Seed int64
	// CeilingDuration is how long each ceiling runs. Default 5s.
	CeilingDuration time.Duration
	// DrainRows is the backlog the relay's drain rate is measured on; 0 skips
	// it (the bench command's --drain-rows defaults to 20000).
	DrainRows int
	// DrainApp is the app code of the backlog's rows. Default "benchdrain".
	DrainApp string
	// EmulatorURL is the IM emulator's root (its /_emu routes); empty
	// reports commit → IM receipt as n/a.
	EmulatorURL string
	// Webhooks runs a receiver on this host as each app's webhook
	// endpoint and measures commit → receipt and the delivery rate. The
	// target must allow http and loopback URLs
	// (VOICEROOM_WEBHOOKS_ALLOW_HTTP, _ALLOW_PRIVATE_ADDRESSES).
	Webhooks bool
	// WebhooksOutage, with Webhooks, takes the receiver down (503) for
	// this long, from a sixth of the load phase on, and measures how the
	// backlog drains once it is back. At most Duration.
	WebhooksOutage time.Duration
	// QuietTimeout bounds the wait for the outbox to drain after the load.
	// Default 60s.
	QuietTimeout time.Duration
	// Progress receives the live line once a second; nil prints nothing.
	Progress io.Writer
	// Profile, when set, is called with the load phase's length as it
	// starts; it returns a function that stops the profile. In-process runs
	// use runtime/pprof; remote runs fetch OpsURL's /debug/pprof/profile.
	Profile func(d time.Duration) (stop func() error, err error)
}

// NoListClients is ListClients for a run without list readers (0 is the
// default's 4).
const NoListClients = -1

// WithDefaults returns a copy with zero fields defaulted.
func (c Config) WithDefaults() Config {
	if len(c.Apps) == 0 {
		c.Apps = []string{"bencha", "benchb"}
	}
	if c.Rooms == 0 {
		c.Rooms = 1000
	}
	if c.Regions == 0 {
		c.Regions = 4
	}
	if c.Users == 0 {
		c.Users = 4 * c.Rooms
	}
	if c.Clients == 0 {
		c.Clients = 64
	}
	if c.ListClients == 0 {
		c.ListClients = 4
	}
	if c.Mix == "" {
		c.Mix = MixMixed
	}
	if c.Duration == 0 {
		c.Duration = 30 * time.Second
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.CeilingDuration == 0 {
		c.CeilingDuration = 5 * time.Second
	}
	if c.DrainApp == "" {
		c.DrainApp = "benchdrain"
	}
	if c.QuietTimeout == 0 {
		c.QuietTimeout = 60 * time.Second
	}
	return c
}

// Validate reports the first field that is out of range, as an
// *apperr.ConfigError naming the field; its message starts with the
// field's name in words. It never mutates.
func (c Config) Validate() error {
	switch {
	case !httpURL(c.BaseURL):
		return apperr.BadConfig("BaseURL", "base url %q: want http://host:port", c.BaseURL)
	case c.OpsURL != "" && !httpURL(c.OpsURL):
		return apperr.BadConfig("OpsURL", "ops url %q: want http://host:port", c.OpsURL)
	case len(c.Apps) == 0 || len(c.Apps) > 16:
		return apperr.BadConfig("Apps", "apps: want 1..16")
	case slices.ContainsFunc(c.Apps, func(app string) bool { return len(c.Keys[app].Secret) < authtoken.MinSecret }):
		return apperr.BadConfig("Keys", "keys: every app needs a key of at least %d bytes", authtoken.MinSecret)
	case c.Rooms < len(c.Apps) || c.Rooms > 100000:
		return apperr.BadConfig("Rooms", "rooms: want %d..100000, got %d", len(c.Apps), c.Rooms)
	case c.Regions < 1 || c.Regions > len(countryCodes):
		return apperr.BadConfig("Regions", "regions: want 1..%d, got %d", len(countryCodes), c.Regions)
	case c.Users < len(c.Apps) || c.Users > 1000000:
		return apperr.BadConfig("Users", "users: want %d..1000000, got %d", len(c.Apps), c.Users)
	case c.Clients < 1 || c.Clients > 4096:
		return apperr.BadConfig("Clients", "clients: want 1..4096, got %d", c.Clients)
	case c.ListClients < NoListClients || c.ListClients > 1024:
		return apperr.BadConfig("ListClients", "list clients: want %d (none) or 0..1024, got %d", NoListClients, c.ListClients)
	case c.Rate < 0 || c.Rate > 1e6:
		return apperr.BadConfig("Rate", "rate: want 0..1000000, got %g", c.Rate)
	case !slices.Contains([]string{MixMixed, MixJoinLeave, MixHosts, MixGifts, MixGiftsPK}, c.Mix):
		return apperr.BadConfig("Mix", "mix: want %s, %s, %s, %s or %s, got %q", MixMixed, MixJoinLeave, MixHosts, MixGifts, MixGiftsPK, c.Mix)
	case c.Duration < time.Second:
		return apperr.BadConfig("Duration", "duration: want at least 1s, got %s", c.Duration)
	case c.CeilingDuration < 0:
		return apperr.BadConfig("CeilingDuration", "ceiling duration: must not be negative")
	case c.DrainRows < 0 || c.DrainRows > 10000000:
		return apperr.BadConfig("DrainRows", "drain rows: want 0..10000000, got %d", c.DrainRows)
	case c.WebhooksOutage < 0 || c.WebhooksOutage > c.Duration:
		return apperr.BadConfig("WebhooksOutage", "webhooks outage: want 0..duration (%s), got %s", c.Duration, c.WebhooksOutage)
	case c.WebhooksOutage > 0 && !c.Webhooks:
		return apperr.BadConfig("WebhooksOutage", "webhooks outage: needs Webhooks")
	case c.QuietTimeout <= 0:
		return apperr.BadConfig("QuietTimeout", "quiet timeout: must be positive")
	case c.DrainApp != "" && !voiceroom.ValidAppCode(c.DrainApp):
		return apperr.BadConfig("DrainApp", "drain app %q: %s", c.DrainApp, voiceroom.AppCodeRule)
	}
	for _, app := range c.Apps {
		if !voiceroom.ValidAppCode(app) {
			return apperr.BadConfig("Apps", "apps: %q: %s", app, voiceroom.AppCodeRule)
		}
	}
	if c.EmulatorURL != "" {
		if u, err := url.Parse(c.EmulatorURL); err != nil || u.Host == "" {
			return apperr.BadConfig("EmulatorURL", "emulator url %q: want http://host:port", c.EmulatorURL)
		}
	}
	return nil
}

// httpURL reports whether s is an http(s) URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// countryCodes are the countries users live in; region k of K gets every
// K-th one.
var countryCodes = []string{"SG", "MY", "ID", "TH", "PH", "VN", "SA", "AE", "EG", "KW", "QA", "IN", "PK", "BD", "BR", "MX", "AR", "CO"}
