package rooms

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"time"

	"voiceroom/apperr"
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
type committer struct {
	db       *sql.DB
	log      *slog.Logger
	metrics  *metrics
	now      func() time.Time
	in       chan *pendingWrite
	maxBatch int
	workers  int

	mu     sync.RWMutex // held for reading while queueing; closed under the write lock
	closed bool
	quit   chan struct{}
	wg     sync.WaitGroup
}

// pendingWrite is a mutation waiting for its commit.
type pendingWrite struct {
	m    *mutation
	done chan error // buffered: the committer never blocks on it
}

func newCommitter(db *sql.DB, log *slog.Logger, m *metrics, now func() time.Time, workers, maxBatch int) *committer {
	c := &committer{db: db, log: log, metrics: m, now: now, in: make(chan *pendingWrite, workers*maxBatch),
		maxBatch: maxBatch, workers: workers, quit: make(chan struct{})}
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
// for them.
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
					c.write(context.Background(), []*pendingWrite{p})
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
	gather:
		for len(batch) < c.maxBatch {
			select {
			case p := <-c.in:
				batch = append(batch, p)
			default:
				break gather
			}
		}
		c.write(context.Background(), batch)
	}
}

// commit queues m and waits for its transaction. It fails with UNAVAILABLE
// when ctx ends first; the write may still happen, and the command's
// command_id then finds it.
func (c *committer) commit(ctx context.Context, m *mutation) error {
	p := &pendingWrite{m: m, done: make(chan error, 1)}
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
	// Once queued, the outcome must be awaited: the cell may not move on
	// before it knows whether its state changed.
	return <-p.done
}

// write commits one group and answers its commands.
func (c *committer) write(ctx context.Context, batch []*pendingWrite) {
	start := c.now()
	ms := make([]*mutation, len(batch))
	for i, p := range batch {
		ms[i] = p.m
	}
	var short []bool
	err := mysqldb.Update(ctx, c.db, func(tx *sql.Tx) error {
		var err error
		short, err = writeGroup(ctx, tx, ms, c.now().UnixMilli())
		return err
	})
	c.metrics.commitBatch.Observe(float64(len(batch)))
	c.metrics.commitSeconds.Observe(c.now().Sub(start).Seconds())
	if err == nil {
		for i, p := range batch {
			if short[i] {
				p.done <- errInsufficientBalance
			} else {
				p.done <- nil
			}
		}
		return
	}
	if len(batch) == 1 || mysqldb.ErrorNumber(err) == 0 {
		// Alone, or the server could not be reached: splitting would not help.
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
