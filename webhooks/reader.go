package webhooks

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
)

// readerWait is how long one read waits for events once the reader has
// caught up.
const readerWait = 250 * time.Millisecond

// startReaderLocked starts ep's reader from ep.from, unless one runs.
func (w *worker) startReaderLocked(ep *endpoint) {
	if ep.readerStop != nil || w.stopping {
		return
	}
	ctx, cancel := context.WithCancel(w.ctx)
	ep.readerStop = cancel
	ep.readerWake = make(chan struct{}, 1)
	w.tasks.Add(1)
	go w.read(ctx, ep, ep.rec.ID, ep.rec.appCode, ep.epoch, ep.from, ep.readerWake)
}

// stopReaderLocked stops ep's reader; the events it read stay in the
// lanes.
func (w *worker) stopReaderLocked(ep *endpoint) {
	if ep.readerStop != nil {
		ep.readerStop()
		ep.readerStop = nil
	}
}

// read reads ep's events back from ROOM_EVENTS from the sequence from on
// (the app's events and the webhooks sink's replays of the app) and puts
// those it wants in its lanes, never more than MaxHeld undelivered. Once
// it has read every event the handler left to it (readTo ≥ maxSkipped)
// and the endpoint keeps up, ep goes live and read returns. It returns as
// well when ctx ends or ep's lanes are dropped (epoch).
func (w *worker) read(ctx context.Context, ep *endpoint, id int64, app string, epoch, from uint64, wake <-chan struct{}) {
	defer w.tasks.Done()
	cons, err := w.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		// The app's room events only: replays come through the durable's
		// handler in every mode (see takes).
		FilterSubjects: []string{bus.SubjectPrefix + "." + app + ".>"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from,
	})
	if err != nil {
		w.readerFailed(ctx, ep, id, epoch, err)
		return
	}
	w.s.log.Info("webhook backlog: reading", "webhook_id", id, "from", from)
	caughtUp := false
	for ctx.Err() == nil {
		room, ok := w.readerRoom(ep, epoch)
		if !ok {
			return
		}
		if room <= 0 {
			select {
			case <-ctx.Done():
				return
			case <-wake:
			}
			continue
		}
		// Read the stream's end before asking: a read that comes back
		// empty then proves every event of the app up to it was read.
		var last uint64
		if caughtUp {
			if info, err := w.stream.Info(ctx); err == nil {
				last = info.State.LastSeq
			}
		}
		wait := time.Second
		if caughtUp {
			wait = readerWait
		}
		batch, err := cons.Fetch(room, jetstream.FetchMaxWait(wait))
		if err != nil {
			if ctx.Err() == nil {
				w.s.log.Warn("webhook backlog: read failed", "webhook_id", id, "error", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if !w.readOne(ep, epoch, m) {
				return
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) && ctx.Err() == nil {
			w.s.log.Warn("webhook backlog: read failed", "webhook_id", id, "error", err)
			sleep(ctx, time.Second)
			continue
		}
		caughtUp = n < room
		if w.caughtUp(ep, epoch, n, last) {
			return
		}
	}
}

// readerRoom is how many more events ep's reader may put in its lanes;
// ok is false once the reader is no longer ep's.
func (w *worker) readerRoom(ep *endpoint, epoch uint64) (room int, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ep.epoch != epoch || w.stopping || ep.readerStop == nil {
		return 0, false
	}
	return min(w.cfg.MaxHeld-ep.backlog, 1000), true
}

// readOne puts one event read back in ep's lanes, if ep wants it. It
// returns false once the reader is no longer ep's.
func (w *worker) readOne(ep *endpoint, epoch uint64, m jetstream.Msg) bool {
	meta, err := m.Metadata()
	if err != nil {
		return true
	}
	// An envelope that does not decode is the durable's to dead-letter.
	env, derr := bus.DecodeEnvelope(m.Data())
	w.mu.Lock()
	defer w.mu.Unlock()
	if ep.epoch != epoch || w.stopping || ep.readerStop == nil {
		return false
	}
	seq := meta.Sequence.Stream
	ep.readTo = max(ep.readTo, seq)
	ep.streamPending = meta.NumPending
	if ep.ahead[seq] {
		delete(ep.ahead, seq) // delivered already, while in flight when ep moved
		return true
	}
	if derr != nil || !ep.rec.wants(env.EventType) {
		return true
	}
	subject, err := bus.Subject(env.AppCode, env.RoomID, env.EventType)
	if err != nil {
		return true
	}
	w.enqueueLocked(ep, &item{seq: seq, env: env, data: m.Data(), subject: subject, header: m.Headers()})
	return true
}

// caughtUp records a read of n events (none: everything up to last was
// read) and moves ep live once its reader has read every event the
// handler left to it and it holds at most a quarter of MaxHeld read back
// (it keeps up). It returns true when the reader is done.
func (w *worker) caughtUp(ep *endpoint, epoch uint64, n int, last uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ep.epoch != epoch || w.stopping || ep.readerStop == nil {
		return true
	}
	if n == 0 && last > 0 {
		ep.readTo = max(ep.readTo, last)
		ep.streamPending = 0
	}
	if ep.readTo < ep.maxSkipped || ep.backlog > w.cfg.MaxHeld/4 || !ep.enabled {
		return false
	}
	ep.mode, ep.coveredLo, ep.coveredHi = modeLive, ep.from, ep.readTo
	ep.readerStop()
	ep.readerStop = nil
	w.s.log.Info("webhook backlog read: live again", "webhook_id", ep.rec.ID, "read_to", ep.readTo)
	return true
}

// readerFailed retries a reader that could not start after a second.
func (w *worker) readerFailed(ctx context.Context, ep *endpoint, id int64, epoch uint64, err error) {
	if ctx.Err() != nil {
		return
	}
	w.s.log.Warn("webhook backlog: reader not started; retrying", "webhook_id", id, "error", err)
	sleep(ctx, time.Second)
	w.mu.Lock()
	defer w.mu.Unlock()
	if ep.epoch == epoch && ep.readerStop != nil && ctx.Err() == nil {
		ep.readerStop()
		ep.readerStop = nil
		w.startReaderLocked(ep)
	}
}
