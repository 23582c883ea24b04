package webhooks

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"voiceroom/bus"
)

// laneState is where a lane is in its cycle.
type laneState int

const (
	laneIdle    laneState = iota
	laneReady             // in its endpoint's ready queue, waiting for a slot
	laneRunning           // a delivery in flight
	laneWaiting           // a failed attempt's retry delay running
)

// lane holds one endpoint's events of one room, in stream order: one
// delivery at a time, the next only after a 2xx (or a rejection). The
// worker's mu guards it.
type lane struct {
	ep     *endpoint
	room   string
	queue  []*item
	out    *outgoing // the delivery being tried: its first items; sent again unchanged until settled
	single int       // events to send one by one (a batch of them was rejected)
	state  laneState
	timer  *time.Timer
	dead   bool // dropped (the endpoint moved to backlog mode, or was deleted)
}

// outgoing is one delivery: the same id and body on every attempt.
type outgoing struct {
	items    []*item
	id       string
	ids      string // the event ids, comma-separated
	body     []byte
	attempts int
}

// enqueueLocked puts it in the lane of its room, in stream order (never
// before the delivery being tried), and schedules the lane. An event read
// back that the lane holds already (kept in flight through a move) is
// not queued twice.
func (w *worker) enqueueLocked(ep *endpoint, it *item) {
	l := ep.lanes[it.env.RoomID]
	if l == nil {
		l = &lane{ep: ep, room: it.env.RoomID}
		ep.lanes[l.room] = l
	}
	if it.ev == nil {
		for _, q := range l.queue {
			if q.seq == it.seq {
				return
			}
		}
	}
	sent := 0
	if l.out != nil {
		sent = len(l.out.items)
	}
	pos := len(l.queue)
	for pos > sent && l.queue[pos-1].seq > it.seq {
		pos--
	}
	l.queue = append(l.queue, nil)
	copy(l.queue[pos+1:], l.queue[pos:])
	l.queue[pos] = it
	if it.ev != nil {
		ep.held++
		w.held++
	} else {
		ep.backlog++
	}
	w.scheduleLocked(l)
}

// scheduleLocked starts an idle lane with events when its endpoint has a
// free slot and nobody waits before it, else queues it.
func (w *worker) scheduleLocked(l *lane) {
	ep := l.ep
	if l.dead || l.state != laneIdle || len(l.queue) == 0 || w.stopping || !ep.enabled || ep.busy[l.room] {
		return
	}
	if ep.active < w.cfg.Concurrency && len(ep.ready) == 0 {
		w.startLocked(l)
		return
	}
	l.state = laneReady
	ep.ready = append(ep.ready, l)
}

// startLocked runs l's next delivery.
func (w *worker) startLocked(l *lane) {
	l.ep.active++
	l.ep.busy[l.room] = true
	l.state = laneRunning
	w.tasks.Add(1)
	go w.deliver(l)
}

// startReadyLocked starts queued lanes while ep has free slots.
func (w *worker) startReadyLocked(ep *endpoint) {
	for ep.active < w.cfg.Concurrency && len(ep.ready) > 0 && ep.enabled && !w.stopping {
		l := ep.ready[0]
		ep.ready = ep.ready[1:]
		if l.dead || l.state != laneReady {
			continue
		}
		if ep.busy[l.room] {
			l.state = laneIdle // scheduled again when the room's delivery returns
			continue
		}
		w.startLocked(l)
	}
}

// deliver makes one attempt of l's delivery and settles what it came to.
func (w *worker) deliver(l *lane) {
	defer w.tasks.Done()
	w.mu.Lock()
	ep := l.ep
	if l.out == nil && (l.dead || len(l.queue) == 0) {
		// Dropped before it started.
		ep.active--
		delete(ep.busy, l.room)
		if cur := ep.lanes[l.room]; cur != nil && cur != l {
			w.scheduleLocked(cur)
		}
		w.startReadyLocked(ep)
		w.mu.Unlock()
		return
	}
	if l.out == nil {
		l.out = w.build(l)
	}
	out := l.out
	out.attempts++
	id, url, now := ep.rec.ID, ep.rec.URL, w.cfg.Now()
	keys := ep.signingKeys(now.UnixMilli())
	w.mu.Unlock()

	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "voiceroom-webhooks/1")
	h.Set(HeaderEventIDs, out.ids)
	sign(h, keys, out.id, now, out.body)
	// A tenure that ends lets the attempt finish within its timeout.
	ctx := context.WithoutCancel(w.ctx)
	res := attempt(ctx, w.s.client, url, h, out.body, w.cfg.Timeout, w.cfg.ResponseBytes, w.cfg.Now)
	w.s.metrics.attempt(res)
	if res.outcome == OutcomeRejected && len(out.items) == 1 && out.items[0].ev == nil {
		// Read back from the stream: the consumer acked it long ago, so
		// its dead letter is stored here.
		if err := w.deadLetter(ctx, id, out.items[0], out.attempts, res.err); err != nil {
			res.outcome, res.err = OutcomeFailed, "dead letter not stored: "+err.Error()
		}
	}
	if w.historyDue(ep, res, now) {
		w.record(id, l.room, out, res, now)
	}

	w.mu.Lock()
	ep.active--
	delete(ep.busy, l.room)
	var dones []func()
	switch {
	case w.stopping:
		kind := settleShutdown
		if res.outcome == OutcomeDelivered {
			kind = settleDelivered
		}
		n := min(len(out.items), len(l.queue))
		dones = w.releaseLocked(ep, l.queue[:n], kind, "")
		l.queue, l.out, l.dead = l.queue[n:], nil, true
	case l.dead:
		// Dropped while in flight: its events were settled then. The
		// room's new lane may start now.
		if cur := ep.lanes[l.room]; cur != nil {
			w.scheduleLocked(cur)
		}
	default:
		dones = w.settleAttemptLocked(l, out, res, now)
	}
	w.startReadyLocked(ep)
	w.mu.Unlock()
	for _, d := range dones {
		d()
	}
}

// settleAttemptLocked applies an attempt's result to its lane.
func (w *worker) settleAttemptLocked(l *lane, out *outgoing, res result, now time.Time) []func() {
	ep := l.ep
	var dones []func()
	switch res.outcome {
	case OutcomeDelivered:
		ep.failingSince, ep.lastErr = time.Time{}, ""
		for _, it := range out.items {
			// A reader starting at or before it (now, or after a later
			// move) skips it rather than sending it again.
			if (ep.mode == modeLive || it.seq > ep.readTo) && len(ep.ahead) < aheadCap(w.cfg) {
				ep.ahead[it.seq] = true
			}
		}
		dones = w.takeLocked(l, len(out.items), settleDelivered, "")
		l.single = max(l.single-len(out.items), 0)
	case OutcomeRejected:
		if len(out.items) > 1 {
			// Find the one refused: its neighbours are not dead-lettered.
			l.out, l.single = nil, len(out.items)
			w.s.log.Warn("webhook rejected a batch, sending its events one by one",
				"webhook_id", ep.rec.ID, "room_id", l.room, "events", len(out.items), "error", res.err)
			break
		}
		reason := fmt.Sprintf("webhook %d: %s", ep.rec.ID, res.err)
		w.s.log.Warn("webhook rejected an event: dead-lettered", "webhook_id", ep.rec.ID, "room_id", l.room,
			"event_id", out.items[0].env.EventID, "error", res.err)
		dones = w.takeLocked(l, 1, settleRejected, reason)
		l.single = max(l.single-1, 0)
	default: // failed: the same delivery again after the delay, the room's later events waiting
		if ep.failingSince.IsZero() {
			ep.failingSince = now
			w.s.log.Warn("webhook failing: retrying", "webhook_id", ep.rec.ID, "room_id", l.room, "error", res.err)
		}
		ep.lastErr = res.err
		delay := w.cfg.retryDelay(out.attempts)
		if res.retryAfter > 0 {
			delay = max(delay, min(res.retryAfter, w.cfg.MaxRetryAfter))
		}
		if now.Sub(ep.failingSince) >= w.cfg.PauseAfter && ep.pauseReason == "" {
			ep.pauseReason = fmt.Sprintf("paused automatically: failing since %s: %s",
				ep.failingSince.UTC().Format(time.RFC3339), res.err)
			w.kick()
		}
		l.state = laneWaiting
		l.timer = time.AfterFunc(delay, func() { w.retry(l) })
		return dones
	}
	l.state = laneIdle
	if len(l.queue) == 0 && ep.lanes[l.room] == l {
		delete(ep.lanes, l.room)
		return dones
	}
	w.scheduleLocked(l)
	return dones
}

// takeLocked removes the first n events of l, ending its delivery, and
// settles them.
func (w *worker) takeLocked(l *lane, n int, kind settleKind, reason string) []func() {
	items := l.queue[:n]
	l.queue, l.out = l.queue[n:], nil
	return w.releaseLocked(l.ep, items, kind, reason)
}

// retry makes a waiting lane ready again once its delay has passed.
func (w *worker) retry(l *lane) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.dead || w.stopping || l.state != laneWaiting {
		return
	}
	l.timer = nil
	l.state = laneIdle
	w.scheduleLocked(l)
}

// build cuts l's next delivery from its head: up to MaxBatchEvents
// consecutive events (1 while single) within MaxBatchBytes; a larger
// single event goes alone.
func (w *worker) build(l *lane) *outgoing {
	limit := w.cfg.MaxBatchEvents
	if l.single > 0 {
		limit = 1
	}
	const frame = len(`{"events":[]}`)
	size, n := frame, 0
	for n < len(l.queue) && n < limit {
		d := len(l.queue[n].data) + 1
		if n > 0 && size+d > w.cfg.MaxBatchBytes {
			break
		}
		size += d
		n++
	}
	out := &outgoing{items: append([]*item(nil), l.queue[:n]...)}
	var body bytes.Buffer
	body.Grow(size)
	body.WriteString(`{"events":[`)
	ids := make([]string, n)
	for i, it := range out.items {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(it.data)
		ids[i] = it.env.EventID
	}
	body.WriteString(`]}`)
	out.body, out.ids = body.Bytes(), strings.Join(ids, ",")
	out.id = ids[0]
	if n > 1 {
		out.id = ids[0] + ".." + ids[n-1]
	}
	return out
}

// deadLetter stores the letter of an event read back from the stream
// that the endpoint refused.
func (w *worker) deadLetter(ctx context.Context, id int64, it *item, attempts int, why string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reason := fmt.Sprintf("webhook %d: %s", id, why)
	return bus.StoreDeadLetter(ctx, w.s.js, w.cfg.Consumer.Durable, it.subject, it.seq, uint64(attempts), reason, it.data, it.header)
}

// historyDue reports whether an attempt of ep goes to the history: any
// that did not deliver, and a delivered one once HistoryInterval has
// passed since the last recorded (see Config.HistoryInterval).
func (w *worker) historyDue(ep *endpoint, res result, at time.Time) bool {
	if res.outcome != OutcomeDelivered || w.cfg.HistoryInterval < 0 {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !ep.recordedAt.IsZero() && at.Sub(ep.recordedAt) < w.cfg.HistoryInterval {
		return false
	}
	ep.recordedAt = at
	return true
}

// record adds an attempt to the endpoint's history (best effort).
func (w *worker) record(id int64, room string, out *outgoing, res result, at time.Time) {
	if w.s.history == nil {
		return
	}
	ids := make([]string, len(out.items))
	for i, it := range out.items {
		ids[i] = it.env.EventID
	}
	err := w.s.history.record(id, Delivery{ID: out.id, AtMs: at.UnixMilli(), RoomID: room, EventIDs: ids,
		Attempt: out.attempts, Outcome: res.outcome, Status: res.status, LatencyMs: res.latency.Milliseconds(), Error: res.err})
	if err != nil {
		w.s.log.Debug("delivery history not recorded", "webhook_id", id, "error", err)
	}
}
