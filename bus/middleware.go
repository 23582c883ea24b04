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
}

func newTurn(jobs []*job, ds []Delivery, finish func(*job, error)) *turn {
	return &turn{ds: ds, jobs: jobs, finish: finish, settled: make([]bool, len(jobs)), left: len(jobs)}
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
// redelivered to another instance. It stops once the turn is over or ctx
// ends.
func inProgress(every func(*turn) time.Duration, log *slog.Logger) middleware {
	return func(next handlerFunc) handlerFunc {
		return func(ctx context.Context, t *turn) {
			if period := every(t); period > 0 {
				t.whenDone(heartbeat(ctx, t, period, log))
			}
			next(ctx, t)
		}
	}
}

// heartbeat sends "in progress" for t's unsettled messages every period
// until stop is called or ctx ends. A timer, not a goroutine: an async
// handler may hold thousands of turns.
func heartbeat(ctx context.Context, t *turn, period time.Duration, log *slog.Logger) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		timer   *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	timer = time.AfterFunc(period, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped || ctx.Err() != nil {
			return
		}
		for _, j := range t.unsettled() {
			if err := j.msg.InProgress(); err != nil { // a lost one only risks a redelivery
				log.Debug("in progress", "subject", j.msg.Subject(), "error", err)
			}
		}
		timer.Reset(period)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
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
