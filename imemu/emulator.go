package imemu

import (
	"net/http"
	"sync"
	"time"

	"voiceroom/apperr"
	"voiceroom/imbridge"
)

// Emulator is a local stand-in for Tencent IM's REST API (what it checks
// and what it leaves out is in the package comment). It is an
// http.Handler serving the REST API under /v4/ and the inspection API
// under /_emu/, and safe for concurrent use.
type Emulator struct {
	apps        map[int64]imbridge.Application
	now         func() time.Time
	maxMessages int
	onShown     func([]string, time.Time)
	proofKey    []byte

	mu       sync.Mutex
	groups   map[string]*group // "<sdkappid>/<group_id>"
	messages []Message
	events   map[string]*Event
	randoms  map[string]time.Time // "<sdkappid>/<group_id>/<random>" → when shown
	stats    Stats
	fault    *Fault
	// faultCalls counts the calls the fault failed (Fault.Calls).
	faultCalls int
	faultEnd   time.Time
	seq        int64
	mux        *http.ServeMux
}

// Config configures an Emulator.
type Config struct {
	// Apps are the applications it accepts. Required.
	Apps []imbridge.Application
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// MaxMessages bounds the messages kept for inspection (the oldest go
	// first; counts and events are kept regardless). Default 200000.
	MaxMessages int
	// OnShown, when set (benchmarks), sees every message shown, with its
	// event ids, under the emulator's lock: it must be quick.
	OnShown func(eventIDs []string, at time.Time)
	// ProofKey, when set, is the key the emulator proves it holds on
	// GET /_emu/proof (see Verify), at least MinProofKey bytes. Empty: it
	// proves nothing and that route answers 404.
	ProofKey []byte
}

// Tencent's limits, as the emulator applies them.
const (
	groupRate     = 40 // messages per second per group
	maxGroupID    = 48 // bytes of a GroupId
	duplicateTTL  = 5 * time.Minute
	maxBody       = 64 * 1024
	timeoutCap    = 30 * time.Second
	defaultListed = 100
)

// group is a group, the receipts its rate rule counts and its members'
// chat mutes.
type group struct {
	Group
	sdkAppID int64
	recent   []time.Time      // receipts within the last second
	mutes    map[string]*Mute // by account: the last forbid_send_msg naming it
}

// WithDefaults returns c with zero fields defaulted.
func (c Config) WithDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxMessages == 0 {
		c.MaxMessages = 200000
	}
	return c
}

// Validate checks c after defaults; it never changes c. Errors are
// *apperr.ConfigError naming the field.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if len(c.Apps) == 0 {
		return apperr.BadConfig("Apps", "emulator: no application")
	}
	for _, a := range c.Apps {
		if err := a.Validate(); err != nil {
			return apperr.BadConfig("Apps", "emulator: application %d: %w", a.SDKAppID, err)
		}
	}
	if len(c.ProofKey) > 0 && len(c.ProofKey) < MinProofKey {
		return apperr.BadConfig("ProofKey", "emulator: proof key of %d bytes: want at least %d", len(c.ProofKey), MinProofKey)
	}
	if c.MaxMessages < 1 {
		return apperr.BadConfig("MaxMessages", "emulator: max messages %d: must be at least 1", c.MaxMessages)
	}
	return nil
}

// New returns an Emulator accepting cfg.Apps.
func New(cfg Config) (*Emulator, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Emulator{apps: map[int64]imbridge.Application{}, now: cfg.Now, maxMessages: cfg.MaxMessages, onShown: cfg.OnShown,
		proofKey: cfg.ProofKey}
	for _, a := range cfg.Apps {
		e.apps[a.SDKAppID] = a
	}
	e.resetLocked()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v4/{service}/{command}", e.serveREST)
	mux.HandleFunc("GET /_emu/groups", e.serveGroups)
	mux.HandleFunc("GET /_emu/messages", e.serveMessages)
	mux.HandleFunc("GET /_emu/events/{event_id}", e.serveEvent)
	mux.HandleFunc("GET /_emu/mutes", e.serveMutes)
	mux.HandleFunc("GET /_emu/stats", e.serveStats)
	mux.HandleFunc("POST /_emu/faults", e.serveSetFault)
	mux.HandleFunc("DELETE /_emu/faults", e.serveClearFault)
	mux.HandleFunc("POST /_emu/reset", e.serveReset)
	mux.HandleFunc("GET /_emu/proof", e.serveProof)
	e.mux = mux
	return e, nil
}

// ServeHTTP serves the REST API and the inspection API.
func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.mux.ServeHTTP(w, r) }

func (e *Emulator) resetLocked() {
	e.groups = map[string]*group{}
	e.messages = nil
	e.events = map[string]*Event{}
	e.randoms = map[string]time.Time{}
	e.stats = Stats{Calls: map[string]int{}, Errors: map[string]int{}}
	e.fault = nil
	e.seq = 0
}

// Reset forgets everything received and clears faults.
func (e *Emulator) Reset() {
	e.mu.Lock()
	e.resetLocked()
	e.mu.Unlock()
}
