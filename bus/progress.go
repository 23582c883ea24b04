package bus

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/roomevent"
)

// DurableProgress answers "has this durable handled every event of an app
// committed before T": settlement (an activity's, a PK battle's) waits on
// it so that a relay or consumer backlog at the deadline is not cut off.
// It reads the outbox and the durable's ack floor. An event committed at
// or before atMs is, at any moment, in the outbox (pending, or in a group
// the fast path is publishing) or in ROOM_EVENTS. So, in two steps:
//
//  1. mark: the outbox holds no pending row of the app created at or
//     before atMs and no in-flight group created then; every such event
//     was then stored in the stream before the mark's time M. Rows of the
//     pseudo rooms (activity-<id>, pk-<battle_id>: settlements' own
//     results, which no settlement waits for) are left out, so a busy
//     app's results being published do not hold another settlement back;
//  2. later: the durable has no message pending, or the first message it
//     has not acked (its ack floor + 1) was stored after M; every message
//     stored before M, so every such event, has been acked, that is
//     scored.
//
// The mark is kept in memory (per app and time); a process that takes an
// activity over makes its own. Under steady load the first unacked
// message is always a moment old, hence the two steps: it is compared
// with a mark taken a tick earlier, not with now.
type DurableProgress struct {
	db      *sql.DB
	stream  jetstream.Stream
	durable string
	now     func() time.Time

	mu    sync.Mutex
	marks map[progressKey]time.Time
}

type progressKey struct {
	app  string
	atMs int64
}

// NewDurableProgress returns the progress of durable, a consumer of
// stream (ROOM_EVENTS), with the outbox in db. now is the clock.
func NewDurableProgress(db *sql.DB, stream jetstream.Stream, durable string, now func() time.Time) *DurableProgress {
	return &DurableProgress{db: db, stream: stream, durable: durable, now: now, marks: map[progressKey]time.Time{}}
}

// Passed reports whether every event of appCode committed (its
// occurred_at_ms) at or before atMs, but the pseudo rooms' own, has been
// acked by the durable. A false answer is asked again later; an error too.
func (p *DurableProgress) Passed(ctx context.Context, appCode string, atMs int64) (bool, error) {
	k := progressKey{appCode, atMs}
	p.mu.Lock()
	mark, marked := p.marks[k]
	p.mu.Unlock()
	if !marked {
		at := p.now()
		clear, err := p.outboxClear(ctx, appCode, atMs)
		if err != nil || !clear {
			return false, err
		}
		p.mu.Lock()
		p.marks[k] = at
		p.mu.Unlock()
		mark = at
	}
	passed, err := p.durablePast(ctx, mark)
	if passed {
		p.mu.Lock()
		delete(p.marks, k)
		p.mu.Unlock()
	}
	return passed, err
}

// outboxClear reports whether the outbox holds nothing of appCode
// committed at or before atMs that the stream may not have yet.
func (p *DurableProgress) outboxClear(ctx context.Context, appCode string, atMs int64) (bool, error) {
	var one int
	err := p.db.QueryRowContext(ctx, `SELECT 1 FROM room_outbox WHERE status = 'pending' AND app_code = ? AND created_at_ms <= ?
		AND room_id NOT LIKE ? AND room_id NOT LIKE ? LIMIT 1`,
		appCode, atMs, roomevent.ActivityRoomIDPrefix+"%", roomevent.PKRoomIDPrefix+"%").Scan(&one)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("durable progress: pending outbox: %w", err)
	}
	// In-flight groups (the fast path publishing): short-lived, of any
	// app; one old enough to hold such an event makes us wait.
	err = p.db.QueryRowContext(ctx, `SELECT 1 FROM room_outbox_inflight WHERE created_at_ms <= ? LIMIT 1`, atMs).Scan(&one)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("durable progress: in-flight outbox: %w", err)
	}
	return true, nil
}

// durablePast reports whether the durable has acked every message the
// stream stored before mark.
func (p *DurableProgress) durablePast(ctx context.Context, mark time.Time) (bool, error) {
	cons, err := p.stream.Consumer(ctx, p.durable)
	if err != nil {
		return false, fmt.Errorf("durable progress: consumer %s: %w", p.durable, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("durable progress: consumer %s: %w", p.durable, err)
	}
	if info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0 {
		return true, nil // everything stored (before this read, so before mark) is acked
	}
	msg, err := p.stream.GetMsg(ctx, info.AckFloor.Stream+1)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil // deleted or not yet stored: ask again
	}
	if err != nil {
		return false, fmt.Errorf("durable progress: message %d: %w", info.AckFloor.Stream+1, err)
	}
	return msg.Time.After(mark), nil
}
