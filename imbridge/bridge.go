package imbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"

	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/internal/every"
	"voiceroom/roomevent"
)

// Config configures a Bridge. Zero fields take their defaults (see
// WithDefaults).
type Config struct {
	// Consumer is the consume loop over the durable. Durable defaults to
	// "imbridge", FetchBatch to 16384 (events waiting for a rate-limit
	// token must be in hand to be batched: about 16 per busy room; keep
	// the durable's MaxAckPending at least this) and Classify to
	// Permanent.
	Consumer bus.ConsumerRunConfig
	// Client configures the REST clients (timeouts, sigs, keep-alive).
	Client ClientConfig
	// CallsPerSecond is the call rate per API per Tencent application.
	// Tencent allows 200/s; default 160: with the burst, at most 170 calls
	// start in any second, which leaves room for calls that reach Tencent
	// bunched up (measured up to 221 arrivals in a second at 180 + 20 on
	// a busy machine).
	CallsPerSecond float64
	// CallBurst is how many calls of one API may go at once. Default 10.
	CallBurst int
	// GroupMessagesPerSecond is the message rate per group. Tencent
	// allows 40/s and drops the rest; default 20.
	GroupMessagesPerSecond float64
	// GroupBurst is how many messages one group may get at once. Default
	// 10 (no one-second window then sees more than 30).
	GroupBurst int
	// Senders is how many calls may be in flight at once. Default 32.
	Senders int
	// MaxBatchEvents caps the events of one message; the 12 KB limit
	// usually cuts first. Default 64.
	MaxBatchEvents int
	// RetryDelays is the wait before the next attempt after a retryable
	// failure of a room's message: RetryDelays[n-1] after attempt n, the
	// last value repeating, forever. Default a fixed 1s, the outbox
	// spec's interval: a room's messages are its live state, and a short
	// failure at Tencent must not hold them for minutes (the rate limits
	// bound the calls meanwhile). A list is a backoff; each delay is at
	// most MaxRetryDelay.
	RetryDelays []time.Duration
	// StatsInterval is how often rooms idle for that long are forgotten.
	// (The durable's pending counts are the bus monitor's:
	// voiceroom_bus_consumer_pending{consumer="imbridge"}.) Default 10s.
	StatsInterval time.Duration
	// AcceptedWindow is how long the bridge remembers, per Tencent
	// application, the ids of the events Tencent accepted, so that an
	// event delivered again is acked without being shown again. Default
	// 5m, Tencent's duplicate window.
	AcceptedWindow time.Duration
	// AcceptedEvents bounds the ids remembered per application: a full
	// record of 524288 UUIDs measured 34 MB of heap. At the bound the
	// oldest ids are forgotten before their window ends (such an event,
	// delivered again, may be shown again). Default 524288: 5 minutes at
	// about 1,700 events/s per application.
	AcceptedEvents int
}

// The retry interval of a room's failed message: DefaultRetryDelay unless
// configured, and never longer than MaxRetryDelay.
const (
	DefaultRetryDelay = time.Second
	MaxRetryDelay     = 5 * time.Minute
)

// WithDefaults returns c with zero fields defaulted.
func (c Config) WithDefaults() Config {
	if c.Consumer.Durable == "" {
		c.Consumer.Durable = bus.DurableIMBridge
	}
	if c.Consumer.FetchBatch == 0 {
		c.Consumer.FetchBatch = 16384
	}
	if c.Consumer.Classify == nil {
		c.Consumer.Classify = func(err error) bool { return bus.IsPermanent(err) || Permanent(err) }
	}
	c.Consumer = c.Consumer.WithDefaults()
	c.Client = c.Client.WithDefaults()
	if c.CallsPerSecond == 0 {
		c.CallsPerSecond = 160
	}
	if c.CallBurst == 0 {
		c.CallBurst = 10
	}
	if c.GroupMessagesPerSecond == 0 {
		c.GroupMessagesPerSecond = 20
	}
	if c.GroupBurst == 0 {
		c.GroupBurst = 10
	}
	if c.Senders == 0 {
		c.Senders = 32
	}
	if c.MaxBatchEvents == 0 {
		c.MaxBatchEvents = 64
	}
	if len(c.RetryDelays) == 0 {
		c.RetryDelays = []time.Duration{DefaultRetryDelay}
	}
	if c.StatsInterval == 0 {
		c.StatsInterval = 10 * time.Second
	}
	if c.AcceptedWindow == 0 {
		c.AcceptedWindow = 5 * time.Minute
	}
	if c.AcceptedEvents == 0 {
		c.AcceptedEvents = 1 << 19
	}
	return c
}

// Validate checks c after defaults; it never changes c. Errors are
// *apperr.ConfigError naming the field (the consumer's and the client's
// fields by their own names) and wrap ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := c.Consumer.Validate(); err != nil {
		return apperr.BadConfig(apperr.ConfigFieldOf(err), "%w: consumer: %w", ErrInvalidConfig, err)
	}
	if err := c.Client.Validate(); err != nil {
		return err
	}
	bad := func(field, format string, args ...any) error {
		return apperr.BadConfig(field, "%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.Consumer.FetchBatch > MaxFetchBatch:
		return bad("FetchBatch", "fetch batch %d: want 1..%d", c.Consumer.FetchBatch, MaxFetchBatch)
	case c.CallsPerSecond <= 0 || c.CallsPerSecond > 200:
		return bad("CallsPerSecond", "calls per second %v: want more than 0, at most Tencent's 200", c.CallsPerSecond)
	case c.CallBurst < 1:
		return bad("CallBurst", "call burst %d: must be at least 1", c.CallBurst)
	case c.GroupMessagesPerSecond <= 0 || c.GroupMessagesPerSecond > 40:
		return bad("GroupMessagesPerSecond", "group messages per second %v: want more than 0, at most Tencent's 40", c.GroupMessagesPerSecond)
	case c.GroupBurst < 1:
		return bad("GroupBurst", "group burst %d: must be at least 1", c.GroupBurst)
	case c.Senders < 1 || c.Senders > 1024:
		return bad("Senders", "senders %d: want 1..1024", c.Senders)
	case c.MaxBatchEvents < 1 || c.MaxBatchEvents > MaxBatchEvents:
		return bad("MaxBatchEvents", "max batch events %d: want 1..%d", c.MaxBatchEvents, MaxBatchEvents)
	case c.StatsInterval <= 0:
		return bad("StatsInterval", "stats interval %s: must be positive", c.StatsInterval)
	case c.AcceptedWindow <= 0:
		return bad("AcceptedWindow", "accepted window %s: must be positive", c.AcceptedWindow)
	case c.AcceptedEvents < 1:
		return bad("AcceptedEvents", "accepted events %d: must be at least 1", c.AcceptedEvents)
	}
	for i, d := range c.RetryDelays {
		if d <= 0 || d > MaxRetryDelay {
			return bad("RetryDelays", "retry delays[%d] %s: must be more than 0 and at most %s", i, d, MaxRetryDelay)
		}
	}
	return nil
}

// Bounds of Config.
const (
	// MaxFetchBatch bounds Config.Consumer.FetchBatch.
	MaxFetchBatch = 100_000
	// MaxBatchEvents bounds Config.MaxBatchEvents.
	MaxBatchEvents = 1000
)

// Bridge delivers room events from the durable "imbridge" to Tencent IM.
type Bridge struct {
	js      jetstream.JetStream
	apps    Apps
	cfg     Config
	log     *slog.Logger
	metrics *Metrics
	busM    *bus.Metrics
	now     func() time.Time

	clients   map[int64]*Client // by sdkappid
	limitMu   sync.Mutex
	apiLimits map[string]*rate.Limiter // "<sdkappid>/<api>"

	mu       sync.Mutex
	lanes    map[string]*lane               // "<app_code>/<room_id>"
	accepted map[int64]*accepted            // by sdkappid: events Tencent accepted lately
	shared   atomic.Pointer[sharedAccepted] // the same, shared by every process; nil: none
	ready    chan *lane
	stopping bool
}

// item is one event held by the bridge until its done is called.
type item struct {
	env  bus.Envelope
	kind roomevent.IMAction
	done func(error)
}

// join makes a later delivery of the item's event settle with it; b.mu
// is held. A later delivery is acked when the first is dead-lettered: one
// DLQ entry per event.
func (it *item) join(done func(error)) {
	first := it.done
	it.done = func(err error) {
		first(err)
		if Permanent(err) || bus.IsPermanent(err) {
			err = nil
		}
		done(err)
	}
}

// lane holds one room's events in room order. Only the sender holding the
// lane (busy) removes from queue; the consumer only appends.
type lane struct {
	key      string
	groupID  string
	client   *Client
	limit    *rate.Limiter // the group's messages
	queue    []*item
	held     map[string]*item // queue by event id: a delivery again joins its item
	out      *outMsg          // built, not yet accepted: sent again unchanged
	single   int              // events to send one by one (after a batch was refused)
	closed   bool             // the head RoomClosed's message was accepted; destroy next
	muted    bool             // the head RoomChatMuted's mute was applied; its message next
	attempts int              // failed attempts of the current step
	queued   bool             // in ready, held by a sender or waiting to retry
	busy     bool             // held by a sender
	wait     *time.Timer      // the retry delay running
	idleAt   time.Time
}

// New returns a Bridge over js for apps. m and busMetrics may be nil; now
// is the clock.
func New(js jetstream.JetStream, apps Apps, cfg Config, log *slog.Logger, m *Metrics, busMetrics *bus.Metrics, now func() time.Time) (*Bridge, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: nil jetstream", ErrInvalidConfig)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Bridge{
		js: js, apps: apps, cfg: cfg, log: log.With("component", "imbridge"), metrics: m, busM: busMetrics, now: now,
		clients:   map[int64]*Client{},
		apiLimits: map[string]*rate.Limiter{},
		lanes:     map[string]*lane{},
		accepted:  map[int64]*accepted{},
		ready:     make(chan *lane, cfg.Consumer.FetchBatch+1),
	}
	for _, app := range apps.Applications() {
		c, err := NewClient(app, cfg.Client, now)
		if err != nil {
			return nil, fmt.Errorf("application %d: %w", app.SDKAppID, err)
		}
		b.clients[app.SDKAppID] = c
		b.accepted[app.SDKAppID] = newAccepted(cfg.AcceptedWindow, cfg.AcceptedEvents)
	}
	for code, app := range apps.ByApp {
		if _, ok := b.clients[app.SDKAppID]; !ok {
			return nil, fmt.Errorf("%w: app %s: no client", ErrInvalidConfig, code)
		}
	}
	return b, nil
}

// Run consumes the durable until ctx ends. With no Tencent application
// configured it logs that once and does not consume: the events wait in
// the stream. At shutdown the consumer stops
// fetching, the calls in flight finish (each within the call timeout) and
// the events still held are released for redelivery. Run returns an error
// only when it cannot start.
func (b *Bridge) Run(parent context.Context) error {
	ctx, cancel := context.WithCancel(parent)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before the wait: stops the helpers when the consumer cannot start
	wg.Go(func() { b.forgetIdleLoop(ctx) })
	b.metrics.setConfigured(b.apps.Configured())
	if !b.apps.Configured() {
		b.log.Warn("no Tencent IM application configured (VOICEROOM_TIM_*): not consuming; events wait in the durable")
		<-ctx.Done()
		return nil
	}
	cons, err := bus.NewAsyncConsumer(b.js, b.cfg.Consumer, b.handle, b.log, b.busM)
	if err != nil {
		return fmt.Errorf("imbridge consumer: %w", err)
	}
	octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
	shared, err := openSharedAccepted(octx, b.js, b.cfg.AcceptedWindow, b.log)
	ocancel()
	if err != nil {
		b.log.Warn("the accepted-events bucket is unavailable: an event accepted before a restart or by another instance may be shown again", "error", err)
	} else {
		b.shared.Store(shared)
		sctx, stopShared := context.WithCancel(context.WithoutCancel(ctx))
		sharedDone := make(chan struct{})
		go func() { defer close(sharedDone); shared.run(sctx, 2*time.Second) }()
		// After the consumer settled everything: write what is queued.
		defer func() { stopShared(); <-sharedDone }()
	}
	for range b.cfg.Senders {
		wg.Go(func() { b.sender(ctx) })
	}
	wg.Go(func() {
		<-ctx.Done()
		b.stop()
	})
	for _, app := range b.apps.Applications() {
		b.log.Info("imbridge delivering", "application", app.String())
	}
	err = cons.Run(ctx)
	for _, c := range b.clients {
		c.Close()
	}
	return err
}

// handle takes one event from the consumer.
func (b *Bridge) handle(ctx context.Context, d bus.Delivery, done func(error)) {
	e := d.Envelope
	spec, known := roomevent.Lookup(e.EventType)
	k := spec.IM
	if !known || k == roomevent.IMSkip {
		b.metrics.event(e.EventType, outcomeSkipped, 1)
		done(nil)
		return
	}
	app, err := b.apps.For(e.AppCode)
	if err != nil {
		b.metrics.event(e.EventType, outcomeDeadLettered, 1)
		done(bus.Permanent(err))
		return
	}
	if d.NumDelivered > 1 && b.shared.Load().has(ctx, app.SDKAppID, e.EventID) {
		// Delivered again after Tencent accepted it from another process,
		// or from this one before a restart.
		b.metrics.event(e.EventType, outcomeDuplicate, 1)
		done(nil)
		return
	}
	key := e.AppCode + "/" + e.RoomID
	b.mu.Lock()
	if b.stopping {
		b.mu.Unlock()
		done(errShutdown)
		return
	}
	l := b.lanes[key]
	if l != nil {
		if it := l.held[e.EventID]; it != nil {
			// Delivered again while held (the server lost the in-progress
			// signals): settled with the delivery it joins.
			it.join(done)
			b.mu.Unlock()
			b.metrics.event(e.EventType, outcomeDuplicate, 1)
			return
		}
	}
	if b.accepted[app.SDKAppID].has(e.EventID, b.now()) {
		// Delivered again after Tencent accepted it (its ack was lost).
		b.mu.Unlock()
		b.metrics.event(e.EventType, outcomeDuplicate, 1)
		done(nil)
		return
	}
	if l == nil {
		l = &lane{key: key, groupID: groupIDOf(e), client: b.clients[app.SDKAppID],
			limit: rate.NewLimiter(rate.Limit(b.cfg.GroupMessagesPerSecond), b.cfg.GroupBurst),
			held:  map[string]*item{}}
		b.lanes[key] = l
	}
	it := &item{env: e, kind: k, done: done}
	l.queue = append(l.queue, it)
	l.held[e.EventID] = it
	if !l.queued {
		l.queued = true
		b.ready <- l // never blocks: a lane is in ready at most once, and lanes ≤ FetchBatch
	}
	b.mu.Unlock()
}

// sender serves ready lanes, one step each, until ctx ends.
func (b *Bridge) sender(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case l := <-b.ready:
			b.serve(ctx, l)
		}
	}
}

// serve runs one step of a lane: create its group, apply a chat mute, send
// one message, or destroy its group. Then it queues the lane again (more
// to do), arms its retry timer (a retryable failure), or lets it rest.
func (b *Bridge) serve(ctx context.Context, l *lane) {
	b.mu.Lock()
	if b.stopping || len(l.queue) == 0 {
		l.queued = false
		b.mu.Unlock()
		return
	}
	l.busy = true
	head := l.queue[0]
	closed, muted := l.closed, l.muted
	b.mu.Unlock()

	var err error
	switch {
	case head.kind == roomevent.IMCreateGroup:
		err = b.createGroup(ctx, l, head.env)
		if err == nil {
			b.settle(l, 1, nil)
		}
	case head.kind == roomevent.IMCloseGroup && closed:
		err = b.destroyGroup(ctx, l)
		if err == nil {
			b.settle(l, 1, nil)
		}
	case head.kind == roomevent.IMMuteChat && !muted:
		err = b.muteChat(ctx, l, head.env)
	default:
		err = b.send(ctx, l)
	}
	if err == nil {
		b.release(l, 0)
		return
	}
	if errors.Is(err, errShutdown) {
		b.release(l, 0)
		return
	}
	if Permanent(err) {
		b.mu.Lock()
		n := 1
		if l.out != nil {
			n = l.out.n
		}
		l.out, l.attempts = nil, 0
		b.mu.Unlock()
		if n > 1 {
			// Send them one by one: only the offending event is dead-lettered.
			b.mu.Lock()
			l.single = n
			b.mu.Unlock()
			b.log.Warn("batch refused, sending its events one by one", "room", l.key, "events", n, "error", err)
			b.release(l, 0)
			return
		}
		b.log.Warn("event refused by Tencent IM, dead-lettering", "room", l.key, "event_id", head.env.EventID, "error", err)
		b.metrics.event(head.env.EventType, outcomeDeadLettered, 1)
		b.settle(l, 1, bus.Permanent(err))
		b.release(l, 0)
		return
	}
	b.mu.Lock()
	l.attempts++
	delay := b.cfg.RetryDelays[min(l.attempts, len(b.cfg.RetryDelays))-1]
	n := 1
	if l.out != nil {
		n = l.out.n
	}
	attempts := l.attempts
	b.mu.Unlock()
	for _, it := range b.peek(l, n) {
		b.metrics.event(it.env.EventType, outcomeRetried, 1)
	}
	b.log.Warn("Tencent IM call failed, retrying", "room", l.key, "events", n, "attempt", attempts, "retry_in", delay, "error", err)
	b.release(l, delay)
}

// peek returns the first n events of l.
func (b *Bridge) peek(l *lane, n int) []*item {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*item(nil), l.queue[:min(n, len(l.queue))]...)
}

// settle removes the first n events of l and reports err for them. With
// err nil Tencent accepted them: they are remembered as accepted.
func (b *Bridge) settle(l *lane, n int, err error) {
	b.mu.Lock()
	done := b.takeLocked(l, n)
	var ids []string
	if err == nil {
		acc, now := b.accepted[l.client.app.SDKAppID], b.now()
		for _, it := range done {
			acc.add(it.env.EventID, now)
			ids = append(ids, it.env.EventID)
		}
	}
	l.attempts = 0
	if l.single > 0 {
		l.single = max(l.single-n, 0)
	}
	if len(done) > 0 && done[len(done)-1].kind == roomevent.IMCloseGroup {
		l.closed = false
	}
	b.mu.Unlock()
	b.shared.Load().record(l.client.app.SDKAppID, ids)
	nowMs := b.now().UnixMilli()
	for _, it := range done {
		if err == nil {
			b.metrics.event(it.env.EventType, outcomeDelivered, 1)
			b.metrics.delivered(float64(nowMs-it.env.OccurredAtMs) / 1000)
		}
		it.done(err)
	}
}

// settleQuiet acks the first n events of l without counting them
// delivered.
func (b *Bridge) settleQuiet(l *lane, n int) {
	b.mu.Lock()
	done := b.takeLocked(l, n)
	l.attempts, l.closed = 0, false
	b.mu.Unlock()
	for _, it := range done {
		it.done(nil)
	}
}

// takeLocked removes and returns the first n events of l; b.mu is held.
// Once out of held, a delivery again no longer joins them.
func (b *Bridge) takeLocked(l *lane, n int) []*item {
	done := append([]*item(nil), l.queue[:n]...)
	// The slots taken are cleared: a lane lives on idle until forgotten,
	// and its queue's array would otherwise keep every settled event (its
	// envelope, and through done the delivery's message) of its room.
	clear(l.queue[:n])
	l.queue = l.queue[n:]
	if len(l.queue) == 0 {
		l.queue = nil
	}
	if n > 0 {
		l.muted = false // the head's mute went with it
	}
	for _, it := range done {
		delete(l.held, it.env.EventID)
	}
	return done
}

// release ends a step: after delay when positive (a retry), else at once
// if more events wait.
func (b *Bridge) release(l *lane, delay time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l.busy = false
	l.idleAt = b.now()
	if b.stopping {
		l.queued = false
		b.failLocked(l)
		return
	}
	switch {
	case delay > 0:
		l.wait = time.AfterFunc(delay, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			l.wait = nil
			if b.stopping {
				l.queued = false
				b.failLocked(l)
				return
			}
			b.ready <- l
		})
	case len(l.queue) > 0:
		b.ready <- l
	default:
		l.queued = false
	}
}

// failLocked hands l's events back to the consumer for redelivery; b.mu
// is held. The done calls only nak.
func (b *Bridge) failLocked(l *lane) {
	for _, it := range l.queue {
		it.done(errShutdown)
	}
	l.queue, l.out, l.closed, l.muted, l.single = nil, nil, false, false, 0
	clear(l.held)
}

// stop releases every event not in a call at shutdown.
func (b *Bridge) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopping = true
	for _, l := range b.lanes {
		if l.wait != nil && l.wait.Stop() {
			l.wait = nil
			l.queued = false
		}
		if !l.busy && l.wait == nil {
			l.queued = false
			b.failLocked(l)
		}
	}
}

// apiLimit waits for a call token of api in the application of c.
func (b *Bridge) apiLimit(ctx context.Context, c *Client, api string) error {
	key := strconv.FormatInt(c.app.SDKAppID, 10) + "/" + api
	b.limitMu.Lock()
	lim := b.apiLimits[key]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(b.cfg.CallsPerSecond), b.cfg.CallBurst)
		b.apiLimits[key] = lim
	}
	b.limitMu.Unlock()
	if err := lim.Wait(ctx); err != nil {
		return errShutdown
	}
	return nil
}

// call makes one REST call within the call timeout, letting it finish
// when ctx (the bridge's run) ends, and records it.
func (b *Bridge) call(ctx context.Context, c *Client, api string, req, resp any) error {
	start := time.Now()
	err := c.Call(context.WithoutCancel(ctx), api, req, resp)
	b.metrics.call(api, err, time.Since(start).Seconds())
	return err
}

// createGroup creates l's group from e's card; a group that exists is
// fine.
func (b *Bridge) createGroup(ctx context.Context, l *lane, e bus.Envelope) error {
	if err := b.apiLimit(ctx, l.client, APICreateGroup); err != nil {
		return err
	}
	card := cardOf(e)
	req := map[string]any{"Type": "AVChatRoom", "GroupId": l.groupID, "Name": groupName(card.Title)}
	if card.OwnerUserID > 0 {
		req["Owner_Account"] = strconv.FormatInt(card.OwnerUserID, 10)
	}
	err := b.call(ctx, l.client, APICreateGroup, req, nil)
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Code {
		case CodeGroupIDInUse, CodeGroupIDInUseByYou:
			return nil
		case codeAccountNotFound:
			// The owner was never imported into Tencent IM: the admin owns it.
			delete(req, "Owner_Account")
			if err := b.apiLimit(ctx, l.client, APICreateGroup); err != nil {
				return err
			}
			err = b.call(ctx, l.client, APICreateGroup, req, nil)
			if errors.As(err, &ae) && (ae.Code == CodeGroupIDInUse || ae.Code == CodeGroupIDInUseByYou) {
				return nil
			}
		}
	}
	return err
}

// codeAccountNotFound is create_group's answer for an Owner_Account that
// Tencent IM does not know.
const codeAccountNotFound = 10019

// destroyGroup destroys l's group; a group already gone is fine.
func (b *Bridge) destroyGroup(ctx context.Context, l *lane) error {
	if err := b.apiLimit(ctx, l.client, APIDestroyGroup); err != nil {
		return err
	}
	err := b.call(ctx, l.client, APIDestroyGroup, map[string]string{"GroupId": l.groupID}, nil)
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == CodeGroupNotFound {
		return nil
	}
	return err
}

// sendResponse is the part of send_group_msg's answer the bridge reads.
type sendResponse struct {
	MsgSeq        int64  `json:"MsgSeq"`
	MsgDropReason string `json:"MsgDropReason"`
}

// send sends the lane's next message: the one a failed attempt built,
// else as many events from the head as fit (built only once the tokens
// are in hand, so a room that waited carries everything that came
// meanwhile). A missing group is created first.
func (b *Bridge) send(ctx context.Context, l *lane) error {
	if err := l.limit.Wait(ctx); err != nil {
		return errShutdown
	}
	if err := b.apiLimit(ctx, l.client, APISendGroupMsg); err != nil {
		return err
	}
	out, err := b.message(l)
	if err != nil {
		return err
	}
	var resp sendResponse
	err = b.call(ctx, l.client, APISendGroupMsg, out.body, &resp)
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == CodeGroupNotFound {
		if skipped, err := b.groupMissing(ctx, l, out.n); skipped || err != nil {
			return err
		}
		if err := b.apiLimit(ctx, l.client, APISendGroupMsg); err != nil {
			return err
		}
		resp = sendResponse{}
		err = b.call(ctx, l.client, APISendGroupMsg, out.body, &resp)
	}
	if err == nil && resp.MsgDropReason != "" {
		err = fmt.Errorf("%w: %s", ErrMessageDropped, resp.MsgDropReason)
	}
	if err != nil {
		return err
	}
	b.metrics.batch(out.n)
	b.mu.Lock()
	l.out = nil
	closing := l.queue[out.n-1].kind == roomevent.IMCloseGroup
	if closing {
		l.closed = true // the RoomClosed stays at the head until its group is destroyed
	}
	b.mu.Unlock()
	n := out.n
	if closing {
		n--
	}
	b.settle(l, n, nil)
	return nil
}

// groupMissing answers 10010 for the first n events of l: in a closed
// room they are acked as skipped (skipped true): late events whose group
// is gone, nobody is there to show them to, and a new group would outlive
// the room. Otherwise the group is created and the caller calls again.
func (b *Bridge) groupMissing(ctx context.Context, l *lane, n int) (skipped bool, err error) {
	first := b.peek(l, 1)[0]
	if cardOf(first.env).Status != roomevent.StatusClosed {
		return false, b.createGroup(ctx, l, first.env)
	}
	b.mu.Lock()
	l.out = nil
	b.mu.Unlock()
	for _, it := range b.peek(l, n) {
		b.metrics.event(it.env.EventType, outcomeSkipped, 1)
	}
	b.settleQuiet(l, n)
	return true, nil
}

// message returns the lane's pending message, building it if needed. A
// message stops before a RoomCreated (its own step) and before a
// RoomChatMuted that is not its first event (its mute goes first), and
// ends with a RoomClosed.
func (b *Bridge) message(l *lane) (*outMsg, error) {
	b.mu.Lock()
	if l.out != nil {
		out := l.out
		b.mu.Unlock()
		return out, nil
	}
	limit := b.cfg.MaxBatchEvents
	if l.single > 0 {
		limit = 1
	}
	var evs []bus.Envelope
	for i, it := range l.queue {
		if len(evs) == limit || it.kind == roomevent.IMCreateGroup || (i > 0 && it.kind == roomevent.IMMuteChat) {
			break
		}
		evs = append(evs, it.env)
		if it.kind == roomevent.IMCloseGroup {
			break
		}
	}
	b.mu.Unlock()

	admin := l.client.app.Admin
	for len(evs) > 0 {
		body, random, err := buildMessage(l.groupID, admin, evs)
		if err != nil {
			return nil, err
		}
		if len(body) <= MaxMessageBytes {
			out := &outMsg{groupID: l.groupID, random: random, body: body, n: len(evs)}
			b.mu.Lock()
			l.out = out
			b.mu.Unlock()
			return out, nil
		}
		if len(evs) == 1 {
			return nil, fmt.Errorf("event %s: %d bytes: %w", evs[0].EventID, len(body), ErrTooLarge)
		}
		// Shrink in proportion, at least by one.
		evs = evs[:min(len(evs)-1, max(1, len(evs)*MaxMessageBytes/len(body)))]
	}
	return nil, fmt.Errorf("empty message: %w", ErrTooLarge)
}

// forgetIdleLoop forgets idle lanes every StatsInterval until ctx ends.
func (b *Bridge) forgetIdleLoop(ctx context.Context) {
	every.Tick(ctx, b.cfg.StatsInterval, b.forgetIdle)
}

// forgetIdle drops lanes idle for a while; by then their group's token
// bucket is full again, so a new lane's limiter lets no more through.
func (b *Bridge) forgetIdle() {
	cut := b.now().Add(-b.cfg.StatsInterval)
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, l := range b.lanes {
		if !l.queued && !l.busy && l.wait == nil && len(l.queue) == 0 && l.idleAt.Before(cut) {
			delete(b.lanes, k)
		}
	}
}
