package roomranks

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
)

// Entry is one user's coins in a rank.
type Entry struct {
	UserID int64 `json:"user_id"`
	Value  int64 `json:"value"`
}

// compareEntries is the order of a rank: more coins first, then the
// smaller user id (the Redis sets order members the same way: see member).
func compareEntries(a, b Entry) int {
	if c := cmp.Compare(b.Value, a.Value); c != 0 {
		return c
	}
	return cmp.Compare(a.UserID, b.UserID)
}

// Gift ledger rows are kind 'gift' with a room id (see wallet.DebitTx); a
// row's created_at_ms is the gift command's time, user_id the sender,
// peer_user_id the receiver (0 on rows older than the receiver column),
// -delta the coins. Both queries read a range of the index
// idx_ledger_room alone (forced: a small or skewed table must not make
// the optimizer scan another).
const (
	sumsHead = `SELECT 0, (SELECT COUNT(*) FROM rooms WHERE app_code = ? AND room_id = ?),
	COALESCE((SELECT MAX(room_version) FROM room_command_log WHERE app_code = ? AND room_id = ?), 0)
UNION ALL
`
	senderSums = `SELECT 1, user_id, SUM(-delta) FROM wallet_ledger FORCE INDEX (idx_ledger_room)
	WHERE app_code = ? AND room_id = ? AND kind = 'gift' AND created_at_ms >= ? AND created_at_ms < ?
	GROUP BY user_id`
	receiverSums = `SELECT 1, peer_user_id, SUM(-delta) FROM wallet_ledger FORCE INDEX (idx_ledger_room)
	WHERE app_code = ? AND room_id = ? AND kind = 'gift' AND created_at_ms >= ? AND created_at_ms < ? AND peer_user_id <> 0
	GROUP BY peer_user_id`
)

// sumsQuery is the one statement of loadSums for by.
func sumsQuery(by By) string {
	if by == ByReceiver {
		return sumsHead + receiverSums
	}
	return sumsHead + senderSums
}

// loaded is a rank as MySQL holds it.
type loaded struct {
	// found is false when the app has no such room.
	found bool
	// version is the room's latest command-log version in the same
	// snapshot as entries: every gift up to it is counted, none after it.
	version int64
	// entries, in rank order.
	entries []Entry
}

// loadSums reads every user's coins of room in w, by sender or receiver,
// and the room's latest version, in one statement, so both come from one
// consistent snapshot (a statement reads one, in any isolation level
// InnoDB offers above READ UNCOMMITTED): the ledger rows of a command
// commit with its command-log row, and a room's commands commit in
// version order, so the sums hold exactly the gifts up to that version.
func loadSums(ctx context.Context, db *sql.DB, app, room string, by By, w Window) (loaded, error) {
	rows, err := db.QueryContext(ctx, sumsQuery(by), app, room, app, room, app, room, w.StartMs, w.EndMs)
	if err != nil {
		return loaded{}, fmt.Errorf("read ranks of %s/%s: %w", app, room, err)
	}
	defer rows.Close()
	var out loaded
	for rows.Next() {
		var kind int
		var a, b int64
		if err := rows.Scan(&kind, &a, &b); err != nil {
			return loaded{}, fmt.Errorf("read ranks of %s/%s: %w", app, room, err)
		}
		if kind == 0 {
			out.found, out.version = a > 0, b
			continue
		}
		if b > 0 {
			out.entries = append(out.entries, Entry{UserID: a, Value: b})
		}
	}
	if err := rows.Err(); err != nil {
		return loaded{}, fmt.Errorf("read ranks of %s/%s: %w", app, room, err)
	}
	slices.SortFunc(out.entries, compareEntries)
	return out, nil
}

// giftRooms lists the rooms of app with a gift at or after sinceMs, in
// room id order (the rebuild's work list).
func giftRooms(ctx context.Context, db *sql.DB, app string, sinceMs int64) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT room_id FROM wallet_ledger
		WHERE app_code = ? AND room_id <> '' AND kind = 'gift' AND created_at_ms >= ? ORDER BY room_id`, app, sinceMs)
	if err != nil {
		return nil, fmt.Errorf("rooms with gifts in %s: %w", app, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
