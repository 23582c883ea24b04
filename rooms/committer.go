package rooms

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/mysqldb"
)

// committer is the persistence step, fed by the cells: it writes the
// mutations of commands of different rooms in shared transactions (group
// commit) and answers each command only after its transaction commits. Under
// load, one commit (one fsync) carries many commands; with a single command
// in flight, a group is just that command, with no waiting for company.
//
// A group that fails as a whole for a reason other than a deadlock is split:
// each of its mutations is written alone, so one bad mutation (a second room
// of one owner, a fenced version) fails only its own command.
//
// Deadlines: each command's context bounds its wait, in the queue and for
// its group. A group's transaction runs until the latest deadline of its
// members, and never longer than maxWait, so a stuck group holds one worker
// for at most that long while the other workers go on. A command whose
// deadline passes while its group is still writing answers errInDoubt at
// once; one whose deadline passes while it is still queued is never written.
type committer struct {
	db       *sql.DB
	fast     FastPath // nil: the relay publishes every event
	log      *slog.Logger
	metrics  *metrics
	now      func() time.Time
	in       chan *pendingWrite
	maxBatch int
	workers  int
	maxWait  time.Duration // bounds a group whose members have no deadline

	mu     sync.RWMutex // held for reading while queueing; closed under the write lock
	closed bool
	quit   chan struct{}
	wg     sync.WaitGroup
}

// A pendingWrite's state moves from queued to taken (a worker writes it) or
// to abandoned (its command's deadline passed first; no worker writes it),
// whichever comes first.
const (
	writeQueued int32 = iota
	writeTaken
	writeAbandoned
)

// pendingWrite is a mutation waiting for its commit.
type pendingWrite struct {
	ctx   context.Context // the command's: its deadline bounds the group's
	m     *mutation
	state atomic.Int32
	done  chan error // buffered: the committer never blocks on it
}

func newCommitter(db *sql.DB, fast FastPath, log *slog.Logger, m *metrics, now func() time.Time, workers, maxBatch int, maxWait time.Duration) *committer {
	c := &committer{db: db, fast: fast, log: log, metrics: m, now: now, in: make(chan *pendingWrite, workers*maxBatch),
		maxBatch: maxBatch, workers: workers, maxWait: maxWait, quit: make(chan struct{})}
	for range workers {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.work()
		}()
	}
	return c
}

// stop refuses new writes, lets the workers write what is queued, and waits
// for them. It returns within maxWait per queued group.
func (c *committer) stop() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	close(c.quit)
	c.wg.Wait()
}

func (c *committer) work() {
	batch := make([]*pendingWrite, 0, c.maxBatch)
	for {
		var first *pendingWrite
		select {
		case first = <-c.in:
		case <-c.quit:
			// Everything queued was queued before closed was set; write it.
			for {
				select {
				case p := <-c.in:
					if p.take() {
						c.commitGroup([]*pendingWrite{p})
					}
				default:
					return
				}
			}
		}
		batch = batch[:0]
		if first.take() {
			batch = append(batch, first)
		}
	gather:
		for len(batch) < c.maxBatch {
			select {
			case p := <-c.in:
				if p.take() {
					batch = append(batch, p)
				}
			default:
				break gather
			}
		}
		if len(batch) > 0 {
			c.commitGroup(batch)
		}
	}
}

// take claims p for a worker. It fails when p's command gave up first.
func (p *pendingWrite) take() bool { return p.state.CompareAndSwap(writeQueued, writeTaken) }

// commit queues m and waits for its transaction. It fails with UNAVAILABLE
// when ctx ends first: errInDoubt if a worker had already taken m (the
// write may still commit; the cell must reload, and the command's
// command_id then finds the answer), a plain UNAVAILABLE if m was never
// written.
func (c *committer) commit(ctx context.Context, m *mutation) error {
	p := &pendingWrite{ctx: ctx, m: m, done: make(chan error, 1)}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return errShuttingDown
	}
	select {
	case c.in <- p:
		c.mu.RUnlock()
	case <-ctx.Done():
		c.mu.RUnlock()
		return apperr.Wrap(apperr.Unavailable, "room storage busy, try again", ctx.Err())
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
	}
	if p.state.CompareAndSwap(writeQueued, writeAbandoned) {
		return apperr.Wrap(apperr.Unavailable, "room storage busy, try again", ctx.Err())
	}
	select {
	case err := <-p.done: // answered just now
		return err
	default:
		return errInDoubt
	}
}

// commitGroup writes one group under a deadline that lets its slowest member
// still be answered, and answers its commands.
func (c *committer) commitGroup(batch []*pendingWrite) {
	// Contexts keep real time: the deadline comes from the wall clock, not
	// from the service's clock (a test's clock may stand still in the past,
	// which put every group's deadline behind it).
	deadline := time.Now().Add(c.maxWait)
	latest := time.Time{}
	for _, p := range batch {
		if d, ok := p.ctx.Deadline(); ok && d.After(latest) {
			latest = d
		}
	}
	if !latest.IsZero() && latest.Before(deadline) {
		deadline = latest
	}
	// The group serves several commands: it must not end when the first
	// member's context does, only when the last one could still use it.
	ctx, cancel := context.WithDeadline(context.WithoutCancel(batch[0].ctx), deadline)
	defer cancel()
	c.write(ctx, batch)
}

// write commits one group and answers its commands.
func (c *committer) write(ctx context.Context, batch []*pendingWrite) {
	start := c.now()
	ms := make([]*mutation, len(batch))
	for i, p := range batch {
		ms[i] = p.m
	}
	inFlight := c.fast != nil && c.fast.Taking()
	short, group, err := writeGroup(ctx, c.db, ms, c.now().UnixMilli(), inFlight)
	c.metrics.commitBatch.Observe(float64(len(batch)))
	c.metrics.commitSeconds.Observe(c.now().Sub(start).Seconds())
	if err == nil {
		c.handOver(ms, short, group)
		for i, p := range batch {
			if short[i] {
				p.done <- errInsufficientBalance
			} else {
				p.done <- nil
			}
		}
		return
	}
	if errors.Is(err, mysqldb.ErrOutcomeUnknown) {
		c.metrics.inDoubt.Inc()
		c.log.Warn("room commands' commit outcome unknown; their rooms reload", "commands", len(batch), "error", err)
		for _, p := range batch {
			p.done <- errInDoubt
		}
		return
	}
	if len(batch) == 1 || mysqldb.ErrorNumber(err) == 0 || ctx.Err() != nil {
		// Alone, the server could not be reached, or no time is left:
		// splitting would not help.
		for _, p := range batch {
			cerr := classifyWriteError(p.m, err)
			if !errors.Is(cerr, errOwnerHasRoom) {
				c.log.Warn("room command write failed", "room_id", p.m.roomID, "room_version", p.m.version,
					"command_id", p.m.commandID, "error", err)
			}
			p.done <- cerr
		}
		return
	}
	// The server refused something in the group: find out whose it was.
	c.log.Info("group write refused; writing its commands one by one", "commands", len(batch), "error", err)
	for _, p := range batch {
		c.write(ctx, []*pendingWrite{p})
	}
}

// handOver gives the fast path the messages of a committed group, before
// its commands are answered: a room's next command, and so its next
// group, comes only after that answer, so each room's events reach the
// fast path in room_version order.
func (c *committer) handOver(ms []*mutation, short []bool, group voiceroom.OutboxGroup) {
	if c.fast == nil {
		return
	}
	var msgs []bus.Message
	for i, m := range ms {
		if !short[i] {
			msgs = append(msgs, m.msgs...)
		}
	}
	if len(msgs) > 0 {
		c.fast.Committed(msgs, group, c.now())
	}
}
