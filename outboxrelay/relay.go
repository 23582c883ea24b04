package outboxrelay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"voiceroom"
	"voiceroom/bus"
)

// WorkerName is the value of the "worker" log field (docs/operating.md, "The outbox").
const WorkerName = "room_outbox"

// Publisher is what the relay and the fast path need of *bus.Publisher.
type Publisher interface {
	// PublishMessage publishes one message and waits for the stream's ack.
	PublishMessage(ctx context.Context, m bus.Message) (bus.PubAck, error)
	// PublishBatch publishes msgs asynchronously with bounded in-flight
	// messages and returns one result per message, in order.
	PublishBatch(ctx context.Context, msgs []bus.Message) []bus.Result
}

var _ Publisher = (*bus.Publisher)(nil)

// Relay moves pending room_outbox rows into JetStream: see the package doc.
type Relay struct {
	db      *sql.DB
	pub     Publisher
	log     *slog.Logger
	m       *Metrics
	cfg     Config
	stmts   *statements
	running atomic.Bool

	// lock lets one relay of several drain at a time; draining is whether
	// this one did at its last pass (Pass's own state: passes run one at
	// a time).
	lock          *drainLock
	draining      bool
	standbyLogged bool

	// logged remembers undecodable rows already logged by this process, so
	// a broken row is logged once, not on every pass; bounded.
	loggedMu sync.Mutex
	logged   map[int64]struct{}

	// testHookBeforeMark, when set (tests), runs after a batch's publish
	// and before its marks; an error abandons the marks as a crash would.
	testHookBeforeMark func() error
}

// New returns a Relay that publishes the pending rows of db through pub.
// log should carry node_id (cmd/voiceroom's does); m may be nil. It fails
// with an error wrapping ErrUnknownRetryStrategy or ErrInvalidConfig when
// cfg does not validate.
func New(db *sql.DB, pub Publisher, log *slog.Logger, m *Metrics, cfg Config) (*Relay, error) {
	if db == nil || pub == nil {
		return nil, fmt.Errorf("%w: relay needs a database and a publisher", ErrInvalidConfig)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("worker", WorkerName, "path", pathRelay)
	return &Relay{
		db:     db,
		pub:    pub,
		log:    log,
		m:      m,
		cfg:    cfg,
		stmts:  newStatements(db),
		lock:   &drainLock{db: db, log: log, timeout: cfg.StatementTimeout},
		logged: make(map[int64]struct{}),
	}, nil
}

// warm prepares the statements of a pass on the pool, before any of its
// transactions holds a connection.
func (r *Relay) warm(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	n := r.cfg.BatchSize
	r.stmts.warm(ctx, claimSQL, markPublishedRangeSQL, unsentRowsSQL(unsentRoomsChunk))
	r.stmts.warm(ctx, ofEverySize(n, markPublishedSQL)...)
	r.stmts.warm(ctx, ofEverySize(n, markFailedSQL)...)
}

// Config returns the relay's configuration with defaults applied.
func (r *Relay) Config() Config { return r.cfg }

// Run drains the outbox: one pass at once, then one every PollInterval,
// with retention and the pending gauges on their own intervals. It blocks
// until ctx ends; then it claims nothing more, lets the batch being
// published finish within PublishTimeout, records its results and returns
// within Config.DrainBound. Failures of MySQL or JetStream are logged and
// retried; Run returns an error only when called twice.
func (r *Relay) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return fmt.Errorf("outbox relay: %w", ErrAlreadyRunning)
	}
	defer r.stmts.close()
	r.log.Info("outbox relay started", "poll_interval", r.cfg.PollInterval, "batch_size", r.cfg.BatchSize,
		"publish_timeout", r.cfg.PublishTimeout, "retry_strategy", r.cfg.RetryStrategy, "retention", r.cfg.Retention,
		"pipeline", r.cfg.Pipeline)

	var wg sync.WaitGroup
	wg.Go(func() { r.every(ctx, r.cfg.RetentionInterval, r.retain) })
	wg.Go(func() { r.every(ctx, r.cfg.StatsInterval, r.refreshStats) })

	r.Pass(ctx)
	t := time.NewTicker(r.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.lock.release() // a relay standing by takes over at its next pass
			r.m.setDraining(false)
			wg.Wait()
			r.log.Info("outbox relay stopped")
			return nil
		case <-t.C:
			r.Pass(ctx)
		}
	}
}

// every runs fn at once and then every interval until ctx ends.
func (r *Relay) every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PassResult counts what one pass did.
type PassResult struct {
	// Claimed is the number of rows the pass locked.
	Claimed int
	// Published is the number of rows acked by the stream and marked.
	Published int
	// Failed is the number of rows whose publish failed (retry_count + 1).
	Failed int
	// Undecodable is the number of rows left pending because their
	// envelope cannot be decoded (retry_count + 1).
	Undecodable int
	// HeldBack is the number of rows not published because an earlier
	// event of their room failed in this pass.
	HeldBack int
	// Unmarked is the number of rows whose results could not be recorded;
	// they stay pending as they were.
	Unmarked int
}

// pass is the state of one pass shared by its stages.
type pass struct {
	// heldRooms are the rooms with a row this pass leaves pending (failed,
	// or held back behind an earlier event not yet in the stream): their
	// later rows wait for the next pass, which starts again from the
	// oldest row (publisher goroutine only).
	heldRooms map[voiceroom.RoomKey]struct{}
	// stop ends the pass early: a whole batch failed, so JetStream is
	// most likely down and the next tick tries again from the oldest row.
	stop atomic.Bool

	// newest is, per room, the highest room_version claimed in this pass
	// (claimer goroutine only).
	newest map[voiceroom.RoomKey]int64

	mu      sync.Mutex
	res     PassResult
	claimed map[int64]struct{} // ids of every row claimed in this pass
}

// unsure returns the rooms of rows (a new batch) with a row whose
// room_version does not follow the newest this pass claimed of its room
// (the same version, or the next): only for those can an earlier event
// still be outside the stream without the pass knowing (see
// Relay.unsentBefore). A room whose rows follow on from what the pass
// claimed has its earlier events in this pass's hands: published, or
// held back (heldRooms).
func (p *pass) unsure(rows []voiceroom.OutboxRow) map[voiceroom.RoomKey]struct{} {
	var out map[voiceroom.RoomKey]struct{}
	for _, rw := range rows {
		key := voiceroom.RoomKey{AppCode: rw.AppCode, RoomID: rw.RoomID}
		newest, ok := p.newest[key]
		if !ok || rw.RoomVersion > newest+1 {
			if out == nil {
				out = make(map[voiceroom.RoomKey]struct{})
			}
			out[key] = struct{}{}
		}
		p.newest[key] = max(newest, rw.RoomVersion)
	}
	return out
}

// wasClaimed reports whether this pass claimed the row id.
func (p *pass) wasClaimed(id int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.claimed[id]
	return ok
}

// batch is one claimed transaction on its way through the pipeline.
type batch struct {
	tx     *sql.Tx
	ctx    context.Context // the transaction's; outlives Run's ctx so results are recorded
	cancel context.CancelFunc
	rows   []voiceroom.OutboxRow          // claimed rows, in id order; the publish stage keeps the decodable ones
	unsure map[voiceroom.RoomKey]struct{} // rooms to read earlier unsent rows of (pass.unsure)
	bad    map[string][]int64
	nBad   int

	// Set by the publish stage.
	skip      bool // not published: roll back, the rows stay as they were
	published []int64
	failed    map[string][]int64 // sanitized error -> row ids
	nFailed   int
	heldBack  int
}

// Pass claims and publishes pending rows, oldest first, in pipelined
// batches until a claim comes back short, the pass has taken a poll
// interval (the next starts again from the oldest row, so rows that failed
// are retried once per interval), a whole batch fails, or ctx ends. Run
// calls it; it is exported for tests and benchmarks.
func (r *Relay) Pass(ctx context.Context) PassResult {
	if !r.holdDrainLock(ctx) {
		return PassResult{}
	}
	start := r.cfg.Now()
	r.warm(ctx)
	r.expireInFlight(ctx)
	p := &pass{heldRooms: make(map[voiceroom.RoomKey]struct{}), newest: make(map[voiceroom.RoomKey]int64),
		claimed: make(map[int64]struct{})}
	slots := make(chan struct{}, r.cfg.Pipeline) // one per batch holding a transaction
	toPublish := make(chan *batch, r.cfg.Pipeline)
	toMark := make(chan *batch, r.cfg.Pipeline)

	var stages sync.WaitGroup
	stages.Go(func() {
		defer close(toMark)
		for b := range toPublish {
			r.publish(ctx, p, b)
			toMark <- b
		}
	})
	// Marking (an UPDATE that moves each row between index ranges, then an
	// fsync) costs MySQL several times what claiming does, so half of the
	// batches in flight may be marking at once.
	for range max(1, r.cfg.Pipeline/2) {
		stages.Go(func() {
			for b := range toMark {
				r.finish(p, b)
				<-slots
			}
		})
	}

	opened := make(chan begun)
	stopOpener := make(chan struct{})
	go r.opener(ctx, stopOpener, opened)
	defer func() {
		close(stopOpener)
		for o := range opened { // the one begun ahead, if any
			if o.b != nil {
				o.b.abandon()
			}
		}
	}()

	var cursor int64
claim:
	for ctx.Err() == nil && !p.stop.Load() {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			break claim
		}
		var o begun
		select {
		case o = <-opened:
		case <-ctx.Done():
			<-slots
			break claim
		}
		b, err := o.claimed(r, cursor)
		if err != nil {
			<-slots
			if ctx.Err() == nil {
				r.m.dbFailed("claim")
				r.log.Error("outbox claim failed; retrying next tick", "error", err)
			}
			break
		}
		n := len(b.rows)
		if n == 0 {
			rollback(b.tx)
			b.cancel()
			<-slots
			break
		}
		p.mu.Lock()
		p.res.Claimed += n
		for _, rw := range b.rows {
			p.claimed[rw.ID] = struct{}{}
		}
		p.mu.Unlock()
		b.unsure = p.unsure(b.rows)
		cursor = b.lastID
		toPublish <- b.batch
		if n < r.cfg.BatchSize || r.cfg.Now().Sub(start) >= r.cfg.PollInterval {
			break
		}
	}
	close(toPublish)
	stages.Wait()

	res := p.res
	if res.Claimed > 0 {
		level := slog.LevelDebug
		if res.Failed+res.Undecodable+res.Unmarked > 0 {
			level = slog.LevelWarn
		}
		r.log.Log(ctx, level, "outbox pass", "claimed", res.Claimed, "published", res.Published, "failed", res.Failed,
			"undecodable", res.Undecodable, "held_back", res.HeldBack, "unmarked", res.Unmarked,
			"duration", r.cfg.Now().Sub(start))
	}
	return res
}

// holdDrainLock reports whether this relay drains the outbox now (see
// drainLock), logging when that changes.
func (r *Relay) holdDrainLock(ctx context.Context) bool {
	held, err := r.lock.hold(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		r.m.dbFailed("drain_lock")
		r.log.Warn("outbox relay cannot take its drain lock; trying again next pass", "error", err)
	case held && !r.draining:
		r.log.Info("outbox relay drains the outbox (it holds the drain lock)")
	case !held && err == nil && (r.draining || !r.standbyLogged):
		r.standbyLogged = true
		r.log.Info("outbox relay stands by: another relay drains the outbox; this one takes over when that one stops")
	}
	r.draining = held
	r.m.setDraining(held)
	return held
}

// claimed is a new batch and the id after which the next claim starts.
type claimed struct {
	*batch
	lastID int64
}

// begin opens the transaction of a new batch. The pass begins each batch's
// transaction ahead of its claim (see opener): on a busy server the two
// round trips of a READ COMMITTED begin would otherwise sit on the
// claimer's path, which is the pipeline's one serial stage.
func (r *Relay) begin(ctx context.Context) (*batch, error) {
	// The transaction outlives Run's ctx (its results must be recorded at
	// shutdown) but not this bound: a batch may wait behind the others of
	// the pipeline, each bounded by PublishTimeout.
	bound := time.Duration(r.cfg.Pipeline)*r.cfg.PublishTimeout + 3*r.cfg.StatementTimeout
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	tx, err := r.db.BeginTx(tctx, txOptions)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("begin claim: %w", err)
	}
	return &batch{tx: tx, ctx: tctx, cancel: cancel}, nil
}

// opener begins transactions for the claimer, one ahead, until stop.
func (r *Relay) opener(ctx context.Context, stop <-chan struct{}, out chan<- begun) {
	defer close(out)
	for {
		b, err := r.begin(ctx)
		select {
		case out <- begun{b, err}:
			if err != nil {
				return
			}
		case <-stop:
			if b != nil {
				b.abandon()
			}
			return
		}
	}
}

// begun is a batch whose transaction is open, or why it is not.
type begun struct {
	b   *batch
	err error
}

// claimed claims the rows of o's batch, or returns why it cannot.
func (o begun) claimed(r *Relay, cursor int64) (claimed, error) {
	if o.err != nil {
		return claimed{}, o.err
	}
	return r.claim(o.b, cursor)
}

// abandon rolls back a batch that was never handed on.
func (b *batch) abandon() {
	rollback(b.tx)
	b.cancel()
}

// claim locks the next rows after cursor in b's transaction.
func (r *Relay) claim(b *batch, cursor int64) (claimed, error) {
	fail := func(err error) (claimed, error) {
		b.abandon()
		return claimed{}, err
	}
	qctx, qcancel := context.WithTimeout(b.ctx, r.cfg.StatementTimeout)
	defer qcancel()
	tx := b.tx
	st, err := r.stmts.get(qctx, tx, claimSQL)
	if err != nil {
		return fail(fmt.Errorf("claim: %w", err))
	}
	rs, err := st.QueryContext(qctx, cursor, r.cfg.BatchSize)
	if err != nil {
		return fail(fmt.Errorf("claim: %w", err))
	}
	defer rs.Close()
	last := cursor
	for rs.Next() {
		var rw voiceroom.OutboxRow
		if err := rs.Scan(&rw.ID, &rw.AppCode, &rw.EventID, &rw.RoomID, &rw.RoomVersion, &rw.EventType,
			&rw.Envelope, &rw.RetryCount, &rw.CreatedAtMs); err != nil {
			return fail(fmt.Errorf("claim: scan: %w", err))
		}
		last = rw.ID
		b.rows = append(b.rows, rw)
	}
	if err := rs.Err(); err != nil {
		return fail(fmt.Errorf("claim: %w", err))
	}
	return claimed{batch: b, lastID: last}, nil
}

// rowMessage checks that a row's envelope decodes and agrees with the
// row's columns, and returns the message to publish: the stored bytes on
// the row's subject, with the event_id as Nats-Msg-Id. Errors wrap
// ErrUndecodable.
func rowMessage(rw voiceroom.OutboxRow) (bus.Message, error) {
	env, err := bus.DecodeEnvelope(rw.Envelope)
	if err != nil {
		return bus.Message{}, fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	for _, f := range []struct {
		name      string
		env, want any
	}{
		{"event_id", env.EventID, rw.EventID},
		{"app_code", env.AppCode, rw.AppCode},
		{"room_id", env.RoomID, rw.RoomID},
		{"event_type", env.EventType, rw.EventType},
		{"room_version", env.RoomVersion, rw.RoomVersion},
	} {
		if f.env != f.want {
			return bus.Message{}, fmt.Errorf("%w: %s differs from the row's", ErrUndecodable, f.name)
		}
	}
	subject, err := env.Subject()
	if err != nil {
		return bus.Message{}, fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	return bus.Message{Subject: subject, ID: rw.EventID, Data: rw.Envelope}, nil
}

// undecodable sets a broken row aside in b: it is never published nor
// deleted, gets retry_count + 1 and last_error "undecodable envelope: ..."
// (what GET /admin/v1/outbox lists), and is logged once per process.
func (r *Relay) undecodable(ctx context.Context, b *batch, rw voiceroom.OutboxRow, err error) {
	msg := sanitizeError(err, rw.EventID, "")
	if b.bad == nil {
		b.bad = make(map[string][]int64)
	}
	b.bad[msg] = append(b.bad[msg], rw.ID)
	b.nBad++
	r.m.sawUndecodable(1)

	r.loggedMu.Lock()
	_, seen := r.logged[rw.ID]
	if !seen && len(r.logged) < 10000 {
		r.logged[rw.ID] = struct{}{}
	}
	r.loggedMu.Unlock()
	if !seen {
		r.log.ErrorContext(ctx, "outbox row has an undecodable envelope; it stays pending until fixed",
			"event_id", rw.EventID, "event_type", rw.EventType, "room_id", rw.RoomID, "outbox_id", rw.ID,
			"retry_count", rw.RetryCount+1, "status", "pending", "error", msg)
	}
}

// publish decodes b's rows and sends them, except those of rooms that
// already failed in this pass, then sorts the results. Decoding happens
// here rather than in claim so that the next claim is not kept waiting.
func (r *Relay) publish(ctx context.Context, p *pass, b *batch) {
	if ctx.Err() != nil || p.stop.Load() {
		b.skip = true // claimed but not started: leave it as it was
		return
	}
	unsent, err := r.unsentBefore(b.ctx, b.tx, p, b.rows, b.unsure)
	if err != nil {
		// Unread, a room's rows could overtake its earlier ones still
		// pending or in a fast path's in-flight group: leave the batch as
		// it was and end the pass.
		r.log.WarnContext(ctx, "outbox rows not yet in the stream not read; the batch stays pending", "error", err)
		b.skip = true
		p.stop.Store(true)
		return
	}
	rows := b.rows[:0]
	msgs := make([]bus.Message, 0, len(b.rows))
	behindPending := 0 // rows held back behind a pending row
	for _, rw := range b.rows {
		m, err := rowMessage(rw)
		if err != nil {
			r.undecodable(ctx, b, rw, err)
			continue
		}
		key := voiceroom.RoomKey{AppCode: rw.AppCode, RoomID: rw.RoomID}
		if _, ok := p.heldRooms[key]; ok {
			b.heldBack++
			continue
		}
		if u, ok := unsent[key]; ok && u.id < rw.ID {
			// An earlier event of the room is not in the stream yet and
			// not this pass's to publish: it goes first.
			p.heldRooms[key] = struct{}{}
			b.heldBack++
			if u.pending {
				behindPending++
			}
			continue
		}
		rows = append(rows, rw)
		msgs = append(msgs, m)
	}
	b.rows = rows // rows[j] is msgs[j]
	if len(msgs) == 0 {
		r.m.heldBackRows(b.heldBack)
		if behindPending > 0 {
			// Every row waits, some behind pending rows this pass did not
			// claim: most likely another relay's batch. Claiming on would
			// only lock more of that relay's rooms' rows (which it then
			// holds back in turn); the next pass starts from the oldest.
			p.stop.Store(true)
		}
		return
	}

	// The publish outlives Run's ctx: at shutdown the batch in flight
	// finishes (or times out) and its results are recorded.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.PublishTimeout)
	results := r.publishInRoomOrder(pctx, b.rows, msgs)
	cancel()
	now := r.cfg.Now()

	b.published = make([]int64, 0, len(msgs))
	logged := 0
	for j, res := range results {
		rw := b.rows[j]
		if errors.Is(res.Err, errEarlierFailed) {
			b.heldBack++ // stays pending, untouched: its room goes again next pass
			continue
		}
		if res.Err == nil {
			b.published = append(b.published, rw.ID)
			r.m.acked(pathRelay, rw.EventID, time.UnixMilli(rw.CreatedAtMs), now, res.Ack.Duplicate)
			continue
		}
		msg := sanitizeError(res.Err, rw.EventID, msgs[j].Subject)
		if b.failed == nil {
			b.failed = make(map[string][]int64)
		}
		b.failed[msg] = append(b.failed[msg], rw.ID)
		b.nFailed++
		p.heldRooms[voiceroom.RoomKey{AppCode: rw.AppCode, RoomID: rw.RoomID}] = struct{}{}
		if logged < 10 { // a down stream fails the whole batch: a sample is enough
			logged++
			r.log.WarnContext(ctx, "outbox publish failed; row stays pending", "event_id", rw.EventID,
				"event_type", rw.EventType, "room_id", rw.RoomID, "retry_count", rw.RetryCount+1,
				"status", "pending", "error", msg)
		}
	}
	r.m.failed(pathRelay, b.nFailed)
	r.m.heldBackRows(b.heldBack)
	if len(b.published) == 0 {
		p.stop.Store(true)
	}
}

// errEarlierFailed is the result of a message not sent because an
// earlier message of its room in the batch failed.
var errEarlierFailed = errors.New("not sent: an earlier event of its room failed")

// publishInRoomOrder publishes msgs (msgs[j] is rows[j], in id order) in
// waves: the first message of every room in the batch, then, once those
// are answered, the next of every room whose previous one was acked, and
// so on. No two messages of one room are ever in flight together, so the
// stream stores each room's events in room_version order even when some
// fail: sent together, an earlier message refused (the server restarting,
// say) and a later one of its room accepted would be stored out of order.
// A message after a failed one of its room is not sent: its result is
// errEarlierFailed. Rooms go concurrently, as before; a batch costs as
// many round trips as its busiest room has rows.
func (r *Relay) publishInRoomOrder(ctx context.Context, rows []voiceroom.OutboxRow, msgs []bus.Message) []bus.Result {
	results := make([]bus.Result, len(msgs))
	// The rows of each room, in order; queues[k] is the k-th room met.
	index := make(map[voiceroom.RoomKey]int, len(rows))
	var queues [][]int
	for j, rw := range rows {
		key := voiceroom.RoomKey{AppCode: rw.AppCode, RoomID: rw.RoomID}
		k, ok := index[key]
		if !ok {
			k = len(queues)
			index[key] = k
			queues = append(queues, nil)
		}
		queues[k] = append(queues[k], j)
	}
	if len(queues) == len(rows) { // one row per room: one wave
		return r.pub.PublishBatch(ctx, msgs)
	}
	wave := make([]bus.Message, 0, len(queues))
	at := make([]int, 0, len(queues)) // wave[i] is msgs[at[i]]
	for len(queues) > 0 {
		wave, at = wave[:0], at[:0]
		for _, q := range queues {
			wave = append(wave, msgs[q[0]])
			at = append(at, q[0])
		}
		res := r.pub.PublishBatch(ctx, wave)
		next := queues[:0]
		for i, q := range queues {
			results[at[i]] = res[i]
			if res[i].Err != nil {
				for _, j := range q[1:] {
					results[j] = bus.Result{Err: errEarlierFailed}
				}
				continue
			}
			if len(q) > 1 {
				next = append(next, q[1:])
			}
		}
		queues = next
	}
	return results
}

// finish records b's results in its transaction and commits: published
// rows get status published, failed and undecodable ones retry_count + 1
// and last_error. If that fails the transaction rolls back and every row
// stays as it was, to be tried again next tick (a row already in the
// stream is then de-duplicated by its event_id).
func (r *Relay) finish(p *pass, b *batch) {
	defer b.cancel()
	if b.skip {
		rollback(b.tx)
		return
	}
	err := r.mark(b)
	if err == nil && r.testHookBeforeMark != nil {
		err = r.testHookBeforeMark()
	}
	if err == nil {
		err = b.tx.Commit()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.res.HeldBack += b.heldBack
	if err != nil {
		rollback(b.tx)
		r.m.dbFailed("mark")
		p.res.Unmarked += len(b.published) + b.nFailed + b.nBad
		r.log.Error("outbox mark failed; rows stay pending and are retried next tick",
			"published", len(b.published), "failed", b.nFailed, "undecodable", b.nBad, "error", err)
		return
	}
	p.res.Published += len(b.published)
	p.res.Failed += b.nFailed
	p.res.Undecodable += b.nBad
	if r.log.Enabled(context.Background(), slog.LevelDebug) {
		published := make(map[int64]bool, len(b.published))
		for _, id := range b.published {
			published[id] = true
		}
		for _, rw := range b.rows {
			if published[rw.ID] {
				r.log.Debug("outbox row published", "event_id", rw.EventID, "event_type", rw.EventType,
					"room_id", rw.RoomID, "retry_count", rw.RetryCount, "status", "published")
			}
		}
	}
}

// mark runs b's updates (without committing).
func (r *Relay) mark(b *batch) error {
	ctx, cancel := context.WithTimeout(b.ctx, r.cfg.StatementTimeout)
	defer cancel()
	if len(b.published) > 0 {
		n, args := sizedArgs(b.published, r.cfg.BatchSize, r.cfg.Now().UnixMilli())
		query := markPublishedSQL(n)
		if contiguous(b.published) {
			query, args = markPublishedRangeSQL, []any{args[0], b.published[0], b.published[len(b.published)-1]}
		}
		st, err := r.stmts.get(ctx, b.tx, query)
		if err != nil {
			return fmt.Errorf("mark published: %w", err)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("mark published: %w", err)
		}
	}
	for _, group := range []map[string][]int64{b.failed, b.bad} {
		for msg, ids := range group {
			n, args := sizedArgs(ids, r.cfg.BatchSize, msg)
			st, err := r.stmts.get(ctx, b.tx, markFailedSQL(n))
			if err != nil {
				return fmt.Errorf("mark failed: %w", err)
			}
			if _, err := st.ExecContext(ctx, args...); err != nil {
				return fmt.Errorf("mark failed: %w", err)
			}
		}
	}
	return nil
}

// retain deletes published rows older than Retention. It walks the
// published rows in id order, a window of RetentionBatch at a time, and
// deletes the old ones of each window; it stops at a window that ends with
// a row younger than Retention (rows are published in nearly id order, so
// the rest is young too), or after a bounded number of windows per run so
// that one run never hogs the table. A row published long after its
// neighbours (it failed for days) is deleted a little late, never early.
func (r *Relay) retain(ctx context.Context) {
	const maxWindowsPerRun = 200
	cutoff := r.cfg.Now().Add(-r.cfg.Retention).UnixMilli()
	var total, cursor int64
	for range maxWindowsPerRun {
		if ctx.Err() != nil {
			break
		}
		n, next, more, err := r.retainWindow(ctx, cursor, cutoff)
		if err != nil {
			if ctx.Err() == nil {
				r.m.dbFailed("retention")
				r.log.Warn("outbox retention failed; retrying next run", "error", err)
			}
			break
		}
		total += n
		r.m.deleted(n)
		if !more {
			break
		}
		cursor = next
	}
	if total > 0 {
		r.log.Info("outbox retention deleted published rows", "deleted", total, "retention", r.cfg.Retention)
	}
}

// retainWindow deletes the old rows of the window after cursor. It returns
// how many it deleted, the window's last id and whether to go on.
func (r *Relay) retainWindow(ctx context.Context, cursor, cutoff int64) (deleted, last int64, more bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	n := r.cfg.RetentionBatch
	find, err := r.stmts.prepared(ctx, publishedWindowSQL)
	if err != nil {
		return 0, 0, false, err
	}
	rs, err := find.QueryContext(ctx, cursor, n)
	if err != nil {
		return 0, 0, false, err
	}
	old := make([]int64, 0, n)
	var seen int
	var lastPublished int64
	for rs.Next() {
		if err := rs.Scan(&last, &lastPublished); err != nil {
			rs.Close()
			return 0, 0, false, err
		}
		seen++
		if lastPublished < cutoff {
			old = append(old, last)
		}
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return 0, 0, false, err
	}
	if len(old) > 0 {
		k, args := sizedArgs(old, n)
		del, err := r.stmts.prepared(ctx, deletePublishedSQL(k))
		if err != nil {
			return 0, 0, false, err
		}
		if _, err := del.ExecContext(ctx, args...); err != nil {
			return 0, 0, false, err
		}
	}
	return int64(len(old)), last, seen == n && lastPublished < cutoff, nil
}

// refreshStats updates the pending gauges.
func (r *Relay) refreshStats(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	var count, oldest, inFlight, oldestInFlight int64
	if err := r.db.QueryRowContext(sctx, pendingStatsSQL).Scan(&count, &oldest, &inFlight, &oldestInFlight); err != nil {
		if ctx.Err() == nil {
			r.m.dbFailed("stats")
			r.log.Warn("outbox stats failed", "error", err)
		}
		return
	}
	if inFlight > 0 && (count == 0 || oldestInFlight < oldest) {
		oldest = oldestInFlight
	}
	count += inFlight
	var age time.Duration
	if count > 0 {
		age = max(0, r.cfg.Now().Sub(time.UnixMilli(oldest)))
	}
	r.m.setPending(count, age)
}

// expireInFlight sets the rows of in-flight groups older than
// InFlightGrace back to pending, so that this pass publishes them: the
// fast path that wrote them did not settle them (its process stopped, or
// it could not reach MySQL). A group a fast path is settling right now is
// locked and skipped.
func (r *Relay) expireInFlight(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	err := func() error {
		cutoff := r.cfg.Now().Add(-r.cfg.InFlightGrace).UnixMilli()
		tx, err := r.db.BeginTx(ctx, txOptions)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer rollback(tx)
		rs, err := tx.QueryContext(ctx, staleInFlightSQL, cutoff)
		if err != nil {
			return err
		}
		var groups []voiceroom.OutboxGroup
		for rs.Next() {
			var g voiceroom.OutboxGroup
			if err := rs.Scan(&g.FirstID, &g.LastID); err != nil {
				rs.Close()
				return err
			}
			groups = append(groups, g)
		}
		rs.Close()
		if err := rs.Err(); err != nil || len(groups) == 0 {
			return err
		}
		rows := 0
		for _, g := range groups {
			res, err := tx.ExecContext(ctx, rependInFlightSQL, g.FirstID, g.LastID)
			if err != nil {
				return fmt.Errorf("set in-flight rows pending: %w", err)
			}
			k, _ := res.RowsAffected()
			rows += int(k)
		}
		st, err := r.stmts.get(ctx, tx, releaseInFlightSQL(len(groups)))
		if err != nil {
			return err
		}
		ids := make([]any, len(groups))
		for i, g := range groups {
			ids[i] = g.FirstID
		}
		if _, err := st.ExecContext(ctx, ids...); err != nil {
			return fmt.Errorf("delete in-flight rows: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		r.log.Warn("outbox in-flight groups older than the grace set back to pending; this pass publishes them (a fast path did not settle them: its process stopped?)",
			"groups", len(groups), "rows", rows, "in_flight_grace", r.cfg.InFlightGrace)
		return nil
	}()
	if err != nil && ctx.Err() == nil {
		r.m.dbFailed("in_flight")
		r.log.Warn("outbox in-flight expiry failed; retrying next pass", "error", err)
	}
}

// unsentRow is a row not yet in the stream: marked pending, or else in an
// in-flight group.
type unsentRow struct {
	id      int64
	pending bool
}

// unsentBefore returns, for each of rooms (the batch's rooms that
// pass.unsure named) with an event not yet in the stream that this pass did
// not claim, the lowest such row: the batch's later rows of the room wait
// for it. Such a row is in a fast path's in-flight group; or was set back
// to pending after this pass's claims went past it (it was in flight
// then); or is claimed by another relay. It reads each room's rows from
// the version before the batch's first of the room to its last: a room's
// events reach the stream in order, so if an earlier one is still out, so
// is the one just before the batch's. A failed read (counted in the MySQL
// failures metric) returns the error: the caller publishes nothing then.
//
// It reads in the batch's own transaction (tx, READ COMMITTED: it sees
// what is committed now): on the pool, it waited for a connection while
// the pipeline's batches held them, and timed out.
func (r *Relay) unsentBefore(ctx context.Context, tx *sql.Tx, p *pass, rows []voiceroom.OutboxRow, rooms map[voiceroom.RoomKey]struct{}) (map[voiceroom.RoomKey]unsentRow, error) {
	if len(rooms) == 0 {
		return nil, nil
	}
	type window struct{ from, to int64 }
	windows := make(map[voiceroom.RoomKey]window, len(rooms))
	keys := make([]voiceroom.RoomKey, 0, len(rooms))
	for _, rw := range rows {
		key := voiceroom.RoomKey{AppCode: rw.AppCode, RoomID: rw.RoomID}
		if _, ok := rooms[key]; !ok {
			continue
		}
		w, ok := windows[key]
		if !ok {
			keys = append(keys, key)
			w = window{from: rw.RoomVersion - 1, to: rw.RoomVersion}
		}
		w.from, w.to = min(w.from, rw.RoomVersion-1), max(w.to, rw.RoomVersion)
		windows[key] = w
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StatementTimeout)
	defer cancel()
	out := make(map[voiceroom.RoomKey]unsentRow)
	err := chunks(keys, unsentRoomsChunk, func(c []voiceroom.RoomKey) error {
		args := make([]any, 0, 4*unsentRoomsChunk)
		for i := range unsentRoomsChunk {
			k := c[min(i, len(c)-1)]
			w := windows[k]
			args = append(args, k.AppCode, k.RoomID, w.from, w.to)
		}
		st, err := r.stmts.get(ctx, tx, unsentRowsSQL(unsentRoomsChunk))
		if err != nil {
			return err
		}
		rs, err := st.QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var k voiceroom.RoomKey
			var u unsentRow
			var status string
			if err := rs.Scan(&k.AppCode, &k.RoomID, &u.id, &status); err != nil {
				return err
			}
			if p.wasClaimed(u.id) {
				continue
			}
			u.pending = status == "pending"
			if first, ok := out[k]; !ok || u.id < first.id {
				out[k] = u
			}
		}
		return rs.Err() // cut short, the map would miss rooms
	})
	if err != nil {
		r.m.dbFailed("unsent")
		return nil, err
	}
	return out, nil
}
