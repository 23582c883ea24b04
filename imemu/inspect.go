package imemu

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"time"

	"voiceroom/imbridge"
)

// Group is a group as /_emu/groups shows it.
type Group struct {
	GroupID      string `json:"group_id"`
	Name         string `json:"name"`
	Owner        string `json:"owner"`
	Type         string `json:"type"`
	CreatedAtMs  int64  `json:"created_at_ms"`
	Destroyed    bool   `json:"destroyed"`
	MessageCount int    `json:"message_count"`
}

// Message is a shown message as /_emu/messages shows it.
type Message struct {
	GroupID      string   `json:"group_id"`
	Random       uint32   `json:"random"`
	MsgSeq       int64    `json:"msg_seq"`
	ReceivedAtMs int64    `json:"received_at_ms"`
	Priority     string   `json:"priority"`
	Desc         string   `json:"desc"`
	EventIDs     []string `json:"event_ids"`
	Data         string   `json:"data"`
}

// Event is what /_emu/events/{event_id} shows: how often the event was
// shown (after the duplicate check and the rate rule).
type Event struct {
	EventID           string `json:"event_id"`
	Shown             int    `json:"shown"`
	GroupID           string `json:"group_id"`
	FirstReceivedAtMs int64  `json:"first_received_at_ms"`
}

// Mute is a member's chat mute in a group as /_emu/mutes shows it: what
// the last forbid_send_msg naming the account set.
type Mute struct {
	GroupID string `json:"group_id"`
	Account string `json:"account"`
	// MuteTime is the call's, in seconds: 0 lifted the mute,
	// imbridge.MaxMuteTime set it for ever.
	MuteTime int64 `json:"mute_time"`
	// SetAtMs is when the call arrived.
	SetAtMs int64 `json:"set_at_ms"`
	// UntilMs is when the mute ends, SetAtMs + MuteTime seconds; 0 when
	// lifted or for ever.
	UntilMs int64 `json:"until_ms"`
	// Muted is whether the account is muted now, on the emulator's clock.
	Muted bool `json:"muted"`
}

// activeAt reports whether m mutes its account at now.
func (m *Mute) activeAt(now time.Time) bool {
	return m.MuteTime == imbridge.MaxMuteTime || (m.MuteTime > 0 && now.UnixMilli() < m.UntilMs)
}

// Stats is what /_emu/stats shows.
type Stats struct {
	Calls             map[string]int `json:"calls"`
	Errors            map[string]int `json:"errors"`
	Messages          int            `json:"messages"`
	EventsShown       int            `json:"events_shown"`
	DuplicatesDropped int            `json:"duplicates_dropped"`
	RateDropped       int            `json:"rate_dropped"`
}

// Event returns how event id was received, false if never shown.
func (e *Emulator) Event(id string) (Event, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev, ok := e.events[id]
	if !ok {
		return Event{}, false
	}
	return *ev, true
}

// Stats returns the counters.
func (e *Emulator) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Calls, s.Errors = map[string]int{}, map[string]int{}
	for k, v := range e.stats.Calls {
		s.Calls[k] = v
	}
	for k, v := range e.stats.Errors {
		s.Errors[k] = v
	}
	return s
}

// Groups returns the groups, by creation.
func (e *Emulator) Groups() []Group {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Group, 0, len(e.groups))
	for _, g := range e.groups {
		out = append(out, g.Group)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAtMs != out[j].CreatedAtMs {
			return out[i].CreatedAtMs < out[j].CreatedAtMs
		}
		return out[i].GroupID < out[j].GroupID
	})
	return out
}

// Messages returns the last limit shown messages of groupID (all groups
// when empty), oldest first; limit <= 0 returns all kept.
func (e *Emulator) Messages(groupID string, limit int) []Message {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Message
	for i := len(e.messages) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		if groupID == "" || e.messages[i].GroupID == groupID {
			out = append(out, e.messages[i])
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Mutes returns the chat mutes in the live groups called groupID (all
// groups when empty), by group and account: for each account the last
// forbid_send_msg naming it, lifted and ended ones included. A destroyed
// group's mutes went with it.
func (e *Emulator) Mutes(groupID string) []Mute {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	var out []Mute
	for _, g := range e.groups {
		if g.Destroyed || (groupID != "" && g.GroupID != groupID) {
			continue
		}
		for _, m := range g.mutes {
			c := *m
			c.Muted = m.activeAt(now)
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GroupID != out[j].GroupID {
			return out[i].GroupID < out[j].GroupID
		}
		return out[i].Account < out[j].Account
	})
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}

func (e *Emulator) serveGroups(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"groups": e.Groups()})
}

func (e *Emulator) serveMessages(w http.ResponseWriter, r *http.Request) {
	limit := defaultListed
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > e.maxMessages {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "limit: want 1.." + strconv.Itoa(e.maxMessages)})
			return
		}
		limit = n
	}
	msgs := e.Messages(r.URL.Query().Get("group_id"), limit)
	if msgs == nil {
		msgs = []Message{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs})
}

func (e *Emulator) serveEvent(w http.ResponseWriter, r *http.Request) {
	ev, ok := e.Event(r.PathValue("event_id"))
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "event never received"})
		return
	}
	writeJSON(w, http.StatusOK, ev)
}

func (e *Emulator) serveMutes(w http.ResponseWriter, r *http.Request) {
	mutes := e.Mutes(r.URL.Query().Get("group_id"))
	if mutes == nil {
		mutes = []Mute{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"mutes": mutes})
}

func (e *Emulator) serveStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, e.Stats())
}

func (e *Emulator) serveReset(w http.ResponseWriter, _ *http.Request) {
	e.Reset()
	writeJSON(w, http.StatusOK, map[string]bool{"reset": true})
}
