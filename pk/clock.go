package pk

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"voiceroom/apperr"
	"voiceroom/internal/every"
	"voiceroom/internal/rowlease"
	"voiceroom/mysqldb"
	"voiceroom/roomevent"
)

// ClockConfig configures a Clock.
type ClockConfig struct {
	// Owner names this process in pk_battles.clock_owner (1..64
	// characters). Required.
	Owner string
	// Lease is how long a battle stays with the clock that took it without
	// being renewed; another process's clock takes it over once it lapses.
	// Default 30s.
	Lease time.Duration
	// Tick is the pause between two rounds. Default 1s: a battle ends
	// within about a tick of its end (plus a lease when its clock's
	// process died).
	Tick time.Duration
	// Retention is how long a settled battle keeps its pk_seen rows and
	// every sender's total (pk_senders); then Prune deletes the first and
	// cuts the second to each side's top TopSenders, which GET shows for
	// good. Default 168h, ROOM_EVENTS' default max age: the horizon within
	// which an event may still be redelivered or replayed (though a gift
	// of a settled battle counts nothing, its pk_seen row read or not).
	Retention time.Duration
	// PruneEvery is the pause between two prunes. Default 1m.
	PruneEvery time.Duration
}

// WithDefaults returns c with zero fields defaulted.
func (c ClockConfig) WithDefaults() ClockConfig {
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.Tick == 0 {
		c.Tick = time.Second
	}
	if c.Retention == 0 {
		c.Retention = 168 * time.Hour
	}
	if c.PruneEvery == 0 {
		c.PruneEvery = time.Minute
	}
	return c
}

// Validate checks c (after WithDefaults) without changing it.
func (c ClockConfig) Validate() error {
	switch {
	case c.Retention < 0:
		return apperr.BadConfig("Retention", "pk clock: retention %s: must not be negative", c.Retention)
	case c.PruneEvery < 0:
		return apperr.BadConfig("PruneEvery", "pk clock: prune every %s: must not be negative", c.PruneEvery)
	}
	return nil
}

// Clock owns the battles' time: every Tick it expires lapsed
// invitations, ends the battles whose time is up or one of whose rooms
// closed or was banned, settling each once, and tells the rooms what they
// were not told yet. Any number of processes may run one; each battle is
// advanced by the one holding its lease.
type Clock struct {
	svc      *Service
	progress Progress
	cfg      ClockConfig
	lease    *rowlease.Holder // pk_battles.clock_owner, clock_lease_until_ms
}

// Progress says how far the scoring durable has got (bus.DurableProgress,
// on the durable pk): Passed reports whether every event of appCode
// committed at or before atMs has been scored.
type Progress interface {
	Passed(ctx context.Context, appCode string, atMs int64) (bool, error)
}

// NewClock returns the Clock of svc's battles. A battle whose time is up
// is settled once progress has passed its end, so that every gift of its
// window is in its scores (nil: at once, for a deployment without the
// scorer).
func NewClock(svc *Service, progress Progress, cfg ClockConfig) (*Clock, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if svc == nil {
		return nil, apperr.BadConfig("Service", "pk clock: service is required")
	}
	lease := rowlease.NewHolder(rowlease.Columns{Table: "pk_battles", Key: "battle_id", Owner: "clock_owner", Until: "clock_lease_until_ms"},
		cfg.Owner, cfg.Lease, svc.now)
	return &Clock{svc: svc, progress: progress, cfg: cfg, lease: lease}, nil
}

// Run advances the battles every Tick, and prunes the settled ones every
// PruneEvery, until ctx ends. Errors are logged; the next round tries
// again.
func (c *Clock) Run(ctx context.Context) error {
	var pruned time.Time
	every.Now(ctx, c.cfg.Tick, func() {
		if err := c.Round(ctx); err != nil && ctx.Err() == nil {
			c.svc.log.Warn("pk clock round failed", "err", err)
		}
		if now := c.svc.now(); now.Sub(pruned) >= c.cfg.PruneEvery {
			pruned = now
			if _, err := c.Prune(ctx); err != nil && ctx.Err() == nil {
				c.svc.log.Warn("pk clock: prune failed", "err", err)
			}
		}
	})
	return nil
}

// maxDue bounds the battles one round looks at.
const maxDue = 500

// Round runs one round over the battles with something due whose lease
// this process holds or can take. It returns the first error after trying
// every one.
func (c *Clock) Round(ctx context.Context) error {
	due, err := c.due(ctx)
	if err != nil {
		return err
	}
	var first error
	for _, d := range due {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := c.advance(ctx, d[0], d[1]); err != nil {
			c.svc.log.Warn("pk clock: battle not advanced", "app_code", d[0], "battle_id", d[1], "err", err)
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// due lists (app_code, battle_id) of the battles with something to do: an
// invitation past its expiry, a running battle past its end, not yet told
// to both rooms, or with a room no longer active, an ended battle not yet
// told to both rooms.
func (c *Clock) due(ctx context.Context) ([][2]string, error) {
	now := c.svc.now().UnixMilli()
	rows, err := c.svc.db.QueryContext(ctx, `SELECT app_code, battle_id FROM pk_battles WHERE status = 'pending' AND invite_expires_at_ms <= ?
		UNION SELECT app_code, battle_id FROM pk_battles WHERE status IN ('running', 'ending')
			AND (ends_at_ms <= ? OR notified & 3 <> 3 OR score_seq > told_seq)
		UNION SELECT b.app_code, b.battle_id FROM pk_battles b JOIN rooms r ON r.app_code = b.app_code
			AND r.room_id IN (b.room_id, b.opponent_room_id) WHERE b.status = 'running' AND r.status <> 'active'
		UNION SELECT app_code, battle_id FROM pk_battles WHERE status = 'ended' AND notified & 12 <> 12
		LIMIT ?`, now, now, maxDue)
	if err != nil {
		return nil, fmt.Errorf("pk clock: list due: %w", err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var d [2]string
		if err := rows.Scan(&d[0], &d[1]); err != nil {
			return nil, fmt.Errorf("pk clock: list due: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// takeLease takes (or renews) battleID's lease for this clock, when it is
// free, lapsed or ours, and reports whether it holds it.
func (c *Clock) takeLease(ctx context.Context, battleID string) (bool, error) {
	held, err := c.lease.Take(ctx, c.svc.db, battleID)
	if err != nil {
		return false, fmt.Errorf("pk battle %s: take lease: %w", battleID, err)
	}
	return held, nil
}

// advance does what is due for one battle, under its lease.
func (c *Clock) advance(ctx context.Context, app, battleID string) error {
	held, err := c.takeLease(ctx, battleID)
	if err != nil || !held {
		return err
	}
	s := c.svc
	b, err := readBattle(ctx, s.db, app, battleID, false)
	if err != nil {
		return fmt.Errorf("pk battle %s: read: %w", battleID, err)
	}
	now := s.now().UnixMilli()
	switch b.Status {
	case StatusPending:
		if now >= b.InviteExpiresAtMs {
			err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error { return finishPending(ctx, tx, battleID, StatusExpired, now) })
			if err != nil {
				return fmt.Errorf("pk battle %s: expire: %w", battleID, err)
			}
		}
		return nil
	case StatusRunning, StatusEnding:
		if b.Status == StatusRunning {
			closed, err := c.closedRooms(ctx, b)
			if err != nil {
				return err
			}
			if len(closed) > 0 {
				loser := ""
				if len(closed) == 1 {
					loser = closed[0]
				}
				if b, _, err = s.stop(ctx, app, battleID, roomevent.PKReasonRoomClosed, loser); err != nil {
					return err
				}
				now = max(now, b.EndsAtMs)
			}
		}
		if now >= b.EndsAtMs {
			scored, err := c.scored(ctx, b)
			if err != nil {
				return err
			}
			if scored {
				if b, _, err = s.settle(ctx, app, battleID, roomevent.PKReasonTimeUp, ""); err != nil {
					return err
				}
			}
		}
	}
	if b, err = s.notify(ctx, b); err != nil {
		return err
	}
	if (b.Status == StatusRunning || b.Status == StatusEnding) && b.scoreSeq > b.toldSeq {
		return s.pushScore(ctx, b)
	}
	return nil
}

// scored reports whether every gift of b's window has been scored.
func (c *Clock) scored(ctx context.Context, b Battle) (bool, error) {
	if c.progress == nil {
		return true, nil
	}
	ok, err := c.progress.Passed(ctx, b.appCode, b.EndsAtMs)
	if err != nil {
		return false, fmt.Errorf("pk battle %s: scoring progress: %w", b.BattleID, err)
	}
	return ok, nil
}

// closedRooms lists b's rooms that are closed or banned (the rooms rows,
// which every close and ban writes in its command's transaction).
func (c *Clock) closedRooms(ctx context.Context, b Battle) ([]string, error) {
	rows, err := c.svc.db.QueryContext(ctx, `SELECT room_id FROM rooms WHERE app_code = ? AND room_id IN (?, ?) AND status <> 'active'
		ORDER BY room_id = ? DESC`, b.appCode, b.RoomID, b.OpponentRoomID, b.RoomID)
	if err != nil {
		return nil, fmt.Errorf("pk battle %s: rooms' status: %w", b.BattleID, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("pk battle %s: rooms' status: %w", b.BattleID, err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// Bounds of one prune: the battles it takes, the pk_seen rows one
// statement deletes.
const (
	pruneBattles  = 100
	pruneSeenRows = 5000
)

// Prune prunes up to 100 battles settled longer than Retention ago, the
// oldest first: their pk_seen rows go (a settled battle counts no gift,
// so they are never read again), their pk_senders are cut to each side's
// top TopSenders (what GET shows), and pruned_at_ms marks them done. Any
// number of processes may prune at once: each step is idempotent, and a
// settled battle's rows no longer change. It returns the battles pruned.
func (c *Clock) Prune(ctx context.Context) (int, error) {
	db := c.svc.db
	now := c.svc.now()
	rows, err := db.QueryContext(ctx, `SELECT `+battleColumns+` FROM pk_battles WHERE status = 'ended' AND pruned_at_ms = 0
		AND ended_at_ms < ? ORDER BY ended_at_ms LIMIT ?`, now.Add(-c.cfg.Retention).UnixMilli(), pruneBattles)
	if err != nil {
		return 0, fmt.Errorf("pk prune: list: %w", err)
	}
	var due []Battle
	for rows.Next() {
		b, err := scanBattle(rows)
		if err != nil {
			rows.Close()
			return 0, fmt.Errorf("pk prune: list: %w", err)
		}
		due = append(due, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("pk prune: list: %w", err)
	}
	for i, b := range due {
		if err := c.prune(ctx, b, now.UnixMilli()); err != nil {
			return i, fmt.Errorf("pk prune: battle %s: %w", b.BattleID, err)
		}
	}
	return len(due), nil
}

// prune prunes the settled b (Prune).
func (c *Clock) prune(ctx context.Context, b Battle, nowMs int64) error {
	db := c.svc.db
	for {
		res, err := db.ExecContext(ctx, `DELETE FROM pk_seen WHERE battle_id = ? LIMIT ?`, b.BattleID, pruneSeenRows)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n < pruneSeenRows {
			if err != nil {
				return err
			}
			break
		}
	}
	room, opponent, err := topSenders(ctx, db, b, TopSenders)
	if err != nil {
		return err
	}
	for _, side := range []struct {
		room string
		top  []Sender
	}{{b.RoomID, room}, {b.OpponentRoomID, opponent}} {
		if len(side.top) == 0 {
			continue
		}
		keep := mysqldb.Placeholders(len(side.top))
		args := []any{b.BattleID, side.room}
		for _, s := range side.top {
			args = append(args, s.UserID)
		}
		if _, err := db.ExecContext(ctx, `DELETE FROM pk_senders WHERE battle_id = ? AND room_id = ? AND user_id NOT IN (`+keep+`)`,
			args...); err != nil {
			return err
		}
	}
	_, err = db.ExecContext(ctx, `UPDATE pk_battles SET pruned_at_ms = ? WHERE battle_id = ?`, nowMs, b.BattleID)
	return err
}
