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
	handedOver int       // since lastWarn, for the rate-limited warning
	ops        []groupOp // settled since the lock was taken: sendOpsLocked queues them

	inFlight atomic.Bool // groups may be written in flight (checked at Run)

	work    chan fastItem
	marks   chan string
	groups  chan []groupOp // units: see sendOpsLocked
	done    chan struct{}  // closed when Run's ctx ends
	flush   chan struct{}  // closed when the workers have stopped
	running atomic.Bool
}

// fastItem is one event on the fast path.
type fastItem struct {
	key         voiceroom.RoomKey
	msg         bus.Message
	committedAt time.Time
	group       *groupState // nil: its row was written pending and is marked by event_id
	rowID       int64       // its room_outbox id when group is set
}

// groupState tracks the events of one in-flight group commit (see
// voiceroom.OutboxGroup) until each is either acked by the stream or left
// to the relay. Guarded by FastPath.mu.
type groupState struct {
	group voiceroom.OutboxGroup
	left  int // events not yet settled
}

// groupOp is the fast path's MySQL work for in-flight groups, done in the
// order queued: set one row back to pending (an event left to the relay),
// or release a group (every event settled). Order matters: a room's rows
// go back to pending in room_version order, so the relay, which publishes
// pending rows in id order, never publishes a later event of a room
// before an earlier one; and a group is released only after its rows
// left to the relay are pending.
//
// The ops settled under one hold of the lock (a transaction's events, or
// a room's events after a failed publish) travel as one unit, and a unit
// is never split between statements below MarkBatch ops: a command's
// several rows of one room_version go back to pending together. Were one
// pending before its sibling, a relay pass could publish it and then the
// room's next version, which follows on from it, before the sibling.
type groupOp struct {
	id      int64 // the row's id (repend) or the group's first_id (release)
	release bool
	// unitStart marks the first op of a unit.
	unitStart bool
}

// roomQueue holds a room's events that wait for its in-flight publish.
type roomQueue struct {
	waiting []fastItem
}

var _ interface {
	Taking() bool
	Committed([]bus.Message, voiceroom.OutboxGroup, time.Time)
	Behind(voiceroom.RoomKey, string)
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
		groups:  make(chan []groupOp, cfg.MarkQueueSize),
		done:    make(chan struct{}),
		flush:   make(chan struct{}),
	}, nil
}

// Config returns the fast path's configuration with defaults applied.
func (f *FastPath) Config() FastPathConfig { return f.cfg }

// Taking reports whether the fast path takes new events now, so that a
// group commit may write its outbox rows in flight: it runs, its
// connection is up, it is not stopping, not every room is left to the
// relay, and its queue has room. Committed may still leave some of them
// to the relay; their group's rows then go back to pending.
func (f *FastPath) Taking() bool {
	if !f.running.Load() || !f.inFlight.Load() || !f.cfg.Connected() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.stopped && f.allBlocked == "" && f.queued < f.cfg.QueueSize
}

// Committed hands the fast path the outbox messages of one committed
// transaction, in commit order and, per room, in room_version order; group
// covers their rows when they were written in flight. It never blocks on
// I/O and never fails: what it cannot take is left to the relay, which
// finds the rows pending (an in-flight group's rows are set back to
// pending first).
func (f *FastPath) Committed(msgs []bus.Message, group voiceroom.OutboxGroup, committedAt time.Time) {
	if len(msgs) == 0 {
		return
	}
	connected := f.cfg.Connected()
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.sendOpsLocked()
	var g *groupState
	if group.InFlight() {
		if group.Rows() != len(msgs) {
			// Never expected: the group's rows are these messages', in
			// order. Leave them to the relay's in-flight grace rather
			// than release or repend rows never seen.
			f.log.Error("outbox fast path: in-flight group does not match its messages; the relay will publish it after its in-flight grace",
				"first_id", group.FirstID, "last_id", group.LastID, "messages", len(msgs))
			f.m.handOver("group_mismatch", len(msgs))
			return
		}
		g = &groupState{group: group, left: len(msgs)}
	}
	// The queue takes the whole transaction or none of it: a command's
	// several events of one room must not be split, the first published
	// here and the next left to the relay, which would not know to wait
	// for the first (they share a room_version).
	full := f.queued+len(msgs) > f.cfg.QueueSize
	for i, m := range msgs {
		key, ok := bus.RoomKeyOf(m.Subject)
		if !ok {
			key = voiceroom.RoomKey{RoomID: m.Subject} // never from rooms; still one queue per subject
		}
		it := fastItem{key: key, msg: m, committedAt: committedAt, group: g}
		if g != nil {
			it.rowID = group.FirstID + int64(i)
		}
		switch {
		case f.stopped:
			f.m.handOver("stopped", 1)
			f.settleLocked(it, false)
		case f.allBlocked != "":
			f.allBlocked = m.ID
			f.m.handOver("room_blocked", 1)
			f.settleLocked(it, false)
		case f.blocked[key] != "":
			f.blocked[key] = m.ID
			f.m.handOver("room_blocked", 1)
			f.settleLocked(it, false)
		case !connected:
			f.handOverLocked(key, m.ID, "disconnected", 1)
			f.settleLocked(it, false)
		case full:
			f.handOverLocked(key, m.ID, "queue_full", 1)
			f.settleLocked(it, false)
		default:
			f.queued++
			if rq, ok := f.rooms[key]; ok {
				rq.waiting = append(rq.waiting, it)
				continue
			}
			f.rooms[key] = &roomQueue{}
			f.work <- it // never blocks: the channel holds QueueSize and queued stays within it (full)
		}
	}
}

// settleLocked records that it was published (acked by the stream) or
// left to the relay. A pending row's event_id is queued for its mark. An
// in-flight row left to the relay is queued to go back to pending, and a
// group whose events are all settled is queued for release (groupLoop).
// A full queue leaves the work to the relay: an unmarked row is published
// again (de-duplicated by the stream); an in-flight group is set back to
// pending after the relay's in-flight grace (a room's order may then
// suffer, as when the queue of events overflows: see the package doc).
func (f *FastPath) settleLocked(it fastItem, published bool) {
	g := it.group
	if g == nil {
		if !published {
			return
		}
		select {
		case f.marks <- it.msg.ID:
		default:
			f.m.handOver("mark_queue_full", 1) // stays pending; the relay's re-publish is de-duplicated
		}
		return
	}
	if !published {
		f.ops = append(f.ops, groupOp{id: it.rowID})
	}
	if g.left--; g.left == 0 {
		f.ops = append(f.ops, groupOp{id: g.group.FirstID, release: true})
	}
}

// leaveWaitingLocked leaves the events queued behind room key's head to
// the relay, as the fast path stops, and forgets the room.
func (f *FastPath) leaveWaitingLocked(key voiceroom.RoomKey) {
	rq := f.rooms[key]
	if rq == nil {
		return
	}
	f.m.handOver("stopped", len(rq.waiting))
	f.queued -= len(rq.waiting)
	for _, w := range rq.waiting {
		f.settleLocked(w, false)
	}
	delete(f.rooms, key)
}

// sendOpsLocked queues the ops settleLocked collected, as one unit; every
// caller of settleLocked calls it before it unlocks.
func (f *FastPath) sendOpsLocked() {
	if len(f.ops) == 0 {
		return
	}
	f.ops[0].unitStart = true
	select {
	case f.groups <- f.ops:
	default:
		f.m.handOver("mark_queue_full", 0)
	}
	f.ops = nil
}

// Behind tells the fast path that room key still has events pending in
// the outbox, the newest newestID, which another process committed (a
// room taken over from another rooms node, loaded after a restart, or
// reloaded after a commit whose outcome was unknown): the room's next
// events are left to the relay until it has published newestID, so that
// they do not overtake those in the stream.
func (f *FastPath) Behind(key voiceroom.RoomKey, newestID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	if f.blocked[key] == "" && f.allBlocked == "" {
		f.handOverLocked(key, newestID, "room_blocked", 0)
		return
	}
	// Already left to the relay. newestID was read after every event of
	// the room handed here had committed, so it is no older than the
	// room's blocked event, and may be newer: a group whose COMMIT went
	// unanswered is never handed over. Wait for it, not for the older one
	// (and past allBlocked, which clears without regard to this room).
	f.blocked[key] = newestID
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
	f.checkInFlight(ctx)
	f.log.Info("outbox fast path started", "in_flight_groups", f.inFlight.Load(), "publish_timeout", f.cfg.PublishTimeout, "workers", f.cfg.Workers,
		"queue_size", f.cfg.QueueSize)

	var workers, loops sync.WaitGroup
	for range f.cfg.Workers {
		workers.Go(f.worker)
	}
	loops.Go(f.markLoop)
	loops.Go(f.groupLoop)
	loops.Go(func() { f.checkLoop(ctx) })

	<-ctx.Done()
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	close(f.done)
	workers.Wait()
	// Rooms whose turn had not come: their rows stay (or go back to)
	// pending for the relay.
	for left := true; left; {
		select {
		case it := <-f.work:
			f.m.handOver("stopped", 1)
			f.mu.Lock()
			f.settleLocked(it, false)
			f.leaveWaitingLocked(it.key) // no worker takes them any more
			f.sendOpsLocked()
			f.mu.Unlock()
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
			f.settleLocked(it, false)
			for _, w := range rq.waiting {
				f.settleLocked(w, false)
			}
			f.sendOpsLocked()
			f.mu.Unlock()
			f.m.failed(pathFast, 1)
			appCode, roomID, eventType := subjectParts(it.msg.Subject)
			f.log.Warn("outbox fast publish failed; the relay will publish the room's events", "event_id", it.msg.ID,
				"event_type", eventType, "room_id", roomID, "app_code", appCode, "retry_count", 0, "status", "pending",
				"error", sanitizeError(err, it.msg.ID, it.msg.Subject))
			return
		}
		var next *fastItem
		f.settleLocked(it, true)
		switch {
		case len(rq.waiting) > 0 && !f.stopped:
			next = &rq.waiting[0]
			rq.waiting = rq.waiting[1:]
		case len(rq.waiting) > 0: // stopping: the relay takes the rest
			f.leaveWaitingLocked(it.key)
		default:
			delete(f.rooms, it.key)
		}
		f.sendOpsLocked()
		f.mu.Unlock()

		f.m.acked(pathFast, it.msg.ID, it.committedAt, now, ack.Duplicate)
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
		n, args := sizedArgs(ids, f.cfg.MarkBatch)
		st, err := f.stmts.get(ctx, tx, lockPendingByEventSQL(n))
		if err != nil {
			return err
		}
		rs, err := st.QueryContext(ctx, args...)
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
			n, args := sizedArgs(locked, f.cfg.MarkBatch, f.cfg.Now().UnixMilli())
			st, err := f.stmts.get(ctx, tx, markPublishedSQL(n))
			if err != nil {
				return err
			}
			if _, err := st.ExecContext(ctx, args...); err != nil {
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

// groupLoop does the queued groupOps in order, each run of repends in one
// UPDATE and each run of releases in one DELETE. A failed statement is
// tried again (with what queued since behind it) every CheckInterval: no
// later op overtakes it. After flush it does what is left, once, and
// returns; what still fails is the relay's, after its in-flight grace.
func (f *FastPath) groupLoop() {
	var queue []groupOp
	retry := time.NewTicker(f.cfg.CheckInterval)
	defer retry.Stop()
	take := func() {
		for len(queue) < 4*f.cfg.MarkBatch {
			select {
			case unit := <-f.groups:
				queue = append(queue, unit...)
			default:
				return
			}
		}
	}
	for {
		select {
		case unit := <-f.groups:
			queue = append(queue, unit...)
		case <-retry.C:
		case <-f.flush:
			for {
				take()
				if len(queue) == 0 || !f.doGroupOps(&queue) {
					return
				}
			}
		}
		take()
		f.doGroupOps(&queue)
	}
}

// doGroupOps does the ops at the head of queue, run by run, and removes
// those done. It stops at the first failure and reports whether all were
// done.
func (f *FastPath) doGroupOps(queue *[]groupOp) bool {
	for len(*queue) > 0 {
		q := *queue
		n := runLength(q, f.cfg.MarkBatch)
		ids := make([]int64, n)
		for i, op := range q[:n] {
			ids[i] = op.id
		}
		if !f.groupStatement(q[0].release, ids) {
			return false
		}
		*queue = q[n:]
	}
	return true
}

// runLength is how many ops at the head of q one statement does: ops of
// one kind, at most limit, and cut where a unit starts unless one unit
// alone fills the run.
func runLength(q []groupOp, limit int) int {
	n := 1
	for n < len(q) && n < limit && q[n].release == q[0].release {
		n++
	}
	if n == limit && n < len(q) && !q[n].unitStart && q[n].release == q[0].release {
		for cut := n - 1; cut > 0; cut-- {
			if q[cut].unitStart {
				return cut
			}
		}
	}
	return n
}

// groupStatement sets rows back to pending or deletes groups' in-flight
// rows; false when MySQL failed.
func (f *FastPath) groupStatement(release bool, ids []int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.StatementTimeout)
	defer cancel()
	n, args := sizedArgs(ids, f.cfg.MarkBatch)
	query, what := rependRowsSQL(n), "fast_repend"
	if release {
		query, what = releaseInFlightSQL(n), "fast_release"
	}
	st, err := f.stmts.prepared(ctx, query)
	if err == nil {
		_, err = st.ExecContext(ctx, args...)
	}
	if err != nil {
		f.m.dbFailed(what)
		f.log.Warn("outbox fast path could not settle in-flight rows; trying again (rooms left to the relay wait meanwhile)",
			"release", release, "rows", len(ids), "error", err)
		return false
	}
	return true
}

// checkInFlight decides whether group commits may write their rows in
// flight: only when one multi-row INSERT takes consecutive ids
// (innodb_autoinc_lock_mode 0 or 1), which the in-flight range relies on.
// Otherwise every row is written pending and marked by event_id, as
// before in-flight groups existed.
func (f *FastPath) checkInFlight(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.StatementTimeout)
	defer cancel()
	var mode int
	err := f.db.QueryRowContext(ctx, "SELECT @@innodb_autoinc_lock_mode").Scan(&mode)
	switch {
	case err != nil:
		f.log.Warn("outbox fast path cannot read innodb_autoinc_lock_mode; outbox rows are marked one by one", "error", err)
	case mode > 1:
		f.log.Warn("innodb_autoinc_lock_mode is 2 (interleaved): a multi-row insert may not take consecutive ids, so outbox rows are marked one by one",
			"innodb_autoinc_lock_mode", mode)
	default:
		f.inFlight.Store(true)
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
	f.stmts.warm(ctx, ofEverySize(n, lockPendingByEventSQL)...)
	f.stmts.warm(ctx, ofEverySize(n, markPublishedSQL)...)
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
		n, args := sizedArgs(c, chunk)
		st, err := f.stmts.prepared(qctx, pendingEventsSQL(n))
		if err != nil {
			return err
		}
		rs, err := st.QueryContext(qctx, args...)
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
