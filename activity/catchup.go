package activity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/internal/every"
	"voiceroom/internal/rowlease"
	"voiceroom/mysqldb"
)

// A retroactive activity (one that starts before its creation plus
// RetroactiveMargin) is created in catch-up state reading: the live
// durable skips it, and a CatchUp reads ROOM_EVENTS back from its start
// with an ordered consumer of its own, scoring that activity alone
// through the live scorer's per-event code (countTx: activity_seen,
// mic pairing, task payouts), many events per MySQL transaction, with the
// resume point (catchup_seq) in the same transaction. Then the seam:
//
//  1. at the stream's end (nothing pending for the app) it writes joining
//     and live_from_seq = L, the last sequence it read: from now on a
//     live scorer whose list of open activities is read after this
//     scores the activity for events above L;
//  2. it reads on past L until every live list is newer than the joining
//     (Refresh plus JoinMargin after it), then reads the live durable's
//     last delivered sequence D: every event above D is delivered after
//     all lists know the joining, so the live durable scores it;
//  3. it reads on up to D (or the app's end of stream after D was read)
//     and writes joined. Every event up to D that a stale live list
//     skipped is scored here; the events in (L, D] that both score count
//     once (their activity_seen rows; mic_seconds pairs a speaker's seat
//     events in room order whatever order they are scored in: micTx).
//
// Settlement does not freeze an activity before it joined.

// MicLookBack is how far before a mic_seconds activity's start its read
// back begins: a session opened before the start and ended after it
// counts from the start, as for an activity defined before it.
const MicLookBack = 2 * time.Hour

// CatchupConfig configures a CatchUp. Zero fields take their defaults.
type CatchupConfig struct {
	// Owner names this process in activities.catchup_owner (1..64
	// characters). Required.
	Owner string
	// Durable is the live scoring durable whose delivered sequence ends
	// the seam. Default bus.DurableActivity.
	Durable string
	// Lease is how long an activity's read back stays with this process
	// without being renewed (each batch renews it); another takes it
	// over once it lapses. Default 30s, 1s..1h.
	Lease time.Duration
	// Tick is the pause between two looks for read backs to run.
	// Default 1s, at most half the lease.
	Tick time.Duration
	// Batch is the most events read at once and scored in one MySQL
	// transaction. Default 500, 1..10000.
	Batch int
	// JoinMargin is added to the live scorers' Refresh before the read
	// back trusts every live list to know its joining (the processes'
	// clocks differ). Default 2s.
	JoinMargin time.Duration
	// MaxReading bounds the activities this process reads back at once.
	// Default 2, 1..100.
	MaxReading int
	// MaxRate bounds the events one read back reads per second, so that
	// it leaves MySQL and the machine to the live consumers (a read back
	// at full speed took a third to a half of the live scorer's rate on
	// a small machine: docs/activities.md, "A start in the past"). 0: as
	// fast as it goes (VOICEROOM_ACTIVITY_CATCHUP_MAX_RATE, whose default
	// is 2,000; this field's zero value is no bound).
	MaxRate int
	// Score is the scoring configuration of the live scorers (their
	// Refresh times the seam; the time zones, the boards).
	Score ScoreConfig
}

// WithDefaults returns c with zero fields set to their defaults.
func (c CatchupConfig) WithDefaults() CatchupConfig {
	if c.Durable == "" {
		c.Durable = bus.DurableActivity
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.Tick == 0 {
		c.Tick = time.Second
	}
	if c.Batch == 0 {
		c.Batch = 500
	}
	if c.JoinMargin == 0 {
		c.JoinMargin = 2 * time.Second
	}
	if c.MaxReading == 0 {
		c.MaxReading = 2
	}
	c.Score = c.Score.WithDefaults()
	return c
}

// Validate checks c after defaults; it never changes c.
func (c CatchupConfig) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Batch < 1 || c.Batch > 10000:
		return apperr.BadConfig("Batch", "activity catch-up: batch %d: must be 1..10000", c.Batch)
	case c.JoinMargin < 0 || c.JoinMargin > time.Minute:
		return apperr.BadConfig("JoinMargin", "activity catch-up: join margin %s: must be 0..1m", c.JoinMargin)
	case c.MaxReading < 1 || c.MaxReading > 100:
		return apperr.BadConfig("MaxReading", "activity catch-up: max reading %d: must be 1..100", c.MaxReading)
	case c.MaxRate < 0 || c.MaxRate > 10_000_000:
		return apperr.BadConfig("MaxRate", "activity catch-up: max rate %d: must be 0 (no bound)..10000000 events/s", c.MaxRate)
	}
	return c.Score.Validate()
}

// CatchUp runs the read backs of retroactive activities (see above): any
// number of processes run one; each activity is read by the one holding
// its catch-up lease.
type CatchUp struct {
	db      *sql.DB
	stream  jetstream.Stream
	sc      *Scorer // the per-event code and the boards; no consumer
	cfg     CatchupConfig
	lease   *rowlease.Holder // activities.catchup_owner, catchup_lease_until_ms
	log     *slog.Logger
	metrics *CatchupMetrics

	mu      sync.Mutex
	reading map[int64]bool
	tasks   sync.WaitGroup

	// afterBatch, when set (tests), runs after each committed batch of
	// activity id's read back with the number of batches this read
	// committed; an error stops the read back as a failure would.
	afterBatch func(id int64, batches int) error
	// afterJoining, when set (tests), runs once the read back of id wrote
	// joining, before it waits for the live lists.
	afterJoining func(id int64, liveFrom uint64)
	// pace waits d (or until ctx ends) to keep to MaxRate: sleep, or a
	// test's recorder.
	pace func(ctx context.Context, d time.Duration)
}

// NewCatchUp returns a CatchUp reading stream (ROOM_EVENTS). rdb (the
// boards) and m may be nil.
func NewCatchUp(db *sql.DB, rdb redis.UniversalClient, stream jetstream.Stream, cfg CatchupConfig, log *slog.Logger, m *CatchupMetrics) (*CatchUp, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil || stream == nil {
		return nil, apperr.BadConfig("DB", "activity catch-up: db and stream are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sc, err := newScorer(db, rdb, cfg.Score, log, nil)
	if err != nil {
		return nil, err
	}
	lease := rowlease.NewHolder(rowlease.Columns{Table: "activities", Key: "activity_id", Owner: "catchup_owner", Until: "catchup_lease_until_ms",
		Where: `catchup_state IN (?, ?) AND settle_state = ? AND status <> ?`}, cfg.Owner, cfg.Lease, cfg.Score.Now)
	return &CatchUp{db: db, stream: stream, sc: sc, cfg: cfg, lease: lease, log: log.With("component", "activity-catchup"), metrics: m,
		reading: map[int64]bool{}, pace: sleep}, nil
}

// Run looks every Tick for read backs to run and runs those whose lease
// it takes (at most MaxReading at once), until ctx ends; then it waits
// for them to stop. Errors are logged; the next look tries again.
func (c *CatchUp) Run(ctx context.Context) error {
	defer c.tasks.Wait()
	every.Now(ctx, c.cfg.Tick, func() {
		if err := c.round(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("activity catch-up: round failed", "error", err)
		}
	})
	return nil
}

// round starts the read backs this process can take.
func (c *CatchUp) round(ctx context.Context) error {
	now := c.cfg.Score.Now().UnixMilli()
	rows, err := c.db.QueryContext(ctx, `SELECT activity_id FROM activities WHERE catchup_state IN (?, ?)
		AND settle_state = ? AND status <> ? AND (catchup_owner = ? OR catchup_owner = '' OR catchup_lease_until_ms < ?)
		ORDER BY activity_id`, CatchupReading, CatchupJoining, StateOpen, Cancelled, c.cfg.Owner, now)
	if err != nil {
		return fmt.Errorf("list read backs: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("list read backs: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list read backs: %w", err)
	}
	for _, id := range ids {
		c.mu.Lock()
		busy, full := c.reading[id], len(c.reading) >= c.cfg.MaxReading
		c.mu.Unlock()
		if busy || full {
			continue
		}
		held, err := c.takeLease(ctx, id)
		if err != nil {
			return err
		}
		if !held {
			continue
		}
		c.mu.Lock()
		c.reading[id] = true
		c.mu.Unlock()
		c.tasks.Add(1)
		go func() {
			defer c.tasks.Done()
			defer func() {
				c.mu.Lock()
				delete(c.reading, id)
				c.mu.Unlock()
			}()
			err := c.readBack(ctx, id)
			switch {
			case err == nil || ctx.Err() != nil:
			case errors.Is(err, errCatchupLost):
				c.log.Info("activity catch-up: stopped (another process took it over, or the activity was cancelled)", "activity_id", id)
			default:
				c.log.Warn("activity catch-up stopped; it resumes from its last batch", "activity_id", id, "error", err)
			}
		}()
	}
	return nil
}

// takeLease takes (or renews) id's read back for this process when it is
// free, lapsed or ours; it reports whether this process holds it.
func (c *CatchUp) takeLease(ctx context.Context, id int64) (bool, error) {
	held, err := c.lease.Take(ctx, c.db, id, CatchupReading, CatchupJoining, StateOpen, Cancelled)
	if err != nil {
		return false, fmt.Errorf("activity %d: take the catch-up lease: %w", id, err)
	}
	return held, nil
}

// errCatchupLost: the read back is no longer this process's to write
// (its lease went to another, or the activity was cancelled).
var errCatchupLost = errors.New("activity catch-up: lease lost or activity closed")

// fenceTx renews id's lease in tx and records seq as read, if this
// process still holds it and the activity is open and in state from:
// the fence that keeps a process whose lease lapsed from scoring. It
// locks the row until tx ends.
func (c *CatchUp) fenceTx(ctx context.Context, tx mysqldb.Querier, id int64, seq uint64, from CatchupState) error {
	now := c.cfg.Score.Now().UnixMilli()
	res, err := tx.ExecContext(ctx, `UPDATE activities SET catchup_seq = GREATEST(catchup_seq, ?),
		catchup_lease_until_ms = GREATEST(?, catchup_lease_until_ms + 1)
		WHERE activity_id = ? AND catchup_owner = ? AND catchup_lease_until_ms >= ? AND catchup_state = ?
		AND settle_state = ? AND status <> ?`,
		seq, now+c.cfg.Lease.Milliseconds(), id, c.cfg.Owner, now, from, StateOpen, Cancelled)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return errCatchupLost
	}
	return nil
}

// load reads activity id (of any app).
func (c *CatchUp) load(ctx context.Context, id int64) (Activity, error) {
	a, err := scanActivity(c.db.QueryRowContext(ctx, `SELECT `+activityColumns+` FROM activities WHERE activity_id = ?`, id),
		c.cfg.Score.Now().UnixMilli())
	if err != nil {
		return Activity{}, fmt.Errorf("activity %d: read: %w", id, err)
	}
	return a, nil
}

// readWait is how long one read waits for events; atEndWait once the
// read back has reached the end of the stream.
const (
	readWait  = time.Second
	atEndWait = 250 * time.Millisecond
)

// readBack reads activity id back under its lease until it joined, the
// lease is lost, or ctx ends.
func (c *CatchUp) readBack(ctx context.Context, id int64) error {
	a, err := c.load(ctx, id)
	if err != nil {
		return err
	}
	phase := a.Catchup.State
	if phase != CatchupReading && phase != CatchupJoining {
		return nil
	}
	defer c.metrics.done(id)
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{bus.SubjectPrefix + "." + a.AppCode + ".>"}}
	read := a.Catchup.Seq
	if read > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, read+1
		// A batch committed before its board writes were done (a kill):
		// MySQL has them.
		if err := c.rebuildBoards(ctx, a); err != nil {
			c.log.Warn("activity catch-up: boards not rebuilt on resume", "activity_id", id, "error", err)
		}
	} else {
		from := a.StartsAtMs
		if a.Metric == MicSeconds {
			from -= MicLookBack.Milliseconds()
		}
		start := time.UnixMilli(from)
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	cons, err := c.stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("activity %d: ordered consumer: %w", id, err)
	}
	// One batch is read ahead while the last is scored.
	rctx, stopReading := context.WithCancel(ctx)
	ahead := make(chan fetched, 1)
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		c.fetchAhead(rctx, cons, id, ahead)
	}()
	defer reader.Wait()
	defer stopReading()
	c.log.Info("activity catch-up: reading", "activity_id", id, "app_code", a.AppCode, "catchup_state", phase,
		"from_seq", read+1, "starts_at_ms", a.StartsAtMs)
	var (
		joinAt     time.Time // when every live list knows the joining
		target     uint64    // the live durable's delivered sequence read at joinAt
		targetAt   time.Time // when it was read
		haveTarget bool
		atEnd      bool
		batches    int
		pending    []raisedEntry // board writes a failure left to do
		renewedAt  = time.Now()
		paceFrom   = time.Now() // MaxRate: paced events read since paceFrom
		paced      int
	)
	if phase == CatchupJoining {
		joinAt = c.cfg.Score.Now().Add(c.cfg.Score.Refresh + c.cfg.JoinMargin) // resumed: its joining time is not known
	}
	for ctx.Err() == nil {
		if len(pending) > 0 {
			if err := c.sc.writeBoards(ctx, pending); err != nil {
				c.log.Warn("activity catch-up: board write failed; retrying", "activity_id", id, "error", err)
				if err := c.renew(ctx, id, read, phase); err != nil {
					return err
				}
				sleep(ctx, time.Second)
				continue
			}
			pending = nil
		}
		var f fetched
		select {
		case <-ctx.Done():
			return ctx.Err()
		case f = <-ahead:
		}
		msgs, left := f.msgs, uint64(0)
		if len(msgs) > 0 {
			meta, err := msgs[len(msgs)-1].Metadata()
			if err != nil {
				return fmt.Errorf("activity %d: message metadata: %w", id, err)
			}
			seqs := make([]uint64, len(msgs))
			for i, m := range msgs {
				md, err := m.Metadata()
				if err != nil {
					return fmt.Errorf("activity %d: message metadata: %w", id, err)
				}
				seqs[i] = md.Sequence.Stream
			}
			g, err := c.findGap(ctx, read, seqs)
			if err != nil {
				return err
			}
			raised, err := c.scoreBatch(ctx, a, msgs, meta.Sequence.Stream, phase, g)
			if err != nil {
				return err
			}
			c.reportGap(a, g)
			read, left = meta.Sequence.Stream, meta.NumPending
			batches++
			paced += len(msgs)
			if c.cfg.MaxRate > 0 {
				due := paceFrom.Add(time.Duration(float64(paced) / float64(c.cfg.MaxRate) * float64(time.Second)))
				c.pace(ctx, time.Until(due))
			}
			renewedAt = time.Now()
			if err := c.sc.writeBoards(ctx, raised); err != nil {
				pending = raised
			}
			if c.afterBatch != nil {
				if err := c.afterBatch(id, batches); err != nil {
					return err
				}
			}
		} else if time.Since(renewedAt) > c.cfg.Lease/3 {
			if err := c.renew(ctx, id, read, phase); err != nil {
				return err
			}
			renewedAt = time.Now()
		}
		// An end proves every event up to the target read only if its
		// read began after the target was read.
		atEnd = (len(msgs) == 0 || left == 0) && (!haveTarget || f.startedAt.After(targetAt))
		if atEnd {
			left = 0
		}
		c.metrics.setLag(id, left)
		switch {
		case phase == CatchupReading && atEnd:
			// Events of the app deleted before they were read, with
			// none after them (nothing delivered to compare with).
			g, err := c.findGap(ctx, read, nil)
			if err != nil {
				return err
			}
			if g.lost() {
				if err := c.recordGap(ctx, id, read, phase, g); err != nil {
					return err
				}
				c.reportGap(a, g)
			}
			if err := c.moveTo(ctx, id, read, CatchupReading, CatchupJoining); err != nil {
				return err
			}
			phase = CatchupJoining
			joinAt = c.cfg.Score.Now().Add(c.cfg.Score.Refresh + c.cfg.JoinMargin)
			c.log.Info("activity catch-up: joining the live scoring", "activity_id", id, "catchup_state", phase, "live_from_seq", read)
			if c.afterJoining != nil {
				c.afterJoining(id, read)
			}
		case phase == CatchupJoining && !haveTarget && !c.cfg.Score.Now().Before(joinAt):
			d, err := c.delivered(ctx)
			if err != nil {
				c.log.Warn("activity catch-up: live durable not read", "activity_id", id, "error", err)
				continue
			}
			target, targetAt, haveTarget = d, time.Now(), true
			c.log.Info("activity catch-up: every live list knows the joining", "activity_id", id, "read_to", read, "live_delivered", d)
		case phase == CatchupJoining && haveTarget && (read >= target || atEnd):
			if err := c.moveTo(ctx, id, read, CatchupJoining, CatchupJoined); err != nil {
				return err
			}
			c.log.Info("activity catch-up: joined", "activity_id", id, "catchup_state", CatchupJoined, "read_to", read, "batches", batches)
			if err := c.rebuildBoards(ctx, a); err != nil {
				c.log.Warn("activity catch-up: boards not rebuilt after joining", "activity_id", id, "error", err)
			}
			return nil
		}
	}
	return ctx.Err()
}

// fetched is one read of the stream: its messages (none: nothing was
// pending), and when the read began.
type fetched struct {
	msgs      []jetstream.Msg
	startedAt time.Time
}

// fetchAhead reads cons into out until ctx ends, one batch ahead of the
// scoring: a full batch is followed at once by the next read, a short
// one by a read that waits atEndWait for events.
func (c *CatchUp) fetchAhead(ctx context.Context, cons jetstream.Consumer, id int64, out chan<- fetched) {
	wait := readWait
	for ctx.Err() == nil {
		f := fetched{startedAt: time.Now()}
		batch, err := cons.Fetch(c.cfg.Batch, jetstream.FetchMaxWait(wait))
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("activity catch-up: read failed", "activity_id", id, "error", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		for m := range batch.Messages() {
			f.msgs = append(f.msgs, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) &&
			!errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil {
			c.log.Warn("activity catch-up: read failed", "activity_id", id, "error", err)
			if len(f.msgs) == 0 {
				sleep(ctx, time.Second)
				continue // an error is not the stream's end
			}
		}
		wait = readWait
		if len(f.msgs) < c.cfg.Batch {
			wait = atEndWait
		}
		select {
		case <-ctx.Done():
			return
		case out <- f:
		}
	}
}

// scoreBatch scores the events of msgs for a alone in one transaction,
// fenced by its lease, recording lastSeq as read; it returns the board
// entries raised, for Redis after the commit.
func (c *CatchUp) scoreBatch(ctx context.Context, a Activity, msgs []jetstream.Msg, lastSeq uint64, phase CatchupState, g gap) ([]raisedEntry, error) {
	evs := make([]event, 0, len(msgs))
	skipped := 0
	for _, m := range msgs {
		env, err := bus.DecodeEnvelope(m.Data())
		if err != nil || env.AppCode != a.AppCode || !scored(env.EventType) {
			skipped++ // an envelope that does not decode is the live durable's to dead-letter
			continue
		}
		ev, err := decodeEvent(env)
		if err != nil {
			skipped++
			c.log.Warn("activity catch-up: event not read; skipped (the live durable dead-letters it)", "activity_id", a.ID, "event_id", env.EventID, "error", err)
			continue
		}
		if !ev.countsFor(a) {
			skipped++
			continue
		}
		evs = append(evs, ev)
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.Score.WriteTimeout)
	defer cancel()
	var raised []raisedEntry
	var scoredN, dupN int
	err := mysqldb.Update(wctx, c.db, func(tx *sql.Tx) error {
		raised, scoredN, dupN = raised[:0], 0, 0
		if err := c.fenceTx(wctx, tx, a.ID, lastSeq, phase); err != nil {
			return err
		}
		if err := gapTx(wctx, tx, a.ID, g); err != nil {
			return err
		}
		now := c.cfg.Score.Now().UnixMilli()
		var w txWork
		for _, ev := range evs {
			res, err := c.sc.countTx(wctx, tx, a, ev, now, &w)
			if err != nil {
				return fmt.Errorf("event %s (%s): %w", ev.env.EventID, ev.env.EventType, err)
			}
			if res == resultDuplicate {
				dupN++
			} else {
				scoredN++
			}
		}
		var err error
		raised, err = c.sc.applyTx(wctx, tx, &w, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("activity %d: score the batch up to %d: %w", a.ID, lastSeq, err)
	}
	raised = coalesce(raised)
	c.metrics.read(catchupScored, scoredN)
	c.metrics.read(catchupDuplicate, dupN)
	c.metrics.read(catchupSkipped, skipped)
	return raised, nil
}

// gap is a range of stream sequences deleted before the read back read
// them (From 0: none). Retention deletes from the stream's head, so the
// range is every sequence after the last one delivered before the head
// passed it, up to the stream's first sequence or the next delivered,
// whichever comes first (gapIn); other apps' events among them are counted in too (they are
// deleted, the filter can no longer tell): an upper bound.
type gap struct{ From, To uint64 }

func (g gap) lost() bool { return g.From > 0 && g.To >= g.From }

// findGap checks the batch delivered after read, of stream sequences
// seqs (none: the read found the stream's end), for events deleted before
// they were read; see gapIn. A batch without a jump has none, and costs
// no look at the stream.
func (c *CatchUp) findGap(ctx context.Context, read uint64, seqs []uint64) (gap, error) {
	if read == 0 || !jumps(read, seqs) {
		return gap{}, nil
	}
	rctx, cancel := context.WithTimeout(ctx, streamReadTimeout)
	defer cancel()
	info, err := c.stream.Info(rctx)
	if err != nil {
		return gap{}, fmt.Errorf("stream info (gap check after sequence %d): %w", read, err)
	}
	return gapIn(read, seqs, info.State.FirstSeq), nil
}

// jumps reports whether seqs, delivered after read, skip a sequence (or
// are none: the stream's end).
func jumps(read uint64, seqs []uint64) bool {
	if len(seqs) == 0 {
		return true
	}
	for _, s := range seqs {
		if s > read+1 {
			return true
		}
		read = s
	}
	return false
}

// gapIn is the gap in the batch delivered after read, of stream
// sequences seqs (none: the stream's end), when the stream's first
// sequence is first. A jump alone is other subjects skipped by the
// filter; what lay in a jump was deleted before it was read when the
// stream's head, which retention and purges move forward, passed the
// jump's start while the read was in it: the jump from x to y with
// x+1 < first <= y lost x+1..first-1. That may be inside the batch: a
// deletion while the batch was being read. A jump before the batch's
// first sequence is checked as before any batch: everything from read+1
// up to the stream's first sequence, or to the batch's first if the
// stream's head has passed that too (deleted after it was delivered:
// not lost). A read back from a start time (read 0) has no sequence to
// expect and is not checked (its start was checked at creation).
func gapIn(read uint64, seqs []uint64, first uint64) gap {
	if read == 0 || first <= read+1 {
		return gap{}
	}
	if len(seqs) == 0 {
		return gap{From: read + 1, To: first - 1}
	}
	var g gap
	x := read
	for _, y := range seqs {
		if y > x+1 && x+1 < first {
			if first <= y {
				return g.with(x+1, first-1)
			}
			if x == read {
				g = g.with(x+1, y-1)
			}
		}
		x = y
	}
	return g
}

// with is g widened to cover from..to.
func (g gap) with(from, to uint64) gap {
	if g.From == 0 || from < g.From {
		g.From = from
	}
	g.To = max(g.To, to)
	return g
}

// gapTx records g in activity id's row (the lowest and highest sequence
// lost over every gap), in the batch's transaction.
func gapTx(ctx context.Context, tx mysqldb.Querier, id int64, g gap) error {
	if !g.lost() {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE activities SET
		catchup_lost_from_seq = IF(catchup_lost_from_seq = 0, ?, LEAST(catchup_lost_from_seq, ?)),
		catchup_lost_to_seq = GREATEST(catchup_lost_to_seq, ?) WHERE activity_id = ?`, g.From, g.From, g.To, id)
	if err != nil {
		return fmt.Errorf("record the sequences lost %d..%d: %w", g.From, g.To, err)
	}
	return nil
}

// recordGap records g under id's lease (no batch to score with it).
func (c *CatchUp) recordGap(ctx context.Context, id int64, read uint64, phase CatchupState, g gap) error {
	err := mysqldb.Update(ctx, c.db, func(tx *sql.Tx) error {
		if err := c.fenceTx(ctx, tx, id, read, phase); err != nil {
			return err
		}
		return gapTx(ctx, tx, id, g)
	})
	if err != nil {
		return fmt.Errorf("activity %d: %w", id, err)
	}
	return nil
}

// reportGap logs and counts g once it is recorded.
func (c *CatchUp) reportGap(a Activity, g gap) {
	if !g.lost() {
		return
	}
	c.log.Error("activity catch-up: events deleted from the stream before they were read (retention); the read back goes on, its scores are a lower bound",
		"activity_id", a.ID, "app_code", a.AppCode, "lost_from_seq", g.From, "lost_to_seq", g.To)
	c.metrics.gap(g.To - g.From + 1)
}

// coalesce keeps, of the entries a batch raised, the last of each
// subject of each board (writes are absolute: the last is the highest),
// grouped by board, so that a batch writes each board once.
func coalesce(raised []raisedEntry) []raisedEntry {
	type board struct{ id, ps int64 }
	last := map[board]map[string]int{} // subject -> its index in out
	var boards []board
	byBoard := map[board][]raisedEntry{}
	for _, r := range raised {
		k := board{r.activityID, r.periodStartMs}
		if last[k] == nil {
			last[k] = map[string]int{}
			boards = append(boards, k)
		}
		if i, ok := last[k][r.entry.Subject]; ok {
			r.lowered = r.lowered || byBoard[k][i].lowered
			byBoard[k][i] = r
			continue
		}
		last[k][r.entry.Subject] = len(byBoard[k])
		byBoard[k] = append(byBoard[k], r)
	}
	out := make([]raisedEntry, 0, len(raised))
	for _, k := range boards {
		out = append(out, byBoard[k]...)
	}
	return out
}

// renew renews id's lease (nothing scored).
func (c *CatchUp) renew(ctx context.Context, id int64, read uint64, phase CatchupState) error {
	if err := c.fenceTx(ctx, c.db, id, read, phase); err != nil {
		return fmt.Errorf("activity %d: renew the catch-up lease: %w", id, err)
	}
	return nil
}

// moveTo moves id's read back from one state to the next under its
// lease, at read: joining sets live_from_seq to read; joined gives the
// lease back.
func (c *CatchUp) moveTo(ctx context.Context, id int64, read uint64, from, to CatchupState) error {
	err := mysqldb.Update(ctx, c.db, func(tx *sql.Tx) error {
		if err := c.fenceTx(ctx, tx, id, read, from); err != nil {
			return err
		}
		q := `UPDATE activities SET catchup_state = ?, live_from_seq = ?, updated_at_ms = ? WHERE activity_id = ?`
		args := []any{to, read, c.cfg.Score.Now().UnixMilli(), id}
		if to == CatchupJoined {
			q = `UPDATE activities SET catchup_state = ?, catchup_owner = '', catchup_lease_until_ms = 0, updated_at_ms = ? WHERE activity_id = ?`
			args = []any{to, c.cfg.Score.Now().UnixMilli(), id}
		}
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("activity %d: catch-up %s -> %s: %w", id, from, to, err)
	}
	return nil
}

// delivered is the last stream sequence the live durable delivered.
func (c *CatchUp) delivered(ctx context.Context) (uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, streamReadTimeout)
	defer cancel()
	cons, err := c.stream.Consumer(rctx, c.cfg.Durable)
	if err != nil {
		return 0, fmt.Errorf("consumer %s: %w", c.cfg.Durable, err)
	}
	info, err := cons.Info(rctx)
	if err != nil {
		return 0, fmt.Errorf("consumer %s: %w", c.cfg.Durable, err)
	}
	return info.Delivered.Stream, nil
}

// rebuildBoards writes a's boards from MySQL into Redis (none without
// Redis): after a resume or the join, a batch's board writes may be
// missing.
func (c *CatchUp) rebuildBoards(ctx context.Context, a Activity) error {
	if c.sc.boards == nil {
		return nil
	}
	rows, err := c.db.QueryContext(ctx, `SELECT DISTINCT period_start_ms FROM activity_scores WHERE activity_id = ?`, a.ID)
	if err != nil {
		return err
	}
	var starts []int64
	for rows.Next() {
		var ps int64
		if err := rows.Scan(&ps); err != nil {
			rows.Close()
			return err
		}
		starts = append(starts, ps)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, ps := range starts {
		_, pe := periodOf(c.sc.cal, a, ps)
		if err := rebuildBoard(ctx, c.db, c.sc.boards, a.ID, ps, pe); err != nil {
			return err
		}
	}
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
