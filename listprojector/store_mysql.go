package listprojector

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"voiceroom/mysqldb"
)

// roomKey names a room across apps.
type roomKey struct{ app, room string }

// cardCols are room_list_entries' columns in Card order (ScanCard's).
const cardCols = `app_code, room_id, room_short_id, im_group_id, owner_user_id, host_user_id, visible_region_id,
	title, cover_url, mode, status, locked, heat, online_count, seat_count, occupied_seat_count, created_at_ms,
	room_version, sort_score, updated_at_ms`

// CardColumns returns room_list_entries' columns in the order ScanCard
// reads them, each qualified with alias when alias is not empty.
func CardColumns(alias string) string {
	if alias == "" {
		return cardCols
	}
	cols := strings.Fields(strings.ReplaceAll(cardCols, ",", " "))
	for i, c := range cols {
		cols[i] = alias + "." + c
	}
	return strings.Join(cols, ", ")
}

// ScanCard reads a card from a row that starts with CardColumns, then the
// row's further columns into extra.
func ScanCard(rows *sql.Rows, extra ...any) (*Card, error) {
	c := new(Card)
	dest := append([]any{&c.AppCode, &c.RoomID, &c.RoomShortID, &c.IMGroupID, &c.OwnerUserID, &c.HostUserID, &c.VisibleRegionID,
		&c.Title, &c.CoverURL, &c.Mode, &c.Status, &c.Locked, &c.Heat, &c.OnlineCount, &c.SeatCount, &c.OccupiedSeatCount,
		&c.CreatedAtMs, &c.RoomVersion, &c.SortScore, &c.UpdatedAtMs}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return nil, err
	}
	return c, nil
}

// ListedSQL selects the listed rooms of one app and region from
// room_list_entries aliased e (parameters app_code, visible_region_id):
// Card.ListedIn in SQL. Hidden rooms are included: hides are the list
// query's to apply.
const ListedSQL = `e.app_code = ? AND e.visible_region_id = ? AND e.status = 'active'`

// readPriors returns the stored card of each room of keys that has a row:
// one query per app (an IN list on the primary key; row-constructor IN
// lists are not always indexed).
func readPriors(ctx context.Context, db *sql.DB, keys []roomKey) (map[roomKey]*Card, error) {
	out := make(map[roomKey]*Card, len(keys))
	byApp := map[string][]any{}
	var apps []string
	for _, k := range keys {
		if _, ok := byApp[k.app]; !ok {
			apps = append(apps, k.app)
		}
		byApp[k.app] = append(byApp[k.app], k.room)
	}
	for _, app := range apps {
		ids := byApp[app]
		rows, err := db.QueryContext(ctx, `SELECT `+cardCols+` FROM room_list_entries FORCE INDEX (PRIMARY)
			WHERE app_code = ? AND room_id IN (`+mysqldb.Placeholders(len(ids))+`)`, append([]any{app}, ids...)...)
		if err != nil {
			return nil, fmt.Errorf("read list entries: %w", err)
		}
		for rows.Next() {
			c, err := ScanCard(rows)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("read list entries: %w", err)
			}
			out[roomKey{app: app, room: c.RoomID}] = c
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read list entries: %w", err)
		}
	}
	return out, nil
}

// guardSet is the SET list that writes a card over an older one only: in
// names a column's value in the card, at its stored value. Every IF
// compares with the stored version: room_version comes last, as MariaDB
// applies the assignments of an upsert, and of an UPDATE that writes rows
// as it reads them (updateStatement's), left to right, each seeing the
// ones before.
func guardSet(in, at func(col string) string) string {
	var set []string
	for _, c := range strings.Fields(strings.ReplaceAll(cardCols, ",", " ")) {
		if c == "app_code" || c == "room_id" || c == "room_version" {
			continue
		}
		cmp := ">"
		if c == "sort_score" || c == "updated_at_ms" {
			// Same version, same card: only the score's time-dependent
			// boost (or its formula) may differ, so recompute it.
			cmp = ">="
		}
		set = append(set, fmt.Sprintf("%s = IF(%s %s %s, %s, %s)", at(c), in("room_version"), cmp, at("room_version"), in(c), at(c)))
	}
	set = append(set, fmt.Sprintf("%s = GREATEST(%s, %s)", at("room_version"), at("room_version"), in("room_version")))
	return strings.Join(set, ", ")
}

// upsertSQL writes cards over older ones only.
var upsertSQL = " ON DUPLICATE KEY UPDATE " + guardSet(func(c string) string { return "VALUES(" + c + ")" },
	func(c string) string { return c })

// updateSQL is the SET of writeExisting: cards v over rows e.
var updateSQL = " SET " + guardSet(func(c string) string { return "v." + c }, func(c string) string { return "e." + c })

const cardTuple = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"

// execer runs a statement: the pool, or a connection a test holds.
type execer interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}

// writeCards writes cards, each only over an older card, in at most two
// statements, each locking rows in key order (so two writers lock them in
// the same order) and run again after a deadlock: first the cards of the
// rooms stored says have a row, with one UPDATE, then the others with the
// upsert. An upsert that finds its row counts two rows written
// (Handler_write and Handler_update), the UPDATE one; both write the same
// redo. Should the UPDATE change fewer rows than it has cards, a row is
// missing (deleted, or the table truncated, since stored was read) or was
// meanwhile written by another writer: the upsert then takes every card,
// inserting the missing and leaving the others as they are.
func writeCards(ctx context.Context, db execer, cards []*Card, stored func(roomKey) bool) error {
	cards = byKey(cards)
	var existing, fresh []*Card
	for _, c := range cards {
		if stored(roomKey{c.AppCode, c.RoomID}) {
			existing = append(existing, c)
		} else {
			fresh = append(fresh, c)
		}
	}
	var changed int64
	err := mysqldb.Retry(ctx, func() (err error) {
		changed, err = writeExisting(ctx, db, existing)
		return err
	})
	if err != nil {
		return err
	}
	if changed < int64(len(existing)) {
		fresh = cards
	}
	return mysqldb.Retry(ctx, func() error { return upsertCards(ctx, db, fresh) })
}

// byKey returns cards sorted by app and room.
func byKey(cards []*Card) []*Card {
	cards = slices.Clone(cards)
	slices.SortFunc(cards, func(a, b *Card) int {
		if c := strings.Compare(a.AppCode, b.AppCode); c != 0 {
			return c
		}
		return strings.Compare(a.RoomID, b.RoomID)
	})
	return cards
}

// cardArgs appends c's columns in cardCols order to args.
func cardArgs(args []any, c *Card) []any {
	return append(args, c.AppCode, c.RoomID, c.RoomShortID, c.IMGroupID, c.OwnerUserID, c.HostUserID, c.VisibleRegionID,
		c.Title, c.CoverURL, c.Mode, c.Status, c.Locked, c.Heat, c.OnlineCount, c.SeatCount, c.OccupiedSeatCount,
		c.CreatedAtMs, c.RoomVersion, c.SortScore, c.UpdatedAtMs)
}

// writeExisting writes cards (sorted by key, one per room) over the older
// cards of their rows in one statement and returns how many rows it
// changed; a card without a row is not written.
func writeExisting(ctx context.Context, db execer, cards []*Card) (int64, error) {
	if len(cards) == 0 {
		return 0, nil
	}
	q, args := updateStatement(cards)
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("update %d list entries: %w", len(cards), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("update %d list entries: %w", len(cards), err)
	}
	return n, nil
}

// updateStatement is writeExisting's UPDATE of cards and its arguments.
// The rows are read first (STRAIGHT_JOIN), by primary key ranges (FORCE
// INDEX, or the optimizer scans a table of a few rows, locking every row),
// so they are locked in key order, and only they; MariaDB then writes
// each row as it reads it, as a one-table UPDATE does. Each row finds its
// card in a derived table (a SELECT naming the columns, then a table value
// constructor) by the key MariaDB builds on it, which it builds only when
// the key columns have the table's collation: TestUpdateStatementPlan.
func updateStatement(cards []*Card) (string, []any) {
	var q strings.Builder
	q.WriteString("UPDATE room_list_entries e FORCE INDEX (PRIMARY) STRAIGHT_JOIN (SELECT ")
	for i, c := range strings.Split(cardCols, ",") {
		if i > 0 {
			q.WriteByte(',')
		}
		c = strings.TrimSpace(c)
		if c == "app_code" || c == "room_id" {
			q.WriteString("CONVERT(? USING utf8mb4) COLLATE utf8mb4_unicode_ci AS " + c)
		} else {
			q.WriteString("? AS " + c)
		}
	}
	if len(cards) > 1 {
		q.WriteString(" UNION ALL VALUES ")
		for i := 1; i < len(cards); i++ {
			if i > 1 {
				q.WriteByte(',')
			}
			q.WriteString(cardTuple)
		}
	}
	q.WriteString(") v ON e.app_code = v.app_code AND e.room_id = v.room_id" + updateSQL + " WHERE ")
	args := make([]any, 0, 22*len(cards))
	for _, c := range cards {
		args = cardArgs(args, c)
	}
	// One app's rooms, an IN list on the primary key, per app (as
	// readPriors: row-constructor IN lists are not always indexed).
	for i := 0; i < len(cards); {
		j := i + 1
		for j < len(cards) && cards[j].AppCode == cards[i].AppCode {
			j++
		}
		if i > 0 {
			q.WriteString(" OR ")
		}
		q.WriteString("(e.app_code = ? AND e.room_id IN (" + mysqldb.Placeholders(j-i) + "))")
		args = append(args, cards[i].AppCode)
		for _, c := range cards[i:j] {
			args = append(args, c.RoomID)
		}
		i = j
	}
	return q.String(), args
}

// upsertCards writes cards in one statement, in key order (so two
// projectors lock rows in the same order), each only over an older card.
func upsertCards(ctx context.Context, db execer, cards []*Card) error {
	if len(cards) == 0 {
		return nil
	}
	cards = byKey(cards)
	var q strings.Builder
	q.WriteString("INSERT INTO room_list_entries (" + cardCols + ") VALUES ")
	args := make([]any, 0, 20*len(cards))
	for i, c := range cards {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(cardTuple)
		args = cardArgs(args, c)
	}
	q.WriteString(upsertSQL)
	if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("upsert %d list entries: %w", len(cards), err)
	}
	return nil
}

// scored is a listed room with its key in each tab's set.
type scored struct {
	id         string
	hot, fresh int64 // sort_score, created_at_ms
}

// listedScores returns every listed room of app's region with its keys.
func listedScores(ctx context.Context, db *sql.DB, app string, region int64) ([]scored, error) {
	rows, err := db.QueryContext(ctx, `SELECT e.room_id, e.sort_score, e.created_at_ms FROM room_list_entries e WHERE `+ListedSQL,
		app, region)
	if err != nil {
		return nil, fmt.Errorf("read list: %w", err)
	}
	defer rows.Close()
	var out []scored
	for rows.Next() {
		var s scored
		if err := rows.Scan(&s.id, &s.hot, &s.fresh); err != nil {
			return nil, fmt.Errorf("read list: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read list: %w", err)
	}
	return out, nil
}

// stillListed returns which of app's rooms ids MySQL lists in region now.
func stillListed(ctx context.Context, db *sql.DB, app string, region int64, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(ids)+2)
	args = append(args, app, region)
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := db.QueryContext(ctx, `SELECT e.room_id FROM room_list_entries e WHERE `+ListedSQL+`
		AND e.room_id IN (`+mysqldb.Placeholders(len(ids))+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("read list: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("read list: %w", err)
		}
		out[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read list: %w", err)
	}
	return out, nil
}
