package activity

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"voiceroom/bus"
	"voiceroom/mysqldb"
	"voiceroom/roomevent"
	"voiceroom/roomranks"
)

// Scorer is the durable consumer of ROOM_EVENTS that scores the apps'
// open activities (see doc.go, "Scoring"): each event, for each activity
// it counts for, in one MySQL transaction with its activity_seen row;
// then the boards in Redis. N Scorers on one durable share the work.
type Scorer struct {
	db       *sql.DB
	boards   *boardCache
	cal      *roomranks.Calendar
	cfg      ScoreConfig
	log      *slog.Logger
	metrics  *ScoreMetrics
	consumer *bus.Consumer

	mu    sync.Mutex
	open  *openList
	loads singleflight.Group
}

// openList is the open activities by app, as read at loadedAtMs.
type openList struct {
	loadedAtMs int64
	byApp      map[string][]Activity
}

// NewScorer returns a Scorer reading the durable run.Durable (normally
// bus.DurableActivity) of js. rdb may be nil (no boards in Redis: reads
// go to MySQL); busMetrics and m may be nil.
func NewScorer(db *sql.DB, rdb redis.UniversalClient, js jetstream.JetStream, run bus.ConsumerRunConfig, busMetrics *bus.Metrics,
	cfg ScoreConfig, log *slog.Logger, m *ScoreMetrics) (*Scorer, error) {
	s, err := newScorer(db, rdb, cfg, log, m)
	if err != nil {
		return nil, err
	}
	if js == nil {
		return nil, fmt.Errorf("%w: the activity scorer needs jetstream", ErrInvalidScoreConfig)
	}
	if s.consumer, err = bus.NewBatchConsumer(js, run, s.handle, log, busMetrics); err != nil {
		return nil, err
	}
	return s, nil
}

func newScorer(db *sql.DB, rdb redis.UniversalClient, cfg ScoreConfig, log *slog.Logger, m *ScoreMetrics) (*Scorer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, fmt.Errorf("%w: the activity scorer needs a database", ErrInvalidScoreConfig)
	}
	cal, err := roomranks.NewCalendar(cfg.TimeZones)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Scorer{db: db, boards: newBoardCache(rdb, cfg), cal: cal, cfg: cfg, log: log.With("component", "activity"), metrics: m}, nil
}

// Running is closed once the scorer consumes.
func (s *Scorer) Running() <-chan struct{} { return s.consumer.Running() }

// Run consumes until ctx ends, then lets the events in flight finish
// within the consumer's ShutdownTimeout. It returns an error only when it
// cannot start.
func (s *Scorer) Run(ctx context.Context) error { return s.consumer.Run(ctx) }

// handle scores a batch in one MySQL transaction (score_batch.go): its
// events in the batch's order (a room's events in stream order), each
// activity_seen row and score row written in key order, so that N
// scorers on one durable do not deadlock. A batch that fails is scored
// again one event per transaction, so that one event that cannot be
// written fails alone; either way nothing is half-counted (a transaction
// commits whole or not at all).
func (s *Scorer) handle(ctx context.Context, ds []bus.Delivery) []error {
	errs := make([]error, len(ds))
	failed := false
	evs := make([]pendingEvent, 0, len(ds))
	idx := make([]int, 0, len(ds))
	for i, d := range ds {
		pe, ok, err := s.prepare(ctx, d.Envelope, d.StreamSeq)
		if err != nil {
			errs[i], failed = err, true
			continue
		}
		if ok {
			evs, idx = append(evs, pe), append(idx, i)
		}
	}
	if len(evs) > 0 {
		err := s.scoreEvents(ctx, evs)
		switch {
		case err == nil:
			s.metrics.batch(batchCommitted)
		case len(evs) == 1 || errors.Is(err, errBoardWrite):
			s.metrics.batch(batchFailed)
			// Committed (a board write failed) or alone: every event
			// of it comes again and counts nothing twice.
			for _, i := range idx {
				errs[i] = err
			}
			failed = true
		default:
			s.metrics.batch(batchSplit)
			s.log.Warn("activity: batch failed, scoring its events one per transaction", "events", len(evs), "error", err)
			for j, pe := range evs {
				if errs[idx[j]] = s.scoreEvents(ctx, []pendingEvent{pe}); errs[idx[j]] != nil {
					failed = true
				}
			}
		}
	}
	if !failed {
		return nil
	}
	return errs
}

// Score scores one event for every open activity of its app that counts
// it, as the live durable does with an event read after every seam (of
// an unknown stream sequence: see prepare). A payload that cannot be read
// is permanent (dead-lettered); MySQL and Redis failures are retried:
// the activity_seen rows make a retry count nothing twice, and it writes
// the boards again.
func (s *Scorer) Score(ctx context.Context, env bus.Envelope) error {
	pe, ok, err := s.prepare(ctx, env, math.MaxUint64)
	if err != nil || !ok {
		return err
	}
	return s.scoreEvents(ctx, []pendingEvent{pe})
}

// pendingEvent is an event of a batch and the activities it counts for.
type pendingEvent struct {
	ev   event
	work []Activity
}

// prepare reads env, stored at stream sequence seq, and the open
// activities of its app that count it and that the live durable scores
// at seq: not one being read back, and one that joined only above its
// live_from_seq (Activity.liveScores; the read back scores the rest).
// ok is false when none does. The activities' state comes from the
// cached list (read after the event was committed, see activities), not
// from a lock of their rows: settlement freezes an activity only once
// the durable has acked every event that can count for it (settle.go,
// "the freeze fence"), and scoreEvents drops the activities cancelled
// since the list was read (stillOpen).
func (s *Scorer) prepare(ctx context.Context, env bus.Envelope, seq uint64) (pendingEvent, bool, error) {
	if !scored(env.EventType) {
		return pendingEvent{}, false, nil
	}
	acts, err := s.activities(ctx, env.AppCode, env.OccurredAtMs)
	if err != nil {
		return pendingEvent{}, false, err
	}
	if len(acts) == 0 {
		s.metrics.skip(skipNoActivity)
		return pendingEvent{}, false, nil
	}
	ev, err := decodeEvent(env)
	if err != nil {
		return pendingEvent{}, false, bus.Permanent(err)
	}
	var work []Activity
	for _, a := range acts {
		if a.liveScores(seq) && ev.countsFor(a) {
			work = append(work, a)
		}
	}
	if len(work) == 0 {
		s.metrics.skip(skipNoMatch)
		return pendingEvent{}, false, nil
	}
	return pendingEvent{ev: ev, work: work}, true, nil
}

// errBoardWrite marks a batch committed whose board writes failed.
var errBoardWrite = errors.New("board write")

// scoreEvents scores evs in one transaction, then writes the boards,
// for the activities of their work still open (stillOpen).
func (s *Scorer) scoreEvents(ctx context.Context, evs []pendingEvent) error {
	wctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	open, closed, err := stillOpen(wctx, s.db, evs)
	if err != nil {
		return fmt.Errorf("%s: read the activities' state: %w", describe(evs), err)
	}
	for range closed {
		s.metrics.event(resultClosed)
	}
	if len(open) == 0 {
		return nil
	}
	evs = open
	var raised []raisedEntry
	var results []string
	attempt := 0
	err = mysqldb.Update(wctx, s.db, func(tx *sql.Tx) error {
		if attempt++; attempt > 1 {
			s.metrics.retried()
		}
		var err error
		raised, results, err = s.batchTx(wctx, tx, evs, s.cfg.Now().UnixMilli())
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: score: %w", describe(evs), err)
	}
	scoredAny := false
	for _, res := range results {
		s.metrics.event(res)
		scoredAny = scoredAny || res == resultScored
	}
	if scoredAny {
		now := s.cfg.Now().UnixMilli()
		for _, pe := range evs {
			s.metrics.scoredAfter(float64(now-pe.ev.env.OccurredAtMs) / 1000)
		}
	}
	if err := s.writeBoards(wctx, coalesce(raised)); err != nil {
		s.metrics.redisFailed(opWrite)
		s.log.Warn("activity: board write failed, retrying the events", "events", len(evs), "error", err)
		return fmt.Errorf("%s: %w: %w", describe(evs), errBoardWrite, err)
	}
	return nil
}

// stillOpen returns evs with the activities that are no longer open
// (cancelled, frozen or settled) taken out of their work, and without the
// events left with none; closed counts the (event, activity) pairs taken
// out.
//
// The work comes from the cached list (activities), which may have been
// read before a cancel committed. This read, one per transaction by
// primary key and without a lock, is made after the events were
// delivered, so after they occurred: an activity cancelled before any of
// them occurred is seen cancelled, and no score, seat or payout row is
// written for it by an event that occurred after its cancel committed.
// (A cancel that commits after this read, while the transaction runs,
// leaves only rows of events that occurred before it; settlement pays
// none of them.) It is read before the transaction, not inside it: as its
// first consistent read it would fix the transaction's snapshot before the
// locks it waits for. (The batch's reads that must see rows other scorers
// committed meanwhile, such as seatUsers, are locking reads.)
//
// It does not replace settle now's margin (SettleNowMargin, settle.go):
// a settle now keeps the activity open and moves its end, and one that
// commits after this read, while the transaction runs, would still be
// scored with the old end; the margin keeps every such event before the
// new end. A cancel needs no margin: what is scored then is never paid.
func stillOpen(ctx context.Context, db *sql.DB, evs []pendingEvent) (open []pendingEvent, closed int, err error) {
	var ids []int64
	for _, pe := range evs {
		for _, a := range pe.work {
			ids = append(ids, a.ID)
		}
	}
	if len(ids) == 0 {
		return evs, 0, nil
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	args := make([]any, 0, len(ids)+1)
	args = append(args, StateOpen)
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := db.QueryContext(ctx, `SELECT activity_id FROM activities WHERE settle_state = ? AND activity_id IN (`+
		mysqldb.Placeholders(len(ids))+`)`, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	isOpen := make(map[int64]bool, len(ids))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, 0, err
		}
		isOpen[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if len(isOpen) == len(ids) {
		return evs, 0, nil
	}
	open = make([]pendingEvent, 0, len(evs))
	for _, pe := range evs {
		var work []Activity
		for _, a := range pe.work {
			if isOpen[a.ID] {
				work = append(work, a)
			} else {
				closed++
			}
		}
		if len(work) > 0 {
			open = append(open, pendingEvent{ev: pe.ev, work: work})
		}
	}
	return open, closed, nil
}

// describe names evs in errors: the event, or the first of a batch.
func describe(evs []pendingEvent) string {
	env := evs[0].ev.env
	if len(evs) == 1 {
		return fmt.Sprintf("event %s (%s)", env.EventID, env.EventType)
	}
	return fmt.Sprintf("batch of %d events from %s (%s)", len(evs), env.EventID, env.EventType)
}

// scored reports whether any metric reads events of type t.
func scored(t string) bool {
	switch t {
	case roomevent.RoomGiftSent, roomevent.RoomMicUp, roomevent.RoomMicDown, roomevent.RoomMicChanged,
		roomevent.RoomUserLeft, roomevent.RoomUserKicked, roomevent.RoomClosed, roomevent.RoomBanned:
		return true
	}
	return false
}

// event is what the scoring reads of an envelope.
type event struct {
	env    bus.Envelope
	card   roomevent.Card
	gift   roomevent.GiftSent
	micOp  micOp
	userID int64 // the speaker of a mic event
	// seatEnd: a micClose that may end a seat (RoomMicDown,
	// RoomUserKicked, RoomUserLeft from a seat; not a listener's leave).
	seatEnd bool
}

// micOp is what a mic event does to a speaker's session.
type micOp int

const (
	micNone      micOp = iota
	micOpen            // RoomMicUp
	micClose           // RoomMicDown, RoomUserLeft, RoomUserKicked
	micReopen          // RoomMicChanged: the seat ends, the next one starts
	micCloseRoom       // RoomClosed, RoomBanned: every session of the room
)

// decodeEvent reads env's card and body.
func decodeEvent(env bus.Envelope) (event, error) {
	ev := event{env: env}
	card, err := roomevent.DecodeCard(env.Payload)
	if err != nil {
		return ev, fmt.Errorf("event %s (%s): %w", env.EventID, env.EventType, err)
	}
	ev.card = card
	var body any
	var user *int64
	var leftSeat *int // a RoomUserLeft's seat: -1 for a listener
	switch env.EventType {
	case roomevent.RoomGiftSent:
		body = &ev.gift
	case roomevent.RoomMicUp, roomevent.RoomMicDown:
		var b roomevent.MicMoved
		body, ev.micOp, ev.seatEnd = &b, micClose, true
		if env.EventType == roomevent.RoomMicUp {
			ev.micOp, ev.seatEnd = micOpen, false
		}
		user = &b.UserID
	case roomevent.RoomMicChanged:
		var b roomevent.MicChanged
		body, ev.micOp = &b, micReopen
		user = &b.UserID
	case roomevent.RoomUserLeft:
		var b roomevent.UserLeft
		body, ev.micOp = &b, micClose
		user, leftSeat = &b.UserID, &b.SeatIndex
	case roomevent.RoomUserKicked:
		var b roomevent.UserKicked
		body, ev.micOp, ev.seatEnd = &b, micClose, true
		user = &b.UserID
	case roomevent.RoomClosed, roomevent.RoomBanned:
		ev.micOp = micCloseRoom
		return ev, nil
	}
	if err := json.Unmarshal(env.Payload, body); err != nil {
		return ev, fmt.Errorf("event %s (%s): decode: %w", env.EventID, env.EventType, err)
	}
	if user != nil {
		ev.userID = *user
	}
	if leftSeat != nil {
		ev.seatEnd = *leftSeat >= 0
	}
	if env.EventType == roomevent.RoomGiftSent && (ev.gift.SenderUserID <= 0 || ev.gift.ReceiverUserID <= 0 || ev.gift.Value < 0) {
		return ev, fmt.Errorf("event %s (%s): a gift needs a sender, a receiver and a value of 0 or more", env.EventID, env.EventType)
	}
	return ev, nil
}

// countsFor reports whether ev may change a's scores: its metric reads
// ev, and ev passes a's filters and window. A mic session's end counts
// for every mic activity (the session exists only if its start counted).
func (ev event) countsFor(a Activity) bool {
	at := ev.env.OccurredAtMs
	if a.Metric == MicSeconds {
		if ev.micOp == micNone {
			return false
		}
		if ev.micOp == micOpen || ev.micOp == micReopen {
			if at >= a.EndsAtMs && ev.micOp == micOpen {
				return false
			}
			if ev.micOp == micOpen && !inRegions(a, ev.card.VisibleRegionID) {
				return false
			}
		}
		return true
	}
	if ev.env.EventType != roomevent.RoomGiftSent || at < a.StartsAtMs || at >= a.EndsAtMs {
		return false
	}
	if a.GiftIDs != nil && !slices.Contains(a.GiftIDs, ev.gift.GiftID) {
		return false
	}
	if !inRegions(a, ev.card.VisibleRegionID) {
		return false
	}
	_, v := ev.giftScore(a)
	return v > 0
}

// inRegions reports whether a room of visible region r counts for a.
func inRegions(a Activity, r int64) bool {
	return a.RegionIDs == nil || slices.Contains(a.RegionIDs, r)
}

// giftScore is the subject a gift scores for under a's metric, and how
// much.
func (ev event) giftScore(a Activity) (string, int64) {
	g := ev.gift
	switch a.Metric {
	case GiftValueSent:
		return strconv.FormatInt(g.SenderUserID, 10), g.Value
	case GiftValueReceived:
		return strconv.FormatInt(g.ReceiverUserID, 10), g.Value
	case RoomGiftValue:
		return ev.env.RoomID, g.Value
	case GiftCount:
		return strconv.FormatInt(g.SenderUserID, 10), max(g.Count, 1)
	}
	return "", 0
}

// raisedEntry is a board entry a transaction raised: written to Redis
// after the commit.
type raisedEntry struct {
	activityID, periodStartMs, periodEndMs int64
	entry                                  Entry
	// lowered: the entry went down (a mic_seconds correction); the
	// board, which Redis only raises, is dropped and rebuilt from MySQL.
	lowered bool
}

// countTx scores ev for a inside tx, a checked open by the caller (the
// live durable's list, or the read back's fence), one event at a time:
// the score rows go to w, written by applyTx at the end of the
// transaction. ev counts only if it is not seen yet for a.
func (s *Scorer) countTx(ctx context.Context, tx *sql.Tx, a Activity, ev event, now int64, w *txWork) (string, error) {
	if a.Metric == MicSeconds {
		return s.micTx(ctx, tx, a, ev, now, w)
	}
	if fresh, err := markSeenTx(ctx, tx, a, ev); err != nil {
		return "", err
	} else if !fresh {
		return s.duplicateTx(ctx, tx, a, ev, w)
	}
	w.addGift(s, a, ev)
	return resultScored, nil
}

// markSeenTx writes ev's activity_seen row for a; fresh is false when it
// was there already (ev counted before: count nothing).
func markSeenTx(ctx context.Context, tx *sql.Tx, a Activity, ev event) (fresh bool, err error) {
	res, err := tx.ExecContext(ctx, `INSERT IGNORE INTO activity_seen (activity_id, event_id) VALUES (?, ?)`, a.ID, ev.env.EventID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// duplicateTx answers an event counted already. Its board entry is read
// again, so that a retry after a failed board write writes it.
func (s *Scorer) duplicateTx(ctx context.Context, tx *sql.Tx, a Activity, ev event, w *txWork) (string, error) {
	subject, at := strconv.FormatInt(ev.userID, 10), min(max(ev.env.OccurredAtMs, a.StartsAtMs), a.EndsAtMs-1)
	if a.Metric != MicSeconds {
		subject, _ = ev.giftScore(a)
	}
	ps, pe := s.period(a, at)
	var e Entry
	err := tx.QueryRowContext(ctx, `SELECT subject, score, reached_at_ms FROM activity_scores WHERE activity_id = ? AND period_start_ms = ? AND subject = ?`,
		a.ID, ps, subject).Scan(&e.Subject, &e.Score, &e.ReachedAtMs)
	if err == sql.ErrNoRows {
		return resultDuplicate, nil
	}
	if err != nil {
		return "", err
	}
	w.raised = append(w.raised, raisedEntry{activityID: a.ID, periodStartMs: ps, periodEndMs: pe, entry: e})
	return resultDuplicate, nil
}

// period is the period of a that holds atMs: [start, end).
func (s *Scorer) period(a Activity, atMs int64) (int64, int64) {
	return periodOf(s.cal, a, atMs)
}

// periodOf is the period of a that holds atMs: the app's day or week for
// a task of such a period, else the window.
func periodOf(cal *roomranks.Calendar, a Activity, atMs int64) (int64, int64) {
	if a.Kind == Task && (a.Period == Day || a.Period == Week) {
		p := roomranks.Day
		if a.Period == Week {
			p = roomranks.Week
		}
		w := cal.Window(a.AppCode, p, atMs)
		return w.StartMs, w.EndMs
	}
	return a.StartsAtMs, a.EndsAtMs
}

// writeBoards writes coalesced entries (grouped by board, see coalesce)
// into Redis, one call per board; a board with an entry lowered is
// dropped instead (Redis only raises; it is rebuilt from MySQL when read).
// Nothing without Redis.
func (s *Scorer) writeBoards(ctx context.Context, raised []raisedEntry) error {
	if s.boards == nil {
		return nil
	}
	for i := 0; i < len(raised); {
		j, lowered := i, false
		entries := make([]Entry, 0, 1)
		for ; j < len(raised) && raised[j].activityID == raised[i].activityID && raised[j].periodStartMs == raised[i].periodStartMs; j++ {
			entries = append(entries, raised[j].entry)
			lowered = lowered || raised[j].lowered
		}
		r := raised[i]
		var err error
		if lowered {
			err = s.boards.drop(ctx, r.activityID, r.periodStartMs)
		} else {
			err = s.boards.raise(ctx, r.activityID, r.periodStartMs, r.periodEndMs, entries, false)
		}
		if err != nil {
			return err
		}
		i = j
	}
	return nil
}

// activities returns the open activities of app, read again when the
// list is older than the event at atMs (an activity created before the
// event is always in it) or than Refresh.
func (s *Scorer) activities(ctx context.Context, app string, atMs int64) ([]Activity, error) {
	s.mu.Lock()
	l := s.open
	s.mu.Unlock()
	now := s.cfg.Now().UnixMilli()
	if l != nil && l.loadedAtMs > atMs && now-l.loadedAtMs < s.cfg.Refresh.Milliseconds() {
		return l.byApp[app], nil
	}
	v, err, _ := s.loads.Do("open", func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.WriteTimeout)
		defer cancel()
		at := s.cfg.Now().UnixMilli()
		byApp, err := loadOpen(lctx, s.db)
		if err != nil {
			return nil, err
		}
		l := &openList{loadedAtMs: at, byApp: byApp}
		s.mu.Lock()
		s.open = l
		s.mu.Unlock()
		return l, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read open activities: %w", err)
	}
	l = v.(*openList)
	if l.loadedAtMs <= atMs {
		// Shared with a load that started before this event was
		// committed: read again.
		if byApp, err := loadOpen(ctx, s.db); err != nil {
			return nil, fmt.Errorf("read open activities: %w", err)
		} else {
			return byApp[app], nil
		}
	}
	return l.byApp[app], nil
}

// loadOpen reads the activities that may still score (settlement state
// open: not frozen, settled or cancelled), by app.
func loadOpen(ctx context.Context, db *sql.DB) (map[string][]Activity, error) {
	all, err := NewStore(db, nil).Open(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]Activity{}
	for _, a := range all {
		if a.SettleState == StateOpen {
			out[a.AppCode] = append(out[a.AppCode], a)
		}
	}
	return out, nil
}
