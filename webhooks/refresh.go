package webhooks

import (
	"context"
	"time"

	"voiceroom/internal/every"
)

// refreshLoop runs refresh every RefreshInterval, and at once when kicked,
// until ctx ends.
func (w *worker) refreshLoop(ctx context.Context) {
	every.TickOr(ctx, w.cfg.RefreshInterval, w.wake, func() { w.refresh(ctx) })
}

// refresh reads the endpoints (an admin's change), moves endpoints to
// backlog mode (paused, failing too long, holding too much), stores the
// cursors that moved, and sets the gauges. MySQL failing leaves
// everything as it is until the next turn: nothing is released before
// its cursor is stored.
func (w *worker) refresh(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	recs, err := loadRecords(rctx, w.s.db)
	if err != nil {
		w.s.log.Warn("webhook endpoints not read; keeping the last ones", "error", err)
	} else {
		w.apply(recs)
	}
	for _, p := range w.plans() {
		w.move(rctx, p)
	}
	w.syncCursors(rctx)
	w.gauges()
}

// apply brings the endpoints in line with recs: new ones start as their
// row says (live, or in backlog mode from cursor_seq), deleted ones drop
// what they hold, a resumed one reads its backlog, a paused one stops
// sending (refresh then stores its cursor and releases what it holds).
func (w *worker) apply(recs []record) {
	type opened struct{ secret, old []byte }
	keys := make([]opened, len(recs))
	for i, r := range recs {
		var err error
		if keys[i].secret, err = w.s.sealer.open(r.appCode, r.secret); err != nil {
			w.s.log.Error("webhook secret does not open: check VOICEROOM_WEBHOOKS_SECRET_KEY; not delivering to it", "webhook_id", r.ID, "error", err)
			continue
		}
		if r.oldSecret != nil {
			keys[i].old, _ = w.s.sealer.open(r.appCode, r.oldSecret)
		}
	}
	var dones []func()
	w.mu.Lock()
	defer func() {
		w.mu.Unlock()
		for _, d := range dones {
			d()
		}
	}()
	seen := make(map[int64]bool, len(recs))
	for i, r := range recs {
		seen[r.ID] = true
		if keys[i].secret == nil {
			// Cannot sign: sends nothing, keeps its backlog (as paused,
			// without saying so in its row) until a process with the
			// right key delivers.
			r.Enabled = false
		}
		ep := w.eps[r.ID]
		if ep == nil {
			w.addLocked(r, keys[i].secret, keys[i].old)
			continue
		}
		if keys[i].secret != nil {
			ep.secret, ep.old = keys[i].secret, keys[i].old
		}
		if !typesWithin(ep.made.types, r.EventTypes) {
			// Narrowed: the handler skips some of what the start was
			// made sure of, so a start kept in the row is not any more.
			ep.made = startMark{}
		}
		ep.rec = r
		switch {
		case r.Enabled && !ep.enabled:
			w.resumeLocked(ep)
		case !r.Enabled && ep.enabled:
			ep.enabled = false // refresh stores its cursor and releases what it holds
			w.stopReaderLocked(ep)
		}
		w.takeStartLocked(ep)
	}
	for id, ep := range w.eps {
		if !seen[id] {
			dones = append(dones, w.removeLocked(ep)...)
		}
	}
}

// addLocked adds an endpoint met for the first time in this tenure. With
// no cursor it is live: every event it has not had is still in the
// durable, unacked. With one it reads its backlog from there, and must
// read at least up to what an earlier tenure may have acked. With a start
// (a new endpoint, or one whose event types widened) that the handler has
// passed already, it reads back from the start, if lower: refresh then
// stores the cursor and clears the start together (syncCursors); until
// then a next tenure reads back from the start again.
func (w *worker) addLocked(r record, secret, old []byte) {
	ep := &endpoint{rec: r, secret: secret, old: old, enabled: r.Enabled, lanes: map[string]*lane{}, busy: map[string]bool{}, ahead: map[uint64]bool{}}
	c := uint64(0)
	if r.cursor.Valid && r.cursor.Int64 > 0 {
		c = uint64(r.cursor.Int64)
		ep.stored = c
	}
	if r.start > 0 && r.start <= w.maxSeen && (c == 0 || r.start < c) {
		c = r.start
	}
	if c > 0 {
		ep.mode, ep.from, ep.readTo, ep.maxSkipped = modeBacklog, c, c-1, w.maxSeen
	}
	w.takeStartLocked(ep) // made sure of now: read back from it, or live before it
	w.eps[r.ID] = ep
	w.byApp[r.appCode] = append(w.byApp[r.appCode], ep)
	if ep.enabled && ep.mode == modeBacklog {
		w.startReaderLocked(ep)
	}
}

// resumeLocked enables a paused endpoint: it reads its backlog from its
// stored cursor (every event it had not had when paused), then goes live.
func (w *worker) resumeLocked(ep *endpoint) {
	ep.enabled = true
	ep.failingSince, ep.lastErr, ep.pauseReason = time.Time{}, "", ""
	if ep.mode == modeBacklog {
		ep.readTo, ep.maxSkipped = ep.from-1, w.maxSeen
		w.startReaderLocked(ep)
	}
	w.s.log.Info("webhook resumed", "webhook_id", ep.rec.ID, "backlog_from", ep.from)
	for _, l := range ep.lanes {
		w.scheduleLocked(l)
	}
}

// removeLocked forgets a deleted endpoint: what it held is released. It
// returns the consumer's done calls to make once w.mu is released.
func (w *worker) removeLocked(ep *endpoint) []func() {
	w.stopReaderLocked(ep)
	dones := w.dropLanesLocked(ep, 0, false)
	delete(w.eps, ep.rec.ID)
	list := w.byApp[ep.rec.appCode]
	for i, e := range list {
		if e == ep {
			w.byApp[ep.rec.appCode] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(w.byApp[ep.rec.appCode]) == 0 {
		delete(w.byApp, ep.rec.appCode)
	}
	w.s.metrics.forget(ep.rec.ID)
	w.s.log.Info("webhook deleted: what it held is released", "webhook_id", ep.rec.ID)
	return dones
}

// dropLanesLocked drops ep's lanes, releasing every event at or after
// from (all of them with from 0); events below it (stragglers the
// handler gave it since the cursor was chosen) stay. With keepInFlight a
// lane whose delivery is in flight stays too, with that delivery: its
// events are released to the durable all the same (from is at or before
// them) but stay in the lane as events read back, so the attempt settles
// them as usual, the reader does not queue them again (or skips them once
// delivered, see ahead), and no second delivery of the room starts
// meanwhile. Without it such a delivery's outcome is ignored.
func (w *worker) dropLanesLocked(ep *endpoint, from uint64, keepInFlight bool) []func() {
	var dones []func()
	var keep []*item
	lanes := map[string]*lane{}
	for room, l := range ep.lanes {
		if l.timer != nil {
			l.timer.Stop()
			l.timer = nil
		}
		sent := 0
		if keepInFlight && l.state == laneRunning && l.out != nil {
			sent = len(l.out.items)
			lanes[room] = l
			var durable []*item
			for _, it := range l.queue[:sent] {
				if it.ev != nil {
					durable = append(durable, it)
				}
			}
			dones = append(dones, w.releaseLocked(ep, durable, settleReleased, "")...)
			for _, it := range durable {
				it.ev = nil
				ep.backlog++
			}
		} else {
			l.dead = true
		}
		var drop []*item
		for _, it := range l.queue[sent:] {
			if it.seq >= from && !it.replay { // a replay stays: readers do not read replays
				drop = append(drop, it)
				continue
			}
			keep = append(keep, it) // counted again when queued below
			if it.ev != nil {
				ep.held--
				w.held--
			} else {
				ep.backlog--
			}
		}
		l.queue = l.queue[:sent]
		dones = append(dones, w.releaseLocked(ep, drop, settleReleased, "")...)
	}
	ep.lanes, ep.ready = lanes, nil
	ep.epoch++
	for _, it := range keep {
		w.enqueueLocked(ep, it)
	}
	return dones
}

// plan is a move of an endpoint to backlog mode from cursor, stored
// first: as paused (pause says why when the sink pauses it), or reading
// (under pressure or from its start: its deliveries in flight go on).
type plan struct {
	ep       *endpoint
	cursor   uint64
	pause    string
	pressure bool
	start    startMark // a start it reads back from (see takeStartLocked); cleared with the cursor
}

// plans lists the moves refresh makes: a paused endpoint that still
// holds events or is live, one failing for PauseAfter, one under
// pressure.
func (w *worker) plans() []plan {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []plan
	for _, ep := range w.eps {
		switch {
		case ep.startMove != 0:
			out = append(out, plan{ep: ep, cursor: min(ep.startMove, w.cursorLocked(ep)), pressure: ep.enabled,
				start: startMark{ep.startMove, ep.rec.EventTypes}})
		case !ep.enabled:
			if ep.mode == modeLive || ep.releasable() {
				out = append(out, plan{ep: ep, cursor: w.cursorLocked(ep)})
			}
		case ep.pauseReason != "":
			out = append(out, plan{ep: ep, cursor: w.cursorLocked(ep), pause: ep.pauseReason})
		case ep.wantBacklog && ep.mode == modeLive:
			out = append(out, plan{ep: ep, cursor: w.cursorLocked(ep), pressure: true})
		}
	}
	return out
}

// releasable reports whether ep's lanes hold an event a move would
// release (any but replays, which stay).
func (ep *endpoint) releasable() bool {
	for _, l := range ep.lanes {
		for _, it := range l.queue {
			if !it.replay {
				return true
			}
		}
	}
	return false
}

// cursorLocked is where ep's backlog starts if it stops holding events
// now: its oldest event held, else the first event the handler has not
// been handed (live) or the reader has not read (backlog mode).
//
// The durable's consumer hands events over in stream order per room, not
// across rooms (its workers are sharded by room): a lower sequence of one
// room may still wait in its queue after a higher one of another room was
// handed over. The cursor stays at or below it, so that it comes back
// through the reader, in its room's order, instead of as a straggler
// behind the room's later events read back (it is then acked without
// being handed over).
func (w *worker) cursorLocked(ep *endpoint) uint64 {
	c := w.maxSeen + 1
	if ep.mode == modeBacklog {
		c = ep.readTo + 1
	}
	if w.cons != nil {
		if q, ok := w.cons.OldestQueued(); ok {
			c = min(c, q)
		}
	}
	for _, l := range ep.lanes {
		for _, it := range l.queue {
			if !it.replay {
				c = min(c, it.seq)
			}
		}
	}
	return c
}

// move stores p's cursor (and pause), then applies it: ep releases every
// event from the cursor on, and reads them back from the stream when it
// is enabled. If storing fails, nothing changes.
func (w *worker) move(ctx context.Context, p plan) {
	id := p.ep.rec.ID
	var err error
	switch {
	case p.pause != "":
		_, err = storePause(ctx, w.s.db, id, p.pause, w.cfg.Now().UnixMilli(), p.cursor)
	case p.start.seq != 0:
		err = storeCursorStarted(ctx, w.s.db, id, p.cursor, p.start.seq, p.start.types)
	default:
		err = storeCursor(ctx, w.s.db, id, p.cursor)
	}
	if err != nil {
		w.s.log.Warn("webhook cursor not stored; holding its events", "webhook_id", id, "error", err)
		return
	}
	w.mu.Lock()
	ep := p.ep
	if w.eps[id] != ep || w.stopping {
		w.mu.Unlock()
		return
	}
	w.stopReaderLocked(ep)
	// What was delivered while the cursor was being stored need not be
	// read back: the reader starts at the oldest event held now, if later
	// (but not after a start, from which the endpoint's new settings apply).
	from := max(p.cursor, w.cursorLocked(ep))
	if p.start.seq != 0 {
		from = min(from, p.start.seq)
		ep.made, ep.clearStart = p.start, false
		if ep.startMove == p.start.seq {
			ep.startMove = 0
		}
	}
	before := ep.held + ep.backlog
	dones := w.dropLanesLocked(ep, from, p.pressure)
	// What it released waits in the stream now: the pending gauge counts
	// it until the reader's first read says how much waits.
	ep.streamPending = uint64(max(before-ep.held-ep.backlog, 0))
	ep.mode, ep.from, ep.stored, ep.readTo, ep.maxSkipped = modeBacklog, from, p.cursor, from-1, w.maxSeen
	for seq := range ep.ahead {
		if seq < from {
			delete(ep.ahead, seq)
		}
	}
	ep.coveredLo, ep.coveredHi, ep.wantBacklog = 0, 0, false
	switch {
	case p.pause != "":
		ep.enabled, ep.pauseReason, ep.rec.Enabled = false, "", false
		w.s.log.Warn("webhook paused", "webhook_id", id, "reason", p.pause, "backlog_from", from)
	case ep.enabled:
		w.s.log.Info("webhook reads its backlog from the stream", "webhook_id", id, "from", from)
		w.startReaderLocked(ep)
	}
	w.mu.Unlock()
	for _, d := range dones {
		d()
	}
}

// syncCursors stores the cursors that moved: the oldest event an
// endpoint reading back has not had, or NULL once a live endpoint holds
// no event read back.
func (w *worker) syncCursors(ctx context.Context) {
	type sync struct {
		ep     *endpoint
		cursor uint64
		start  startMark // a start made sure of, cleared with the cursor
	}
	var todo []sync
	w.mu.Lock()
	for _, ep := range w.eps {
		if !ep.enabled && !ep.clearStart {
			continue
		}
		c := uint64(0)
		if ep.mode == modeBacklog {
			c = ep.readTo + 1
		}
		for _, l := range ep.lanes {
			for _, it := range l.queue {
				if it.ev == nil && (c == 0 || it.seq < c) {
					c = it.seq
				}
			}
		}
		switch {
		case ep.clearStart:
			// The cursor goes with it: below the start when ep reads
			// back from there (addLocked), which nothing stored yet.
			todo = append(todo, sync{ep, c, ep.made})
		case c != ep.stored && (c == 0 || c > ep.stored):
			todo = append(todo, sync{ep: ep, cursor: c})
		}
	}
	w.mu.Unlock()
	for _, t := range todo {
		var err error
		if t.start.seq != 0 {
			err = storeCursorStarted(ctx, w.s.db, t.ep.rec.ID, t.cursor, t.start.seq, t.start.types)
		} else {
			err = storeCursor(ctx, w.s.db, t.ep.rec.ID, t.cursor)
		}
		if err != nil {
			w.s.log.Warn("webhook cursor not stored", "webhook_id", t.ep.rec.ID, "error", err)
			continue
		}
		w.mu.Lock()
		t.ep.stored = t.cursor
		if t.start.seq != 0 && t.ep.made.seq == t.start.seq {
			t.ep.clearStart = false
		}
		w.mu.Unlock()
	}
}

// gauges prunes the ahead sets and sets the pending and state gauges.
func (w *worker) gauges() {
	w.mu.Lock()
	defer w.mu.Unlock()
	counts := map[string]int{}
	for _, ep := range w.eps {
		w.pruneAheadLocked(ep)
		counts[ep.state()]++
		pending := float64(ep.held + ep.backlog)
		if ep.mode == modeBacklog {
			pending += float64(ep.streamPending)
		}
		w.s.metrics.setPending(ep.rec.ID, pending)
	}
	w.s.metrics.setStates(counts)
}
