package pk

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
	"voiceroom/mysqldb"
	"voiceroom/roomevent"
)

// Scorer is the durable consumer of ROOM_EVENTS (bus.DurablePK, filtered
// to RoomGiftSent) that scores the running battles: a gift received in
// either room of a running battle, inside [starts_at_ms, ends_at_ms),
// adds its coin value to that room's side, in one MySQL transaction with
// its pk_seen row, so a redelivered or replayed event counts nothing.
type Scorer struct {
	db       *sql.DB
	log      *slog.Logger
	consumer *bus.Consumer
}

// NewScorer returns a Scorer reading the durable run.Durable (normally
// bus.DurablePK) of js. busMetrics may be nil.
func NewScorer(db *sql.DB, js jetstream.JetStream, run bus.ConsumerRunConfig, busMetrics *bus.Metrics, log *slog.Logger) (*Scorer, error) {
	if db == nil || js == nil {
		return nil, errors.New("pk scorer: db and jetstream are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Scorer{db: db, log: log.With("component", "pk")}
	var err error
	if s.consumer, err = bus.NewBatchConsumer(js, run, s.handle, log, busMetrics); err != nil {
		return nil, err
	}
	return s, nil
}

// Running is closed once the scorer consumes.
func (s *Scorer) Running() <-chan struct{} { return s.consumer.Running() }

// Run consumes until ctx ends.
func (s *Scorer) Run(ctx context.Context) error { return s.consumer.Run(ctx) }

func (s *Scorer) handle(ctx context.Context, ds []bus.Delivery) []error {
	var errs []error
	for i, d := range ds {
		if err := Score(ctx, s.db, d.Envelope); err != nil {
			if errs == nil {
				errs = make([]error, len(ds))
			}
			errs[i] = err
		}
	}
	return errs
}

// Score counts one event for the battle its room is in, if any: only a
// RoomGiftSent of positive value, received while the battle runs, inside
// its window; each event once. A payload that cannot be read is permanent
// (dead-lettered); MySQL failures are retried.
func Score(ctx context.Context, db *sql.DB, env bus.Envelope) error {
	if env.EventType != roomevent.RoomGiftSent {
		return nil
	}
	var gift roomevent.GiftSent
	if err := json.Unmarshal(env.Payload, &gift); err != nil {
		return bus.Permanent(fmt.Errorf("pk scorer: event %s: %w", env.EventID, err))
	}
	if gift.Value <= 0 {
		return nil
	}
	err := mysqldb.Update(ctx, db, func(tx *sql.Tx) error {
		var battleID string
		err := tx.QueryRowContext(ctx, `SELECT battle_id FROM pk_room_slots WHERE app_code = ? AND room_id = ?`,
			env.AppCode, env.RoomID).Scan(&battleID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		b, err := lockBattle(ctx, tx, env.AppCode, battleID)
		if errors.Is(err, errNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if (b.Status != StatusRunning && b.Status != StatusEnding) || env.OccurredAtMs < b.StartsAtMs || env.OccurredAtMs >= b.EndsAtMs {
			return nil
		}
		res, err := tx.ExecContext(ctx, `INSERT IGNORE INTO pk_seen (battle_id, event_id) VALUES (?, ?)`, battleID, env.EventID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // seen: counted before
		}
		column := "room_score"
		if env.RoomID == b.OpponentRoomID {
			column = "opponent_score"
		}
		if _, err := tx.ExecContext(ctx, `UPDATE pk_battles SET `+column+` = `+column+` + ?, score_seq = score_seq + 1
			WHERE battle_id = ?`, gift.Value, battleID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO pk_senders (battle_id, room_id, user_id, coins) VALUES (?, ?, ?, ?)
			ON DUPLICATE KEY UPDATE coins = coins + VALUES(coins)`, battleID, env.RoomID, gift.SenderUserID, gift.Value)
		return err
	})
	if err != nil {
		return fmt.Errorf("pk scorer: event %s: %w", env.EventID, err)
	}
	return nil
}
