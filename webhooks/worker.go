package webhooks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
)

// mode is where an endpoint's events come from during a tenure.
type mode int

const (
	// modeLive: the durable's handler hands them over (but for the range
	// its last reader covered) and holds them until delivered.
	modeLive mode = iota
	// modeBacklog: its reader reads them back from ROOM_EVENTS from its
	// cursor; the handler hands over only stragglers below it.
	modeBacklog
)

// endpoint is one endpoint's state in a tenure. The worker's mu guards
// every field.
type endpoint struct {
	rec     record
	secret  []byte
	old     []byte // the previous secret, while rec.PreviousSecretUntilMs is ahead
	enabled bool   // false: paused; nothing is sent, nothing is held for long

	mode       mode
	from       uint64 // backlog: the reader's start; the handler takes only events below it
	readTo     uint64 // backlog: every event of the app up to this sequence was read
	maxSkipped uint64 // backlog: the highest sequence the handler left to the reader
	coveredLo  uint64 // live: the range the last reader covered, which the handler skips
	coveredHi  uint64
	stored     uint64 // the cursor_seq stored in MySQL, 0 for NULL

	lanes   map[string]*lane // by room id
	busy    map[string]bool  // rooms with a delivery in flight (a dropped lane's too)
	ready   []*lane          // waiting for a free delivery slot
	active  int              // deliveries in flight
	held    int              // durable events in lanes
	backlog int              // events read back from the stream, in lanes
	epoch   uint64           // bumped when the lanes are dropped (a move to backlog mode)

	failingSince time.Time // zero while the last attempt succeeded
	lastErr      string
	recordedAt   time.Time // the last delivered attempt recorded in the history
	pauseReason  string    // set when it has failed for PauseAfter: the refresh pauses it
	wantBacklog  bool      // set under pressure: the refresh moves it to backlog mode

	// The admin's start (rec.start, see takeStartLocked): made is the start
	// and event types this tenure has made sure of; startMove is a start
	// refresh still has to read back from; clearStart asks refresh to
	// clear start_seq (with the cursor) now that it is made sure of.
	made       startMark
	startMove  uint64
	clearStart bool

	ahead         map[uint64]bool    // events delivered that a reader may read again: it skips them (see aheadCap)
	readerStop    context.CancelFunc // nil when no reader runs
	readerWake    chan struct{}      // a backlog event was settled: the reader may read more
	streamPending uint64             // events after the reader's position, as of its last read
}

// signingKeys are the secrets that sign at now: the current one, and the
// previous one during its rotation window.
func (ep *endpoint) signingKeys(nowMs int64) [][]byte {
	if ep.old != nil && nowMs < ep.rec.PreviousSecretUntilMs {
		return [][]byte{ep.secret, ep.old}
	}
	return [][]byte{ep.secret}
}

// takes reports whether the handler hands the event at seq over to ep,
// noting the events it leaves to the reader. A replayed dead letter
// (replay) is always handed over: readers read the app's room events
// only (one subject filter: a second one, for replays, made the server
// scan the stream once per filter and cost an eighth of the machine
// while a backlog drained).
func (ep *endpoint) takes(seq uint64, replay bool) bool {
	if replay {
		return true
	}
	if ep.mode == modeLive {
		return seq < ep.coveredLo || seq > ep.coveredHi
	}
	if seq < ep.from {
		return true // a straggler (a redelivery) from before the reader's start
	}
	ep.maxSkipped = max(ep.maxSkipped, seq)
	return false
}

// startMark is a start and the event types it was made sure of with.
type startMark struct {
	seq   uint64
	types []string
}

// coversLocked reports whether ep gets, without reading back, every event
// from seq on that it wants now: no such event was handed over, or read
// back, before ep's current settings applied. Live, the handler has been
// handed nothing from seq on (w.maxSeen) and the range a reader covered
// ends before it; reading back, the reader has not read seq yet.
func (w *worker) coversLocked(ep *endpoint, seq uint64) bool {
	if ep.mode == modeBacklog {
		return seq > ep.readTo
	}
	return seq > w.maxSeen && seq > ep.coveredHi
}

// takeStartLocked takes ep's start into account once its row was read (ep.rec
// is the row): every event from rec.start on that ep wants must reach it,
// although the handler may have passed some without it (before this
// process read the row, or with the event types before a PATCH widened
// them). If ep gets them all anyway, refresh only clears the start;
// otherwise refresh moves ep to backlog mode from the start, storing the
// cursor and clearing the start together (plans, move). A start made sure
// of with event types that include the row's needs nothing more.
func (w *worker) takeStartLocked(ep *endpoint) {
	seq := ep.rec.start
	if seq == 0 {
		ep.startMove, ep.clearStart = 0, false
		return
	}
	if ep.made.seq == seq && typesWithin(ep.rec.EventTypes, ep.made.types) {
		ep.startMove = 0
		ep.clearStart = true // again, if an admin's change kept it
		return
	}
	if w.coversLocked(ep, seq) {
		ep.made, ep.startMove, ep.clearStart = startMark{seq, ep.rec.EventTypes}, 0, true
		return
	}
	ep.startMove = seq
}

// state is the "state" label of voiceroom_webhooks_endpoints.
func (ep *endpoint) state() string {
	switch {
	case !ep.enabled:
		return statePaused
	case ep.mode == modeBacklog:
		return stateBacklog
	}
	return stateLive
}

// event is one durable delivery, shared by the endpoints that hold it.
type event struct {
	seq      uint64
	parts    int      // endpoints still holding it
	rejected []string // endpoints that refused it, with why
	shutdown bool     // an endpoint gave it back at shutdown
	done     func(error)
}

// result is the outcome the consumer is given once no endpoint holds it.
func (ev *event) result() error {
	switch {
	case ev.shutdown:
		return errShutdown
	case len(ev.rejected) > 0:
		return bus.Permanent(errors.New(strings.Join(ev.rejected, "; ")))
	}
	return nil
}

// item is an event an endpoint holds in a lane.
type item struct {
	seq     uint64
	env     bus.Envelope
	data    []byte      // the envelope as stored (and sent)
	ev      *event      // the durable delivery; nil for an event read back from the stream
	subject string      // the room.events subject (a dead letter's)
	replay  bool        // a replayed dead letter: never left to a reader
	header  nats.Header // the stored message's headers (a dead letter's)
}

// worker is one tenure of the delivery lease.
type worker struct {
	s      *Sink
	cfg    Config
	ctx    context.Context // the tenure's
	stream jetstream.Stream

	mu       sync.Mutex
	eps      map[int64]*endpoint
	byApp    map[string][]*endpoint
	events   map[uint64]*event // durable deliveries held, by stream sequence
	maxSeen  uint64            // the highest sequence the handler was given (at start, the durable's last delivered)
	cons     *bus.Consumer     // the durable's: what it fetched and has not handed over yet (see cursorLocked)
	held     int               // durable events held, over every endpoint
	stopping bool

	wake  chan struct{}  // asks the refresh loop for a turn now
	tasks sync.WaitGroup // deliveries in flight and readers

	// nc's reconnect count when the tenure began (see reconnected), and
	// the cancel of the tenure's consumer, which ends it.
	nc         *nats.Conn
	reconnects uint64
	end        context.CancelCauseFunc
}

// reconnected reports whether the tenure's connection to NATS was lost
// since it began. Then the durable may have sent events that never
// arrived (in flight when the connection went, or lost with the server's
// restart); it hands them out again only after its ack wait, while later
// events of their rooms come at once. The tenure ends instead, and the
// next one reads back from the durable's first unsettled event, in
// stream order (rewind).
func (w *worker) reconnected() bool {
	return w.nc != nil && w.nc.Stats().Reconnects != w.reconnects
}

// newWorker reads the durable's position and the endpoints.
func (s *Sink) newWorker(ctx context.Context) (*worker, error) {
	w := &worker{s: s, cfg: s.cfg, ctx: ctx, eps: map[int64]*endpoint{}, byApp: map[string][]*endpoint{},
		events: map[uint64]*event{}, wake: make(chan struct{}, 1), nc: s.js.Conn()}
	if w.nc != nil {
		w.reconnects = w.nc.Stats().Reconnects // before the durable's position is read
	}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var err error
	if w.stream, err = s.js.Stream(octx, bus.StreamName); err != nil {
		return nil, fmt.Errorf("stream %s: %w", bus.StreamName, err)
	}
	cons, err := s.js.Consumer(octx, bus.StreamName, s.cfg.Consumer.Durable)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", s.cfg.Consumer.Durable, err)
	}
	// Every event up to here may have been acked by an earlier tenure;
	// the ones after it come to this tenure's handler first.
	info := cons.CachedInfo()
	w.maxSeen = info.Delivered.Stream
	recs, err := loadRecords(octx, s.db)
	if err != nil {
		return nil, err
	}
	if info.Delivered.Stream > info.AckFloor.Stream {
		if err := rewind(octx, s.db, recs, info.AckFloor.Stream+1); err != nil {
			return nil, err
		}
	}
	w.apply(recs)
	// Clear at once the starts this tenure made sure of (endpoints new to
	// the sink): a tenure that ended before its first refresh would leave
	// them for the next to read back from, repeating what it delivered.
	w.syncCursors(octx)
	return w, nil
}

// rewind starts every endpoint of recs in backlog mode from the
// sequence from (the durable's first unsettled event) at the latest,
// storing the cursor first.
//
// An earlier tenure that ended without settling what it held (a crash,
// or a stop that gave events back) leaves those events unacked: the
// durable hands them out again only after its ack wait (or the nak),
// while the events after them come at once, so a room's later events
// would reach the endpoint before its earlier ones. Read back from the
// first unsettled event in stream order instead, each room's events
// arrive in order; the handler acks the redeliveries at or after the
// cursor without handing them over (the reader covers them). Events the
// earlier tenure had already delivered in that range go again: a
// receiver drops them by id, as after any lease change.
func rewind(ctx context.Context, db *sql.DB, recs []record, from uint64) error {
	for i := range recs {
		r := &recs[i]
		if r.cursor.Valid && r.cursor.Int64 > 0 && uint64(r.cursor.Int64) <= from {
			continue
		}
		if err := storeCursor(ctx, db, r.ID, from); err != nil {
			return fmt.Errorf("webhook %d: store the cursor a new tenure starts from: %w", r.ID, err)
		}
		r.cursor = sql.NullInt64{Int64: int64(from), Valid: true}
	}
	return nil
}

// run consumes the durable until ctx ends, then gives back what it holds.
func (w *worker) run(ctx context.Context) error {
	cons, err := bus.NewAsyncConsumer(w.s.js, w.cfg.Consumer, w.handle, w.s.log, w.s.busM)
	if err != nil {
		return fmt.Errorf("webhooks consumer: %w", err)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	w.mu.Lock()
	w.cons = cons
	w.end = cancel
	w.mu.Unlock()
	var loops sync.WaitGroup
	loops.Go(func() { w.refreshLoop(wctx) })
	loops.Go(func() {
		<-wctx.Done()
		w.stop()
	})
	loops.Go(func() {
		select {
		case <-cons.Running():
			w.s.servingOnce()
		case <-wctx.Done():
		}
	})
	err = cons.Run(wctx)
	cancel(nil)
	loops.Wait()
	w.tasks.Wait()
	// A standby exports no endpoint's state.
	w.s.metrics.setStates(nil)
	for id := range w.eps {
		w.s.metrics.forget(id)
	}
	if cause := context.Cause(wctx); errors.Is(cause, errReconnected) && ctx.Err() == nil {
		return cause
	}
	return err
}

// handle takes one event from the durable: each endpoint of its app that
// wants it and takes it now holds it in the lane of its room; it is acked
// once every one of them has delivered it (or dead-lettered, or left it to
// its reader).
func (w *worker) handle(_ context.Context, d bus.Delivery, done func(error)) {
	e := d.Envelope
	w.mu.Lock()
	if w.stopping {
		w.mu.Unlock()
		done(errShutdown)
		return
	}
	if w.end != nil && w.reconnected() {
		// Nothing handed over after a reconnect: the next tenure reads
		// back from the durable's first unsettled event (see reconnected).
		w.end(errReconnected)
		w.mu.Unlock()
		done(errShutdown)
		return
	}
	w.maxSeen = max(w.maxSeen, d.StreamSeq)
	if ev := w.events[d.StreamSeq]; ev != nil {
		// Delivered again while held (the in-progress signals lapsed):
		// settled together with the delivery held.
		first := ev.done
		ev.done = func(err error) { first(err); done(err) }
		w.mu.Unlock()
		return
	}
	var ev *event
	var data []byte
	replay := d.ReplayOf != 0
	for _, ep := range w.byApp[e.AppCode] {
		if !ep.rec.wants(e.EventType) || !ep.takes(d.StreamSeq, replay) {
			continue
		}
		if ev == nil {
			var err error
			if data, err = e.Marshal(); err != nil {
				w.mu.Unlock()
				done(bus.Permanent(err))
				return
			}
			ev = &event{seq: d.StreamSeq, done: done}
			w.events[d.StreamSeq] = ev
		}
		ev.parts++
		w.enqueueLocked(ep, &item{seq: d.StreamSeq, env: e, data: data, ev: ev, subject: d.Subject, replay: replay})
		w.pressureLocked(ep)
	}
	w.mu.Unlock()
	if ev == nil {
		done(nil)
	}
}

// pressureLocked asks for ep to read its backlog from the stream when it
// holds MaxHeld events, or, when all endpoints together hold three
// quarters of what the consumer may have in hand, for the one that holds
// most (a failing one first).
func (w *worker) pressureLocked(ep *endpoint) {
	target := ep
	if ep.held < w.cfg.MaxHeld {
		if w.held < w.cfg.Consumer.FetchBatch*3/4 {
			return
		}
		target = nil
		for _, e := range w.eps {
			if !e.enabled || e.mode != modeLive || e.wantBacklog || e.held == 0 {
				continue
			}
			if target == nil || (e.failing() && !target.failing()) || (e.failing() == target.failing() && e.held > target.held) {
				target = e
			}
		}
		if target == nil {
			return
		}
	}
	if target.enabled && target.mode == modeLive && !target.wantBacklog {
		target.wantBacklog = true
		w.kick()
	}
}

// aheadCap bounds an endpoint's ahead set: past it, a move to backlog
// mode may send some events again.
func aheadCap(cfg Config) int { return 8 * cfg.MaxHeld }

// pruneAheadLocked forgets the delivered events no reader will read
// again: those below the oldest event ep holds (live) or below its
// reader's position (backlog mode).
func (w *worker) pruneAheadLocked(ep *endpoint) {
	low := ep.readTo + 1
	if ep.mode == modeLive {
		low = w.cursorLocked(ep)
	}
	for seq := range ep.ahead {
		if seq < low {
			delete(ep.ahead, seq)
		}
	}
}

// failing reports whether ep's last attempt failed.
func (ep *endpoint) failing() bool { return !ep.failingSince.IsZero() }

// kick asks the refresh loop for a turn now.
func (w *worker) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// stop gives back, at the end of the tenure, every event not in a
// delivery in flight; those are settled when their attempt returns.
func (w *worker) stop() {
	w.mu.Lock()
	w.stopping = true
	var dones []func()
	for _, ep := range w.eps {
		w.stopReaderLocked(ep)
		for _, l := range ep.lanes {
			if l.timer != nil {
				l.timer.Stop()
				l.timer = nil
			}
			keep := 0
			if l.state == laneRunning && l.out != nil {
				keep = len(l.out.items)
			}
			dones = append(dones, w.releaseLocked(ep, l.queue[keep:], settleShutdown, "")...)
			l.queue = l.queue[:keep]
		}
		ep.ready = nil
	}
	w.mu.Unlock()
	for _, d := range dones {
		d()
	}
}

// settle kinds: what happened to an item an endpoint held.
type settleKind int

const (
	settleDelivered settleKind = iota // a 2xx
	settleRejected                    // refused: dead-lettered
	settleReleased                    // left to the reader (backlog mode) or dropped (endpoint deleted)
	settleShutdown                    // given back to the durable at shutdown
)

// releaseLocked settles items (already out of their lane) of ep and
// returns the consumer's done calls to make once w.mu is released.
func (w *worker) releaseLocked(ep *endpoint, items []*item, kind settleKind, reason string) []func() {
	var dones []func()
	nowMs := w.cfg.Now().UnixMilli()
	for _, it := range items {
		switch kind {
		case settleDelivered:
			w.s.metrics.event(OutcomeDelivered, 1)
			w.s.metrics.delivered(float64(nowMs-it.env.OccurredAtMs) / 1000)
		case settleRejected:
			w.s.metrics.event(outcomeDeadLettered, 1)
		}
		if it.ev == nil {
			ep.backlog--
			if ep.readerWake != nil {
				select {
				case ep.readerWake <- struct{}{}:
				default:
				}
			}
			continue
		}
		ep.held--
		w.held--
		ev := it.ev
		switch kind {
		case settleRejected:
			ev.rejected = append(ev.rejected, reason)
		case settleShutdown:
			ev.shutdown = true
		}
		if ev.parts--; ev.parts == 0 {
			delete(w.events, ev.seq)
			done, err := ev.done, ev.result()
			dones = append(dones, func() { done(err) })
		}
	}
	return dones
}
