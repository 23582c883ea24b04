package bus

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// The consume loop runs one handlerFunc; what every delivery needs around
// its handler is a wrapper, in the manner of Watermill's router
// middlewares: on the call side recoverer and inProgress wrap the
// handlerFunc, on the result side poisonQueue and retry wrap the
// settleFunc that acks.

// handlerFunc handles one turn: it reports each delivery's result through
// t.settle, before it returns (Handler, BatchHandler) or later
// (AsyncHandler).
type handlerFunc func(ctx context.Context, t *turn)

// middleware wraps a handlerFunc.
type middleware func(handlerFunc) handlerFunc

// settleFunc settles one delivery's message by its handler's result.
type settleFunc func(j *job, err error)

// A turn is one call of the handler: one delivery (Handler,
// AsyncHandler) or one batch (BatchHandler). Each delivery is settled
// once; later results for it are ignored. The turn is over when every
// delivery is settled.
type turn struct {
	ds     []Delivery
	jobs   []*job                  // jobs[i] is the message of ds[i]
	finish func(j *job, err error) // settles one message

	mu      sync.Mutex
	settled []bool
	left    int
	onDone  []func()
	hooks   [2]func() // onDone's first: the consumer's and the heartbeat's
}

func newTurn(jobs []*job, ds []Delivery, finish func(*job, error)) *turn {
	t := &turn{ds: ds, jobs: jobs, finish: finish, settled: make([]bool, len(jobs)), left: len(jobs)}
	t.onDone = t.hooks[:0]
	return t
}

// settle settles delivery i with err, unless it already was.
func (t *turn) settle(i int, err error) {
	t.mu.Lock()
	if t.settled[i] {
		t.mu.Unlock()
		return
	}
	t.settled[i] = true
	t.left--
	var hooks []func()
	if t.left == 0 {
		hooks, t.onDone = t.onDone, nil
	}
	t.mu.Unlock()
	t.finish(t.jobs[i], err)
	for _, f := range hooks {
		f()
	}
}

// settleRest settles every delivery not yet settled with err.
func (t *turn) settleRest(err error) {
	for i := range t.ds {
		t.settle(i, err)
	}
}

// whenDone calls f once every delivery is settled (at once if they are).
func (t *turn) whenDone(f func()) {
	t.mu.Lock()
	if t.left > 0 {
		t.onDone = append(t.onDone, f)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	f()
}

// unsettled returns the jobs of the deliveries not yet settled.
func (t *turn) unsettled() []*job {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*job, 0, t.left)
	for i, j := range t.jobs {
		if !t.settled[i] {
			out = append(out, j)
		}
	}
	return out
}

// recoverer turns a handler's panic into a retryable error for every
// delivery of the turn not yet settled (Watermill's Recoverer).
func recoverer(log *slog.Logger) middleware {
	return func(next handlerFunc) handlerFunc {
		return func(ctx context.Context, t *turn) {
			defer func() {
				r := recover()
				if r == nil {
					return
				}
				d := t.ds[0]
				log.Error("handler panicked", "deliveries", len(t.ds), "subject", d.Subject, "stream_seq", d.StreamSeq,
					"event_id", d.Envelope.EventID, "panic", r, "stack", string(debug.Stack()))
				t.settleRest(fmt.Errorf("handler panic: %v", r))
			}()
			next(ctx, t)
		}
	}
}

// inProgress tells the server, every period given by every (0: never),
// that the turn's unsettled messages are still being worked on, so that a
// slow handler (or an async one holding its deliveries) does not see them
// redelivered to another instance. b sends the signals; a turn leaves it
// once it is over.
func inProgress(every func(*turn) time.Duration, b *beats) middleware {
	return func(next handlerFunc) handlerFunc {
		return func(ctx context.Context, t *turn) {
			if period := every(t); period > 0 {
				b.add(t, period)
				t.whenDone(func() { b.remove(t) })
			}
			next(ctx, t)
		}
	}
}

// beats sends "in progress" for the unsettled messages of the open turns
// it holds, each turn every its period, from one goroutine (run) per
// consumer: a turn costs a map entry, not a timer of its own, and an
// async handler may hold thousands of turns.
type beats struct {
	log *slog.Logger

	mu    sync.Mutex
	turns map[*turn]beat
}

// beat is when an open turn is due to be reported next, and how often.
type beat struct {
	period time.Duration
	due    time.Time
}

func newBeats(log *slog.Logger) *beats {
	return &beats{log: log, turns: map[*turn]beat{}}
}

// add holds t, first due a period from now.
func (b *beats) add(t *turn, period time.Duration) {
	b.mu.Lock()
	b.turns[t] = beat{period: period, due: time.Now().Add(period)}
	b.mu.Unlock()
}

// remove lets t go: it is reported no more.
func (b *beats) remove(t *turn) {
	b.mu.Lock()
	delete(b.turns, t)
	b.mu.Unlock()
}

// run reports the turns that are due every tick, until ctx ends. A turn is
// reported between its period and its period plus a tick after the last
// time: the caller's tick is a fraction of the shortest period.
func (b *beats) run(ctx context.Context, tick time.Duration) {
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	var due []*turn
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			due = due[:0]
			b.mu.Lock()
			for t, bt := range b.turns {
				if !now.Before(bt.due) {
					b.turns[t] = beat{period: bt.period, due: now.Add(bt.period)}
					due = append(due, t)
				}
			}
			b.mu.Unlock()
			for _, t := range due {
				for _, j := range t.unsettled() {
					if err := j.msg.InProgress(); err != nil { // a lost one only risks a redelivery
						b.log.Debug("in progress", "subject", j.msg.Subject(), "error", err)
					}
				}
			}
			clear(due)
		}
	}
}

// failure is how a failed delivery is settled: see Consumer.sortFailure.
type failure struct {
	permanent bool          // dead-letter, then term
	reason    string        // the dead letter's reason
	retryIn   time.Duration // if not permanent: nak with this delay
}

// poisonQueue dead-letters a delivery whose failure sort calls permanent
// and passes every other result on (Watermill's PoisonQueueWithFilter).
func poisonQueue(sort func(*job, error) failure, deadLetter func(j *job, reason string)) func(settleFunc) settleFunc {
	return func(next settleFunc) settleFunc {
		return func(j *job, err error) {
			if err != nil {
				if f := sort(j, err); f.permanent {
					deadLetter(j, f.reason)
					return
				}
			}
			next(j, err)
		}
	}
}

// retry asks for a redelivery of a failed delivery, after the delay sort
// gives it, and passes successes on. Unlike Watermill's Retry it does not
// call the handler again itself: the server redelivers, to whichever
// instance pulls next, and the delivery count goes up.
func retry(sort func(*job, error) failure, nak func(j *job, delay time.Duration, cause error)) func(settleFunc) settleFunc {
	return func(next settleFunc) settleFunc {
		return func(j *job, err error) {
			if err != nil {
				nak(j, sort(j, err).retryIn, err)
				return
			}
			next(j, nil)
		}
	}
}
