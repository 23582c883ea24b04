package imbridge

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Emulator is a local stand-in for Tencent IM's REST API, for development,
// tests and benchmarks. It serves POST /v4/{service}/{command} with
// Tencent's checks (sdkappid, identifier, UserSig v2: an expired sig, a bad
// HMAC or a wrong identifier get the matching 700xx code), keeps groups and
// messages in memory, applies the 40 messages/s per-group rule (an answer
// with MsgDropReason, the message not shown) and the Random duplicate check
// (5 minutes), injects faults on request, and shows what it received under
// /_emu/ (see the README). It is an http.Handler and safe for concurrent
// use.
type Emulator struct {
	apps        map[int64]Application
	now         func() time.Time
	maxMessages int
	onShown     func([]string, time.Time)

	mu       sync.Mutex
	groups   map[string]*emuGroup // "<sdkappid>/<group_id>"
	messages []EmuMessage
	events   map[string]*EmuEvent
	randoms  map[string]time.Time // "<sdkappid>/<group_id>/<random>" → when shown
	stats    EmuStats
	fault    *Fault
	faultEnd time.Time
	seq      int64
	mux      *http.ServeMux
}

// EmulatorConfig configures an Emulator.
type EmulatorConfig struct {
	// Apps are the applications it accepts. Required.
	Apps []Application
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// MaxMessages bounds the messages kept for inspection (the oldest go
	// first; counts and events are kept regardless). Default 200000.
	MaxMessages int
	// OnShown, when set (benchmarks), sees every message shown, with its
	// event ids, under the emulator's lock: it must be quick.
	OnShown func(eventIDs []string, at time.Time)
}

// Emulator limits, Tencent's.
const (
	emuGroupRate     = 40 // messages per second per group
	emuDuplicateTTL  = 5 * time.Minute
	emuMaxBody       = 64 * 1024
	emuTimeoutCap    = 30 * time.Second
	emuDefaultListed = 100
)

// EmuGroup is a group as /_emu/groups shows it.
type EmuGroup struct {
	GroupID      string `json:"group_id"`
	Name         string `json:"name"`
	Owner        string `json:"owner"`
	Type         string `json:"type"`
	CreatedAtMs  int64  `json:"created_at_ms"`
	Destroyed    bool   `json:"destroyed"`
	MessageCount int    `json:"message_count"`
}

// EmuMessage is a shown message as /_emu/messages shows it.
type EmuMessage struct {
	GroupID      string   `json:"group_id"`
	Random       uint32   `json:"random"`
	MsgSeq       int64    `json:"msg_seq"`
	ReceivedAtMs int64    `json:"received_at_ms"`
	Priority     string   `json:"priority"`
	Desc         string   `json:"desc"`
	EventIDs     []string `json:"event_ids"`
	Data         string   `json:"data"`
}

// EmuEvent is what /_emu/events/{event_id} shows: how often the event was
// shown (after the duplicate check and the rate rule).
type EmuEvent struct {
	EventID           string `json:"event_id"`
	Shown             int    `json:"shown"`
	GroupID           string `json:"group_id"`
	FirstReceivedAtMs int64  `json:"first_received_at_ms"`
}

// EmuStats is what /_emu/stats shows.
type EmuStats struct {
	Calls             map[string]int `json:"calls"`
	Errors            map[string]int `json:"errors"`
	Messages          int            `json:"messages"`
	EventsShown       int            `json:"events_shown"`
	DuplicatesDropped int            `json:"duplicates_dropped"`
	RateDropped       int            `json:"rate_dropped"`
}

// Fault is an injected failure: every matching call fails for Duration.
type Fault struct {
	// Mode is "error" (answer ErrorCode), "timeout" (answer nothing until
	// the caller gives up) or "http500".
	Mode string `json:"mode"`
	// ErrorCode is the code of mode "error".
	ErrorCode int `json:"error_code"`
	// DurationMs is how long the fault lasts; 0 until cleared.
	DurationMs int64 `json:"duration_ms"`
	// API limits the fault to one "service/command"; empty: all.
	API string `json:"api"`
}

// Validate checks a fault.
func (f Fault) Validate() error {
	switch f.Mode {
	case "error":
		if f.ErrorCode == 0 {
			return fmt.Errorf("fault: mode error needs a non-zero error_code")
		}
	case "timeout", "http500":
	default:
		return fmt.Errorf("fault: mode %q: want error, timeout or http500", f.Mode)
	}
	if f.DurationMs < 0 {
		return fmt.Errorf("fault: duration_ms %d: must not be negative", f.DurationMs)
	}
	return nil
}

type emuGroup struct {
	EmuGroup
	sdkAppID int64
	recent   []time.Time // receipts within the last second
}

// WithDefaults returns c with zero fields defaulted.
func (c EmulatorConfig) WithDefaults() EmulatorConfig {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxMessages == 0 {
		c.MaxMessages = 200000
	}
	return c
}

// Validate checks c after defaults.
func (c EmulatorConfig) Validate() error {
	c = c.WithDefaults()
	if len(c.Apps) == 0 {
		return fmt.Errorf("%w: emulator: no application", ErrInvalidConfig)
	}
	for _, a := range c.Apps {
		if err := a.Validate(); err != nil {
			return fmt.Errorf("%w: emulator: application %d: %w", ErrInvalidConfig, a.SDKAppID, err)
		}
	}
	if c.MaxMessages < 1 {
		return fmt.Errorf("%w: emulator: max messages %d: must be at least 1", ErrInvalidConfig, c.MaxMessages)
	}
	return nil
}

// NewEmulator returns an Emulator accepting cfg.Apps.
func NewEmulator(cfg EmulatorConfig) (*Emulator, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Emulator{apps: map[int64]Application{}, now: cfg.Now, maxMessages: cfg.MaxMessages, onShown: cfg.OnShown}
	for _, a := range cfg.Apps {
		e.apps[a.SDKAppID] = a
	}
	e.resetLocked()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v4/{service}/{command}", e.serveREST)
	mux.HandleFunc("GET /_emu/groups", e.serveGroups)
	mux.HandleFunc("GET /_emu/messages", e.serveMessages)
	mux.HandleFunc("GET /_emu/events/{event_id}", e.serveEvent)
	mux.HandleFunc("GET /_emu/stats", e.serveStats)
	mux.HandleFunc("POST /_emu/faults", e.serveSetFault)
	mux.HandleFunc("DELETE /_emu/faults", e.serveClearFault)
	mux.HandleFunc("POST /_emu/reset", e.serveReset)
	e.mux = mux
	return e, nil
}

// ServeHTTP serves the REST API and the inspection API.
func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.mux.ServeHTTP(w, r) }

func (e *Emulator) resetLocked() {
	e.groups = map[string]*emuGroup{}
	e.messages = nil
	e.events = map[string]*EmuEvent{}
	e.randoms = map[string]time.Time{}
	e.stats = EmuStats{Calls: map[string]int{}, Errors: map[string]int{}}
	e.fault = nil
	e.seq = 0
}

// Reset forgets everything received and clears faults.
func (e *Emulator) Reset() {
	e.mu.Lock()
	e.resetLocked()
	e.mu.Unlock()
}

// SetFault injects f (replacing any other) until ClearFault or its
// duration ends.
func (e *Emulator) SetFault(f Fault) error {
	if err := f.Validate(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fault = &f
	e.faultEnd = time.Time{}
	if f.DurationMs > 0 {
		e.faultEnd = e.now().Add(time.Duration(f.DurationMs) * time.Millisecond)
	}
	return nil
}

// ClearFault removes the injected fault.
func (e *Emulator) ClearFault() {
	e.mu.Lock()
	e.fault = nil
	e.mu.Unlock()
}

// Event returns how event id was received, false if never shown.
func (e *Emulator) Event(id string) (EmuEvent, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev, ok := e.events[id]
	if !ok {
		return EmuEvent{}, false
	}
	return *ev, true
}

// Stats returns the counters.
func (e *Emulator) Stats() EmuStats {
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
func (e *Emulator) Groups() []EmuGroup {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]EmuGroup, 0, len(e.groups))
	for _, g := range e.groups {
		out = append(out, g.EmuGroup)
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
func (e *Emulator) Messages(groupID string, limit int) []EmuMessage {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []EmuMessage
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

// emuReply is a Tencent answer.
type emuReply map[string]any

func okReply() emuReply { return emuReply{"ActionStatus": "OK", "ErrorCode": 0, "ErrorInfo": ""} }

func errReply(code int, info string) emuReply {
	return emuReply{"ActionStatus": "FAIL", "ErrorCode": code, "ErrorInfo": info}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}

// serveREST is POST /v4/{service}/{command}.
func (e *Emulator) serveREST(w http.ResponseWriter, r *http.Request) {
	api := r.PathValue("service") + "/" + r.PathValue("command")
	q := r.URL.Query()
	e.mu.Lock()
	e.stats.Calls[api]++
	f := e.activeFaultLocked(api)
	e.mu.Unlock()
	if f != nil {
		switch f.Mode {
		case "http500":
			e.countError("http500")
			http.Error(w, "injected fault", http.StatusInternalServerError)
			return
		case "timeout":
			e.countError("timeout")
			// Read the body first: only then does the server notice the
			// caller giving up and end r.Context().
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, emuMaxBody))
			t := time.NewTimer(emuTimeoutCap)
			defer t.Stop()
			select {
			case <-r.Context().Done():
			case <-t.C:
			}
			return
		default:
			e.countError(strconv.Itoa(f.ErrorCode))
			writeJSON(w, http.StatusOK, errReply(f.ErrorCode, "injected fault"))
			return
		}
	}
	reply := e.rest(api, q.Get("sdkappid"), q.Get("identifier"), q.Get("usersig"), r)
	if code, _ := reply["ErrorCode"].(int); code != 0 {
		e.countError(strconv.Itoa(code))
	}
	writeJSON(w, http.StatusOK, reply)
}

func (e *Emulator) countError(code string) {
	e.mu.Lock()
	e.stats.Errors[code]++
	e.mu.Unlock()
}

// activeFaultLocked returns the fault that applies to api now, if any.
func (e *Emulator) activeFaultLocked(api string) *Fault {
	if e.fault == nil {
		return nil
	}
	if !e.faultEnd.IsZero() && !e.now().Before(e.faultEnd) {
		e.fault = nil
		return nil
	}
	if e.fault.API != "" && e.fault.API != api {
		return nil
	}
	return e.fault
}

// rest checks the caller and runs one command.
func (e *Emulator) rest(api, sdkAppID, identifier, sig string, r *http.Request) emuReply {
	id := parseInt64(sdkAppID)
	app, ok := e.apps[id]
	if !ok {
		return errReply(CodeSigSDKAppID, "sdkappid not found")
	}
	if identifier != app.Admin {
		return errReply(CodeSigIdentifier, "identifier is not the app admin")
	}
	if code := checkUserSig(sig, app.SecretKey, identifier, id, e.now().Unix()); code != 0 {
		return errReply(code, "usersig check failed")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, emuMaxBody+1))
	if err != nil || len(body) > emuMaxBody {
		return errReply(CodeInvalidRequest, "body unreadable or too large")
	}
	switch api {
	case APICreateGroup:
		return e.createGroup(id, body)
	case APISendGroupMsg:
		return e.sendGroupMsg(id, body)
	case APIDestroyGroup:
		return e.destroyGroup(id, body)
	}
	return errReply(CodeUnknownAPI, "unknown api "+api)
}

func groupKey(app int64, groupID string) string { return strconv.FormatInt(app, 10) + "/" + groupID }

func (e *Emulator) createGroup(app int64, body []byte) emuReply {
	var req struct {
		Type    string `json:"Type"`
		GroupID string `json:"GroupId"`
		Name    string `json:"Name"`
		Owner   string `json:"Owner_Account"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return errReply(CodeInvalidRequest, "bad json")
	}
	switch {
	case req.GroupID == "" || len(req.GroupID) > 48 || strings.HasPrefix(req.GroupID, "@TGS#"):
		return errReply(CodeInvalidRequest, "invalid GroupId")
	case req.Name == "" || len(req.Name) > 30:
		return errReply(CodeInvalidRequest, "invalid Name")
	case req.Type != "AVChatRoom" && req.Type != "Public" && req.Type != "Private" && req.Type != "ChatRoom" && req.Type != "Community":
		return errReply(CodeInvalidRequest, "invalid Type")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k := groupKey(app, req.GroupID)
	if g, ok := e.groups[k]; ok && !g.Destroyed {
		return errReply(CodeGroupIDInUse, "group id in use")
	}
	e.groups[k] = &emuGroup{sdkAppID: app, EmuGroup: EmuGroup{GroupID: req.GroupID, Name: req.Name, Owner: req.Owner,
		Type: req.Type, CreatedAtMs: e.now().UnixMilli()}}
	rep := okReply()
	rep["GroupId"] = req.GroupID
	return rep
}

func (e *Emulator) destroyGroup(app int64, body []byte) emuReply {
	var req struct {
		GroupID string `json:"GroupId"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return errReply(CodeInvalidRequest, "bad json")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	g, ok := e.groups[groupKey(app, req.GroupID)]
	if !ok || g.Destroyed {
		return errReply(CodeGroupNotFound, "group not found")
	}
	g.Destroyed = true
	return okReply()
}

func (e *Emulator) sendGroupMsg(app int64, body []byte) emuReply {
	var req struct {
		GroupID     string `json:"GroupId"`
		Random      uint32 `json:"Random"`
		MsgPriority string `json:"MsgPriority"`
		From        string `json:"From_Account"`
		MsgBody     []struct {
			MsgType    string `json:"MsgType"`
			MsgContent struct {
				Data string `json:"Data"`
				Desc string `json:"Desc"`
			} `json:"MsgContent"`
		} `json:"MsgBody"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return errReply(CodeInvalidRequest, "bad json")
	}
	if len(req.MsgBody) == 0 {
		return errReply(CodeInvalidRequest, "empty MsgBody")
	}
	if len(body) > MaxMessageBytes {
		return errReply(CodeMessageTooLong, "message longer than 12 KB")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	g, ok := e.groups[groupKey(app, req.GroupID)]
	if !ok || g.Destroyed {
		return errReply(CodeGroupNotFound, "group not found")
	}
	now := e.now()
	rk := groupKey(app, req.GroupID) + "/" + strconv.FormatUint(uint64(req.Random), 10)
	if at, ok := e.randoms[rk]; ok && now.Sub(at) < emuDuplicateTTL {
		e.stats.DuplicatesDropped++
		rep := okReply()
		rep["MsgTime"], rep["MsgSeq"] = now.Unix(), 0
		return rep
	}
	cut := now.Add(-time.Second)
	i := 0
	for i < len(g.recent) && !g.recent[i].After(cut) {
		i++
	}
	g.recent = g.recent[i:]
	if len(g.recent) >= emuGroupRate {
		e.stats.RateDropped++
		rep := okReply()
		rep["MsgTime"], rep["MsgSeq"], rep["MsgDropReason"] = now.Unix(), 0, "MsgFreqLimit"
		return rep
	}
	g.recent = append(g.recent, now)
	e.randoms[rk] = now
	if len(e.randoms) > 4*e.maxMessages {
		for k, at := range e.randoms {
			if now.Sub(at) >= emuDuplicateTTL {
				delete(e.randoms, k)
			}
		}
	}
	e.seq++
	g.MessageCount++
	c := req.MsgBody[0].MsgContent
	m := EmuMessage{GroupID: req.GroupID, Random: req.Random, MsgSeq: e.seq, ReceivedAtMs: now.UnixMilli(),
		Priority: req.MsgPriority, Desc: c.Desc, EventIDs: EventIDsOfData(c.Data), Data: c.Data}
	if m.EventIDs == nil {
		m.EventIDs = []string{}
	}
	e.stats.Messages++
	for _, id := range m.EventIDs {
		e.stats.EventsShown++
		ev := e.events[id]
		if ev == nil {
			ev = &EmuEvent{EventID: id, GroupID: req.GroupID, FirstReceivedAtMs: m.ReceivedAtMs}
			e.events[id] = ev
		}
		ev.Shown++
	}
	if e.onShown != nil {
		e.onShown(m.EventIDs, now)
	}
	if len(e.messages) >= e.maxMessages {
		e.messages = append(e.messages[:0], e.messages[len(e.messages)/2:]...)
	}
	e.messages = append(e.messages, m)
	rep := okReply()
	rep["MsgTime"], rep["MsgSeq"] = now.Unix(), e.seq
	return rep
}

func (e *Emulator) serveGroups(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"groups": e.Groups()})
}

func (e *Emulator) serveMessages(w http.ResponseWriter, r *http.Request) {
	limit := emuDefaultListed
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
		msgs = []EmuMessage{}
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

func (e *Emulator) serveStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, e.Stats())
}

func (e *Emulator) serveSetFault(w http.ResponseWriter, r *http.Request) {
	var f Fault
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "fault: bad json"})
		return
	}
	if err := e.SetFault(f); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (e *Emulator) serveClearFault(w http.ResponseWriter, _ *http.Request) {
	e.ClearFault()
	writeJSON(w, http.StatusOK, map[string]bool{"cleared": true})
}

func (e *Emulator) serveReset(w http.ResponseWriter, _ *http.Request) {
	e.Reset()
	writeJSON(w, http.StatusOK, map[string]bool{"reset": true})
}
