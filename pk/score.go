package pk

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
	"voiceroom/mysqldb"
	"voiceroom/roomevent"
)

// Scorer is the durable consumer of ROOM_EVENTS (bus.DurablePK, filtered
// to RoomGiftSent) that scores the running battles: a gift received in
// either room of a running battle, inside [starts_at_ms, ends_at_ms),
// adds its coin value to that room's side, in one MySQL transaction with
// its pk_seen row, so a redelivered or replayed event counts nothing. A
// delivery batch is scored in one transaction (ScoreBatch).
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
	envs := make([]bus.Envelope, len(ds))
	for i, d := range ds {
		envs[i] = d.Envelope
	}
	return ScoreBatch(ctx, s.db, envs)
}

// Score counts one event for the battle its room is in, if any: only a
// RoomGiftSent of positive value, received while the battle runs, inside
// its window; each event once. A payload that cannot be read is permanent
// (dead-lettered); MySQL failures are retried.
func Score(ctx context.Context, db *sql.DB, env bus.Envelope) error {
	if errs := ScoreBatch(ctx, db, []bus.Envelope{env}); errs != nil {
		return errs[0]
	}
	return nil
}

// pkGift is a gift event that may score.
type pkGift struct {
	i    int // in the batch
	env  bus.Envelope
	gift roomevent.GiftSent
}

// ScoreBatch scores envs as Score does each, in one transaction, and
// returns each one's error (nil when none failed). The battles the gifts'
// rooms are in are locked once each, in battle-id order, so that any
// number of scorers on one durable wait for each other but never deadlock
// (the admin's SetScore and the clock take one battle's row lock alone).
// When the transaction fails, each gift is tried again in a transaction
// of its own, so that one bad event fails alone and none is half counted.
func ScoreBatch(ctx context.Context, db *sql.DB, envs []bus.Envelope) []error {
	errs := make([]error, len(envs))
	var gifts []pkGift
	for i, env := range envs {
		if env.EventType != roomevent.RoomGiftSent {
			continue
		}
		var gift roomevent.GiftSent
		if err := json.Unmarshal(env.Payload, &gift); err != nil {
			errs[i] = bus.Permanent(fmt.Errorf("pk scorer: event %s: %w", env.EventID, err))
			continue
		}
		if gift.Value > 0 {
			gifts = append(gifts, pkGift{i: i, env: env, gift: gift})
		}
	}
	if len(gifts) > 1 {
		if mysqldb.Update(ctx, db, func(tx *sql.Tx) error { return scoreTx(ctx, tx, gifts) }) == nil {
			gifts = nil
		}
	}
	for _, g := range gifts {
		if err := mysqldb.Update(ctx, db, func(tx *sql.Tx) error { return scoreTx(ctx, tx, []pkGift{g}) }); err != nil {
			errs[g.i] = fmt.Errorf("pk scorer: event %s: %w", g.env.EventID, err)
		}
	}
	for _, err := range errs {
		if err != nil {
			return errs
		}
	}
	return nil
}

// seenRow is a row of pk_seen.
type seenRow struct{ battleID, eventID string }

// senderRow is a row of pk_senders, with the coins a batch adds to it.
type senderRow struct {
	battleID, roomID string
	userID, coins    int64
}

// sendersChunk bounds the rows of one pk_senders upsert.
const sendersChunk = 500

// scoreTx scores gifts in tx: each room's slot read, each battle locked
// once (in battle-id order), the new events' pk_seen rows written in
// (battle, event) order, then per battle one update of its totals and
// score_seq (one more per gift scored, as one at a time would) and one
// upsert of its senders' rows, in key order.
func scoreTx(ctx context.Context, tx *sql.Tx, gifts []pkGift) error {
	type roomKey struct{ app, room string }
	slots := map[roomKey]string{} // room -> its battle
	byApp := map[string][]string{}
	for _, g := range gifts {
		k := roomKey{g.env.AppCode, g.env.RoomID}
		if _, ok := slots[k]; !ok {
			slots[k] = ""
			byApp[k.app] = append(byApp[k.app], k.room)
		}
	}
	for app, rooms := range byApp {
		args := []any{app}
		for _, r := range rooms {
			args = append(args, r)
		}
		rows, err := tx.QueryContext(ctx, `SELECT room_id, battle_id FROM pk_room_slots WHERE app_code = ? AND room_id IN (`+
			mysqldb.Placeholders(len(rooms))+`)`, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			var room, battle string
			if err := rows.Scan(&room, &battle); err != nil {
				rows.Close()
				return err
			}
			slots[roomKey{app, room}] = battle
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	type battleKey struct{ app, battle string }
	var keys []battleKey
	for k, battle := range slots {
		if battle != "" {
			keys = append(keys, battleKey{k.app, battle})
		}
	}
	slices.SortFunc(keys, func(x, y battleKey) int {
		return cmp.Or(strings.Compare(x.battle, y.battle), strings.Compare(x.app, y.app))
	})
	keys = slices.Compact(keys)
	battles := make(map[string]Battle, len(keys))
	for _, k := range keys {
		b, err := lockBattle(ctx, tx, k.app, k.battle)
		if errors.Is(err, errNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		battles[k.battle] = b
	}
	// The gifts that count, if not seen before.
	var counted []pkGift
	var seen []seenRow
	for _, g := range gifts {
		b, ok := battles[slots[roomKey{g.env.AppCode, g.env.RoomID}]]
		if !ok || b.appCode != g.env.AppCode || (b.Status != StatusRunning && b.Status != StatusEnding) ||
			g.env.OccurredAtMs < b.StartsAtMs || g.env.OccurredAtMs >= b.EndsAtMs {
			continue
		}
		counted = append(counted, g)
		seen = append(seen, seenRow{b.BattleID, g.env.EventID})
	}
	fresh, err := markSeenTx(ctx, tx, seen)
	if err != nil {
		return err
	}
	type total struct {
		room, opponent, n int64
	}
	totals := map[string]*total{}
	senders := map[senderRow]int64{}
	for _, g := range counted {
		b := battles[slots[roomKey{g.env.AppCode, g.env.RoomID}]]
		k := seenRow{b.BattleID, g.env.EventID}
		if !fresh[k] {
			continue
		}
		fresh[k] = false // a second copy in the batch counts nothing
		t := totals[b.BattleID]
		if t == nil {
			t = &total{}
			totals[b.BattleID] = t
		}
		if g.env.RoomID == b.OpponentRoomID {
			t.opponent += g.gift.Value
		} else {
			t.room += g.gift.Value
		}
		t.n++
		senders[senderRow{battleID: b.BattleID, roomID: g.env.RoomID, userID: g.gift.SenderUserID}] += g.gift.Value
	}
	for _, k := range keys {
		t := totals[k.battle]
		if t == nil {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE pk_battles SET room_score = room_score + ?, opponent_score = opponent_score + ?,
			score_seq = score_seq + ? WHERE battle_id = ?`, t.room, t.opponent, t.n, k.battle); err != nil {
			return err
		}
	}
	rows := make([]senderRow, 0, len(senders))
	for r, coins := range senders {
		r.coins = coins
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(x, y senderRow) int {
		return cmp.Or(strings.Compare(x.battleID, y.battleID), strings.Compare(x.roomID, y.roomID), cmp.Compare(x.userID, y.userID))
	})
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), sendersChunk)]
		rows = rows[len(chunk):]
		var ins mysqldb.Rows
		for _, r := range chunk {
			ins.Add("(?, ?, ?, ?)", r.battleID, r.roomID, r.userID, r.coins)
		}
		if _, err := ins.Exec(ctx, tx, `INSERT INTO pk_senders (battle_id, room_id, user_id, coins) VALUES `,
			` ON DUPLICATE KEY UPDATE coins = coins + VALUES(coins)`); err != nil {
			return err
		}
	}
	return nil
}

// markSeenTx writes the pk_seen rows of keys, in key order, and reports
// which were new (the others were counted before).
func markSeenTx(ctx context.Context, tx *sql.Tx, keys []seenRow) (map[seenRow]bool, error) {
	return mysqldb.InsertFresh(ctx, tx, "pk_seen", "battle_id, event_id", "(?, ?)", keys,
		func(x, y seenRow) int {
			return cmp.Or(strings.Compare(x.battleID, y.battleID), strings.Compare(x.eventID, y.eventID))
		},
		func(k seenRow) []any { return []any{k.battleID, k.eventID} })
}
