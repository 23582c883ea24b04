package outboxrelay

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"voiceroom"
	"voiceroom/bus"
)

// FastPath publishes the outbox messages of each committed transaction at
// once, then marks their rows published in batches, so that most events
// reach the stream milliseconds after the commit and the relay finds
// nothing to do. Anything it cannot do quickly it leaves to the relay: a
// failed or timed-out publish, a full queue, a down connection, a failed
// mark. It never fails the command and never changes retry_count.
//
// Per room it keeps the stream in room_version order: a room has at most
// one fast publish in flight, and once one of a room's events is left to
// the relay, all its later events are too, until the relay has published
// the newest of them. See the package doc for what that guarantees.
type FastPath struct {
	db    *sql.DB
	pub   Publisher
	log   *slog.Logger
	m     *Metrics
	cfg   FastPathConfig
	stmts *statements

	mu         sync.Mutex
	rooms      map[voiceroom.RoomKey]*roomQueue // rooms with a publish in flight
	blocked    map[voiceroom.RoomKey]string     // room -> newest event_id left to the relay
	allBlocked string                           // newest event_id left to the relay while blocked overflowed; "" = off
	queued     int                              // events accepted and not yet published or handed over
	stopped    bool
	lastWarn   time.Time
	handedOver int // since lastWarn, for the rate-limited warning

	work    chan fastItem
	marks   chan string
	done    chan struct{} // closed when Run's ctx ends
	flush   chan struct{} // closed when the workers have stopped
	running atomic.Bool
}

// fastItem is one event on the fast path.
type fastItem struct {
	key         voiceroom.RoomKey
	msg         bus.Message
	committedAt time.Time
}

// roomQueue holds a room's events that wait for its in-flight publish.
type roomQueue struct {
	waiting []fastItem
}

var _ interface {
	Committed([]bus.Message, time.Time)
} = (*FastPath)(nil)

// NewFastPath returns a FastPath publishing through pub and marking rows
// in db. log should carry node_id; m may be nil.
func NewFastPath(db *sql.DB, pub Publisher, log *slog.Logger, m *Metrics, cfg FastPathConfig) (*FastPath, error) {
	if db == nil || pub == nil {
		return nil, fmt.Errorf("%w: fast path needs a database and a publisher", ErrInvalidConfig)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FastPath{
		db:      db,
		pub:     pub,
		log:     log.With("worker", WorkerName, "path", pathFast),
		m:       m,
		cfg:     cfg,
		stmts:   newStatements(db),
		rooms:   make(map[voiceroom.RoomKey]*roomQueue),
		blocked: make(map[voiceroom.RoomKey]string),
		work:    make(chan fastItem, cfg.QueueSize),
		marks:   make(chan string, cfg.MarkQueueSize),
		done:    make(chan struct{}),
		flush:   make(chan struct{}),
	}, nil
}

// Config returns the fast path's configuration with defaults applied.
func (f *FastPath) Config() FastPathConfig { return f.cfg }

// Committed hands the fast path the outbox messages of one committed
// transaction, in commit order and, per room, in room_version order. It
// never blocks on I/O and never fails: what it cannot take is left to the
// relay, which finds the rows pending.
func (f *FastPath) Committed(msgs []bus.Message, committedAt time.Time) {
	if len(msgs) == 0 {
		return
	}
	connected := f.cfg.Connected()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range msgs {
		key, ok := bus.RoomKeyOf(m.Subject)
		if !ok {
			key = voiceroom.RoomKey{RoomID: m.Subject} // never from rooms; still one queue per subject
		}
		switch {
		case f.stopped:
			f.m.handOver("stopped", 1)
		case f.allBlocked != "":
			f.allBlocked = m.ID
			f.m.handOver("room_blocked", 1)
		case f.blocked[key] != "":
			f.blocked[key] = m.ID
			f.m.handOver("room_blocked", 1)
		case !connected:
			f.handOverLocked(key, m.ID, "disconnected", 1)
		case f.queued >= f.cfg.QueueSize:
			f.handOverLocked(key, m.ID, "queue_full", 1)
		default:
			f.queued++
			it := fastItem{key: key, msg: m, committedAt: committedAt}
			if rq, ok := f.rooms[key]; ok {
				rq.waiting = append(rq.waiting, it)
				continue
			}
			f.rooms[key] = &roomQueue{}
			f.work <- it // never blocks: the channel holds QueueSize and queued < QueueSize
		}
	}
}

// Behind tells the fast path that room key still has events pending in
// the outbox, the newest newestID, which another process committed (a
// room taken over from another rooms node, or loaded after a restart):
// the room's next events are left to the relay until it has published
// newestID, so that they do not overtake those in the stream.
func (f *FastPath) Behind(key voiceroom.RoomKey, newestID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped || f.blocked[key] != "" || f.allBlocked != "" {
		return // already left to the relay, by newer events
	}
	f.handOverLocked(key, newestID, "room_blocked", 0)
}

// handOverLocked leaves n events of room key, the newest newestID, to the
// relay and blocks the room until the relay has published newestID. A
// room already blocked keeps its newer event_id.
func (f *FastPath) handOverLocked(key voiceroom.RoomKey, newestID, reason string, n int) {
	f.m.handOver(reason, n)
	switch {
	case f.allBlocked != "":
		// Everything goes to the relay already; allBlocked is newer.
	case f.blocked[key] != "":
		// Events handed over after this room blocked are newer.
	case len(f.blocked) >= f.cfg.MaxBlockedRooms:
		f.allBlocked = newestID
		f.log.Warn("outbox fast path tracks too many rooms waiting for the relay; leaving every event to the relay until it catches up",
			"blocked_rooms", len(f.blocked))
	default:
		f.blocked[key] = newestID
	}
	f.handedOver += n
	if now := f.cfg.Now(); now.Sub(f.lastWarn) >= 10*time.Second {
		f.log.Warn("outbox fast path is leaving events to the relay", "reason", reason, "events", f.handedOver,
			"blocked_rooms", len(f.blocked))
		f.lastWarn, f.handedOver = now, 0
	}
}

// Run publishes what Committed hands over, marks the published rows and
// frees rooms once the relay has caught up with them. It blocks until ctx
// ends; then Committed leaves everything to the relay, publishes in flight
// finish within PublishTimeout, the last marks are written, and Run
// returns within FastPathConfig.DrainBound. It returns an error only when
// called twice.
func (f *FastPath) Run(ctx context.Context) error {
	if !f.running.CompareAndSwap(false, true) {
		return fmt.Errorf("outbox fast path: %w", ErrAlreadyRunning)
	}
	defer f.stmts.close()
	f.warm(ctx)
	f.log.Info("outbox fast path started", "publish_timeout", f.cfg.PublishTimeout, "workers", f.cfg.Workers,
		"queue_size", f.cfg.QueueSize)

	var workers, loops sync.WaitGroup
	for range f.cfg.Workers {
		workers.Go(f.worker)
	}
	loops.Go(f.markLoop)
	loops.Go(func() { f.checkLoop(ctx) })

	<-ctx.Done()
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	close(f.done)
	workers.Wait()
	// Rooms whose turn had not come: their rows stay pending for the relay.
	for left := true; left; {
		select {
		case <-f.work:
			f.m.handOver("stopped", 1)
		default:
			left = false
		}
	}
	close(f.flush)
	loops.Wait()
	f.log.Info("outbox fast path stopped")
	return nil
}

// worker publishes rooms' events until Run stops.
func (f *FastPath) worker() {
	for {
		select {
		case it := <-f.work:
			f.publishRoom(it)
		case <-f.done:
			return
		}
	}
}

// publishRoom publishes it and then the events of its room that queued
// behind it, one at a time, so the room's order holds even across a
// reconnect (nats.go resends what it buffered while disconnected, which
// could otherwise overtake a message lost with the old connection).
func (f *FastPath) publishRoom(it fastItem) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.PublishTimeout)
		ack, err := f.pub.PublishMessage(ctx, it.msg)
		cancel()
		now := f.cfg.Now()

		f.mu.Lock()
		f.queued--
		rq := f.rooms[it.key]
		if err != nil {
			newest := it.msg.ID
			if n := len(rq.waiting); n > 0 {
				newest = rq.waiting[n-1].msg.ID
			}
			f.queued -= len(rq.waiting)
			delete(f.rooms, it.key)
			f.handOverLocked(it.key, newest, "publish_failed", 1+len(rq.waiting))
			f.mu.Unlock()
			f.m.failed(pathFast, 1)
			appCode, roomID, eventType := subjectParts(it.msg.Subject)
			f.log.Warn("outbox fast publish failed; the relay will publish the room's events", "event_id", it.msg.ID,
				"event_type", eventType, "room_id", roomID, "app_code", appCode, "retry_count", 0, "status", "pending",
				"error", sanitizeError(err, it.msg.ID, it.msg.Subject))
			return
		}
		var next *fastItem
		switch {
		case len(rq.waiting) > 0 && !f.stopped:
			next = &rq.waiting[0]
			rq.waiting = rq.waiting[1:]
		case len(rq.waiting) > 0: // stopping: the relay takes the rest
			f.m.handOver("stopped", len(rq.waiting))
			f.queued -= len(rq.waiting)
			delete(f.rooms, it.key)
		default:
			delete(f.rooms, it.key)
		}
		f.mu.Unlock()

		f.m.acked(pathFast, it.msg.ID, it.committedAt, now, ack.Duplicate)
		select {
		case f.marks <- it.msg.ID:
		default:
			f.m.handOver("mark_queue_full", 1) // stays pending; the relay's re-publish is de-duplicated
		}
		if next == nil {
			return
		}
		it = *next
	}
}

// subjectParts splits a room event subject into its tokens.
func subjectParts(subject string) (appCode, roomID, eventType string) {
	rest := strings.TrimPrefix(subject, bus.SubjectPrefix+".")
	appCode, rest, _ = strings.Cut(rest, ".")
	roomID, eventType, _ = strings.Cut(rest, ".")
	return appCode, roomID, eventType
}

// markLoop marks published event_ids in batches: it takes what has
// queued while the previous batch was written, so batches grow with load.
// After flush it writes what is left and returns.
func (f *FastPath) markLoop() {
	ids := make([]string, 0, f.cfg.MarkBatch)
	for {
		ids = ids[:0]
		select {
		case id := <-f.marks:
			ids = append(ids, id)
		case <-f.flush:
			for {
				select {
				case id := <-f.marks:
					ids = append(ids, id)
					continue
				default:
				}
				break
			}
			if len(ids) > 0 {
				_ = chunks(ids, f.cfg.MarkBatch, func(c []string) error { f.mark(c); return nil })
			}
			return
		}
	fill:
		for len(ids) < f.cfg.MarkBatch {
			select {
			case id := <-f.marks:
				ids = append(ids, id)
			default:
				break fill
			}
		}
		f.mark(ids)
	}
}

// mark sets the still-pending rows of ids published. Rows a relay holds
// are skipped (it marks them itself), so the fast path never waits for a
// relay's batch. A failure leaves the rows pending: the relay publishes
// them again and the stream drops the repeats.
func (f *FastPath) mark(ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.StatementTimeout)
	defer cancel()
	err := func() error {
		tx, err := f.db.BeginTx(ctx, txOptions)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer rollback(tx)
		n := f.cfg.MarkBatch
		st, err := f.stmts.get(ctx, tx, lockPendingByEventSQL(n))
		if err != nil {
			return err
		}
		rs, err := st.QueryContext(ctx, padded(ids, n)...)
		if err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		locked := make([]int64, 0, len(ids))
		for rs.Next() {
			var id int64
			if err := rs.Scan(&id); err != nil {
				rs.Close()
				return fmt.Errorf("lock: %w", err)
			}
			locked = append(locked, id)
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if len(locked) > 0 {
			st, err := f.stmts.get(ctx, tx, markPublishedSQL(n))
			if err != nil {
				return err
			}
			if _, err := st.ExecContext(ctx, append([]any{f.cfg.Now().UnixMilli()}, padded(locked, n)...)...); err != nil {
				return fmt.Errorf("update: %w", err)
			}
		}
		return tx.Commit()
	}()
	if err != nil {
		f.m.dbFailed("fast_mark")
		f.log.Warn("outbox fast path could not mark rows published; the relay will publish them again (de-duplicated)",
			"events", len(ids), "error", err)
	}
}

// checkLoop frees blocked rooms whose newest handed-over event the relay
// has published, every CheckInterval until flush.
func (f *FastPath) checkLoop(ctx context.Context) {
	t := time.NewTicker(f.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-f.flush:
			return
		case <-t.C:
			f.check(ctx)
		}
	}
}

// warm prepares the mark statements on the pool, outside any
// transaction; check calls it again until it has succeeded.
func (f *FastPath) warm(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.StatementTimeout)
	defer cancel()
	n := f.cfg.MarkBatch
	f.stmts.warm(ctx, lockPendingByEventSQL(n), markPublishedSQL(n))
}

// check asks MySQL which of the blocked rooms' newest handed-over events
// are still pending and frees the rooms whose event is not.
func (f *FastPath) check(ctx context.Context) {
	f.warm(ctx)
	f.mu.Lock()
	if len(f.blocked) == 0 && f.allBlocked == "" {
		f.mu.Unlock()
		return
	}
	type entry struct {
		key voiceroom.RoomKey // zero for allBlocked
		id  string
	}
	entries := make([]entry, 0, len(f.blocked)+1)
	for k, id := range f.blocked {
		entries = append(entries, entry{k, id})
	}
	if f.allBlocked != "" {
		entries = append(entries, entry{voiceroom.RoomKey{}, f.allBlocked})
	}
	f.mu.Unlock()

	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.id
	}
	pending := make(map[string]bool)
	const chunk = 500
	err := chunks(ids, chunk, func(c []string) error {
		qctx, cancel := context.WithTimeout(ctx, f.cfg.StatementTimeout)
		defer cancel()
		st, err := f.stmts.prepared(qctx, pendingEventsSQL(chunk))
		if err != nil {
			return err
		}
		rs, err := st.QueryContext(qctx, padded(c, chunk)...)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var id string
			if err := rs.Scan(&id); err != nil {
				return err
			}
			pending[id] = true
		}
		return rs.Err()
	})
	if err != nil {
		if ctx.Err() == nil {
			f.m.dbFailed("check")
			f.log.Warn("outbox fast path could not check blocked rooms", "error", err)
		}
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range entries {
		if pending[e.id] {
			continue
		}
		if e.key == (voiceroom.RoomKey{}) {
			if f.allBlocked == e.id {
				f.allBlocked = ""
			}
		} else if f.blocked[e.key] == e.id {
			delete(f.blocked, e.key)
		}
	}
}

// BlockedRooms returns the number of rooms whose events currently go to
// the relay, and whether every room does (the tracking overflowed).
func (f *FastPath) BlockedRooms() (rooms int, all bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.blocked), f.allBlocked != ""
}
