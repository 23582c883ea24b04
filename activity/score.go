package activity

import (
	"context"
	"database/sql"
	"encoding/json"
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

// handle scores a batch, one event after the other (the batch holds a
// room's events in stream order): one transaction per event.
func (s *Scorer) handle(ctx context.Context, ds []bus.Delivery) []error {
	var errs []error
	for i, d := range ds {
		if err := s.score(ctx, d.Envelope, d.StreamSeq); err != nil {
			if errs == nil {
				errs = make([]error, len(ds))
			}
			errs[i] = err
		}
	}
	return errs
}

// Score scores one event for every open activity of its app that counts
// it, as the live durable does with an event read after every seam (of
// an unknown stream sequence: see score). A payload that cannot be read
// is permanent (dead-lettered); MySQL and Redis failures are retried:
// the activity_seen rows make a retry count nothing twice, and it writes
// the boards again.
func (s *Scorer) Score(ctx context.Context, env bus.Envelope) error {
	return s.score(ctx, env, math.MaxUint64)
}

// score scores env, stored at stream sequence seq, for the open
// activities of its app that count it and that the live durable scores
// at seq: not one being read back, and one that joined only above its
// live_from_seq (Activity.liveScores; the read back scores the rest).
func (s *Scorer) score(ctx context.Context, env bus.Envelope, seq uint64) error {
	if !scored(env.EventType) {
		return nil
	}
	acts, err := s.activities(ctx, env.AppCode, env.OccurredAtMs)
	if err != nil {
		return err
	}
	if len(acts) == 0 {
		s.metrics.skip(skipNoActivity)
		return nil
	}
	ev, err := decodeEvent(env)
	if err != nil {
		return bus.Permanent(err)
	}
	var work []Activity
	for _, a := range acts {
		if a.liveScores(seq) && ev.countsFor(a) {
			work = append(work, a)
		}
	}
	if len(work) == 0 {
		s.metrics.skip(skipNoMatch)
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	var raised []raisedEntry
	var results []string
	err = mysqldb.Update(wctx, s.db, func(tx *sql.Tx) error {
		raised, results = raised[:0], results[:0]
		now := s.cfg.Now().UnixMilli()
		for _, a := range work {
			res, r, err := s.scoreTx(wctx, tx, a, ev, now)
			if err != nil {
				return err
			}
			results = append(results, res)
			raised = append(raised, r...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("event %s (%s): score: %w", env.EventID, env.EventType, err)
	}
	scoredAny := false
	for _, res := range results {
		s.metrics.event(res)
		scoredAny = scoredAny || res == resultScored
	}
	if scoredAny {
		s.metrics.scoredAfter(float64(s.cfg.Now().UnixMilli()-env.OccurredAtMs) / 1000)
	}
	if err := s.writeBoards(wctx, raised); err != nil {
		s.metrics.redisFailed(opWrite)
		s.log.Warn("activity: board write failed, retrying the event", "event_id", env.EventID, "error", err)
		return fmt.Errorf("event %s (%s): board write: %w", env.EventID, env.EventType, err)
	}
	return nil
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

// scoreTx scores ev for a inside tx: the activity must still be open,
// and ev must not be seen yet for a.
func (s *Scorer) scoreTx(ctx context.Context, tx *sql.Tx, a Activity, ev event, now int64) (string, []raisedEntry, error) {
	var state, status string
	err := tx.QueryRowContext(ctx, `SELECT settle_state, status FROM activities WHERE activity_id = ? LOCK IN SHARE MODE`, a.ID).Scan(&state, &status)
	if err == sql.ErrNoRows || (err == nil && (SettleState(state) != StateOpen || Status(status) == Cancelled)) {
		return resultClosed, nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	return s.countTx(ctx, tx, a, ev, now)
}

// countTx scores ev for a inside tx, a checked open by the caller (the
// live durable's scoreTx, or the read back's fence): the per-event code
// both share. ev counts only if it is not seen yet for a.
func (s *Scorer) countTx(ctx context.Context, tx *sql.Tx, a Activity, ev event, now int64) (string, []raisedEntry, error) {
	if a.Metric == MicSeconds {
		return s.micTx(ctx, tx, a, ev, now)
	}
	if fresh, err := markSeenTx(ctx, tx, a, ev); err != nil {
		return "", nil, err
	} else if !fresh {
		return s.duplicateTx(ctx, tx, a, ev)
	}
	subject, v := ev.giftScore(a)
	r, err := s.addTx(ctx, tx, a, ev.env.AppCode, subject, ev.card.OwnerUserID, ev.env.OccurredAtMs, v, ev.env.OccurredAtMs, now)
	if err != nil {
		return "", nil, err
	}
	return resultScored, []raisedEntry{r}, nil
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
func (s *Scorer) duplicateTx(ctx context.Context, tx *sql.Tx, a Activity, ev event) (string, []raisedEntry, error) {
	subject, at := strconv.FormatInt(ev.userID, 10), min(max(ev.env.OccurredAtMs, a.StartsAtMs), a.EndsAtMs-1)
	if a.Metric != MicSeconds {
		subject, _ = ev.giftScore(a)
	}
	ps, pe := s.period(a, at)
	var e Entry
	err := tx.QueryRowContext(ctx, `SELECT subject, score, reached_at_ms FROM activity_scores WHERE activity_id = ? AND period_start_ms = ? AND subject = ?`,
		a.ID, ps, subject).Scan(&e.Subject, &e.Score, &e.ReachedAtMs)
	if err == sql.ErrNoRows {
		return resultDuplicate, nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	return resultDuplicate, []raisedEntry{{activityID: a.ID, periodStartMs: ps, periodEndMs: pe, entry: e}}, nil
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

// addTx adds v (> 0) to subject's score in the period of a holding atMs,
// reached at reachedMs, and for a task whose target the score reaches
// now, writes its payout (to ownerID for a room's score).
func (s *Scorer) addTx(ctx context.Context, tx *sql.Tx, a Activity, app, subject string, ownerID, atMs, v, reachedMs, now int64) (raisedEntry, error) {
	ps, pe := s.period(a, atMs)
	var old, oldReached int64
	err := tx.QueryRowContext(ctx, `SELECT score, reached_at_ms FROM activity_scores
		WHERE activity_id = ? AND period_start_ms = ? AND subject = ? FOR UPDATE`, a.ID, ps, subject).Scan(&old, &oldReached)
	switch {
	case err == sql.ErrNoRows:
		old, oldReached = 0, reachedMs
		if _, err := tx.ExecContext(ctx, `INSERT INTO activity_scores (activity_id, period_start_ms, subject, score, reached_at_ms, updated_at_ms)
			VALUES (?, ?, ?, ?, ?, ?)`, a.ID, ps, subject, v, reachedMs, now); err != nil {
			return raisedEntry{}, err
		}
	case err != nil:
		return raisedEntry{}, err
	default:
		if _, err := tx.ExecContext(ctx, `UPDATE activity_scores SET score = score + ?, reached_at_ms = GREATEST(reached_at_ms, ?), updated_at_ms = ?
			WHERE activity_id = ? AND period_start_ms = ? AND subject = ?`, v, reachedMs, now, a.ID, ps, subject); err != nil {
			return raisedEntry{}, err
		}
	}
	score, reached := old+v, max(oldReached, reachedMs)
	if a.Kind == Task && a.Target > 0 && old < a.Target && score >= a.Target {
		user := ownerID
		if !a.ByRoom() {
			user, _ = strconv.ParseInt(subject, 10, 64)
		}
		if user > 0 {
			if _, err := tx.ExecContext(ctx, `INSERT IGNORE INTO activity_payouts
				(activity_id, reason, period_start_ms, user_id, app_code, subject, rank_no, score, coins, entry_key, created_at_ms)
				VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)`,
				a.ID, ReasonTask, ps, user, app, subject, score, a.RewardCoins, EntryKey(a.ID, ReasonTask, ps, user), now); err != nil {
				return raisedEntry{}, err
			}
		} else {
			s.log.Warn("activity: task reached by a room without an owner: nothing to pay", "activity_id", a.ID, "subject", subject)
		}
	}
	return raisedEntry{activityID: a.ID, periodStartMs: ps, periodEndMs: pe, entry: Entry{Subject: subject, Score: score, ReachedAtMs: reached}}, nil
}

// writeBoards writes the raised entries into Redis (none without Redis).
func (s *Scorer) writeBoards(ctx context.Context, raised []raisedEntry) error {
	if s.boards == nil {
		return nil
	}
	for _, r := range raised {
		if r.lowered {
			if err := s.boards.drop(ctx, r.activityID, r.periodStartMs); err != nil {
				return err
			}
			continue
		}
		if err := s.boards.raise(ctx, r.activityID, r.periodStartMs, r.periodEndMs, []Entry{r.entry}, false); err != nil {
			return err
		}
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
