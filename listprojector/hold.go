package listprojector

import (
	"container/list"
	"context"
	"time"

	"voiceroom/roomevent"
)

// Holding counts. The region room list's consistency model lets online
// counts lag briefly and heat and order lag by seconds, and nearly every
// command of a busy room changes one of them: written at once, the list
// would be rewritten for every join, leave, seat change and gift. So a
// card whose listing differs from the stored card only in its counts
// (countsOnly) is held, and written at most Config.CountsDelay after the
// room's first held change, at the room's newest card by then; any other
// change is written at once and takes the held card with it.
//
// Every event carries the room's whole card, so only the newest held
// event's message stays unacked until its card is written (the consumer
// keeps it in progress): a crash loses nothing, as that message comes
// again with the newest card. The older ones are acked as soon as a newer
// card covers them (counted coalesced): the stream's consumer then keeps
// one unacked message per held room, not one per event, which the server
// pays for on every delivery and ack.

// waiter is one delivery waiting for its room's card to be written (or
// found not to need writing); one with a nil settle was settled already
// (covered by a newer held card) and is only reported with the write.
type waiter struct {
	settle     func(error)
	version    int64 // of the event's card
	eventID    string
	occurredMs int64
}

// heldRoom is one room's held card and the delivery that carried it.
type heldRoom struct {
	key       roomKey
	card      *Card
	oldRegion int64
	due       time.Time
	newest    waiter        // the held card's delivery, settled when it is written
	covered   []waiter      // acked already, reported when the card is written
	elem      *list.Element // in Projector.queue
}

// countsOnly reports whether listing next differs from stored only in the
// counts a list may show late: heat, online_count and
// occupied_seat_count.
func countsOnly(stored, next roomevent.Listing) bool {
	stored.Heat, stored.OnlineCount, stored.OccupiedSeatCount = next.Heat, next.OnlineCount, next.OccupiedSeatCount
	return stored == next
}

// write is what one MySQL write carries: the cards, with the deliveries
// they settle, and the deliveries settled without a card (stale,
// unchanged) that the batch reports with them.
type write struct {
	as      []applied
	waiters [][]waiter // waiters[i]: the deliveries as[i]'s card settles
	done    []waiter   // already settled: only reported (lag, onApplied)
}

// add puts card c (of a room stored with visible region oldRegion, -1 for
// none) in w, settling ws.
func (w *write) add(c *Card, oldRegion int64, ws []waiter) {
	w.as = append(w.as, applied{card: c, oldRegion: oldRegion})
	w.waiters = append(w.waiters, ws)
}

// holds reports whether the projector holds count changes now. Called
// with mu held.
func (p *Projector) holds() bool { return p.cfg.CountsDelay > 0 && !p.stopping }

// hold holds c, of room k stored in region oldRegion, carried by ws; h is
// the room's held card, or nil. It returns the deliveries the held card
// now covers, to be acked: all but the newest card's. Called with mu
// held.
func (p *Projector) hold(h *heldRoom, k roomKey, c *Card, oldRegion int64, ws []waiter) (covered []waiter) {
	if h == nil {
		h = &heldRoom{key: k, card: c, oldRegion: oldRegion, due: p.cfg.Now().Add(p.cfg.CountsDelay), newest: ws[0]}
		h.elem = p.queue.PushBack(h)
		p.held[k] = h
		p.metrics.setHeld(len(p.held))
		ws = ws[1:]
	}
	if c.RoomVersion > h.card.RoomVersion {
		h.card = c
	}
	for _, w := range ws {
		if w.version >= h.newest.version {
			h.newest, w = w, h.newest
		}
		covered = append(covered, w)
		w.settle = nil
		h.covered = append(h.covered, w)
	}
	return covered
}

// unhold removes h from the held rooms and returns its deliveries: the
// newest first, then those acked already. Called with mu held.
func (p *Projector) unhold(h *heldRoom) []waiter {
	delete(p.held, h.key)
	p.queue.Remove(h.elem)
	p.metrics.setHeld(len(p.held))
	return append([]waiter{h.newest}, h.covered...)
}

// done settles w with err unless it was settled already.
func (w waiter) done(err error) {
	if w.settle != nil {
		w.settle(err)
	}
}

// takeDue moves into w the held rooms due by now (all of them when all
// is set), then the oldest while more than MaxHeld rooms are held.
// Called with mu held.
func (p *Projector) takeDue(w *write, now time.Time, all bool) {
	for e := p.queue.Front(); e != nil; e = p.queue.Front() {
		h := e.Value.(*heldRoom)
		if !all && h.due.After(now) && len(p.held) <= p.cfg.MaxHeld {
			return
		}
		w.add(h.card, h.oldRegion, p.unhold(h))
	}
}

// flushHeld writes the held rooms as they fall due, ticking at a tenth
// of the delay, until ctx ends; then it writes every held room and stops
// holding, so that the consumer's shutdown, which waits for every held
// delivery, finds them settled.
func (p *Projector) flushHeld(ctx context.Context) {
	tick := time.NewTicker(max(p.cfg.CountsDelay/10, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			p.writeHeld(true)
			return
		case <-tick.C:
			p.writeHeld(false)
		}
	}
}

// writeHeld writes the held rooms that are due (all, and holds no more,
// when stop is set). It excludes every batch's read-decide-write (wmu),
// so a room's held card never reaches MySQL or Redis after a newer card
// a batch wrote.
func (p *Projector) writeHeld(stop bool) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	var w write
	p.mu.Lock()
	if stop {
		p.stopping = true
	}
	p.takeDue(&w, p.cfg.Now(), stop)
	p.mu.Unlock()
	if len(w.as) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.WriteTimeout)
	defer cancel()
	p.write(ctx, &w)
}
