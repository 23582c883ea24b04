package listprojector

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
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

// prior is what the read model holds of a room before a batch.
type prior struct {
	version int64
	region  int64
	status  string
}

// readPriors returns the stored version, region and status of each room
// of keys that has a row: one query per app (an IN list on the primary
// key; row-constructor IN lists are not always indexed).
func readPriors(ctx context.Context, db *sql.DB, keys []roomKey) (map[roomKey]prior, error) {
	out := make(map[roomKey]prior, len(keys))
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
		rows, err := db.QueryContext(ctx, `SELECT room_id, room_version, visible_region_id, status FROM room_list_entries FORCE INDEX (PRIMARY)
			WHERE app_code = ? AND room_id IN (`+placeholders(len(ids))+`)`, append([]any{app}, ids...)...)
		if err != nil {
			return nil, fmt.Errorf("read list entries: %w", err)
		}
		for rows.Next() {
			k := roomKey{app: app}
			var p prior
			if err := rows.Scan(&k.room, &p.version, &p.region, &p.status); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read list entries: %w", err)
			}
			out[k] = p
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read list entries: %w", err)
		}
	}
	return out, nil
}

// upsertSQL writes cards over older ones only. MySQL applies the
// assignments left to right, each seeing the ones before: room_version
// must come last, so every IF compares with the stored version.
var upsertSQL = func() string {
	cols := strings.Fields(strings.ReplaceAll(cardCols, ",", " "))
	var set []string
	for _, c := range cols {
		if c == "app_code" || c == "room_id" || c == "room_version" {
			continue
		}
		cmp := ">"
		if c == "sort_score" || c == "updated_at_ms" {
			// Same version, same card: only the score's time-dependent
			// boost (or its formula) may differ, so recompute it.
			cmp = ">="
		}
		set = append(set, fmt.Sprintf("%s = IF(VALUES(room_version) %s room_version, VALUES(%s), %s)", c, cmp, c, c))
	}
	set = append(set, "room_version = GREATEST(room_version, VALUES(room_version))")
	return " ON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
}()

const cardTuple = "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"

// upsertCards writes cards in one statement, in key order (so two
// projectors lock rows in the same order), each only over an older card.
func upsertCards(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, cards []*Card) error {
	if len(cards) == 0 {
		return nil
	}
	cards = slices.Clone(cards)
	slices.SortFunc(cards, func(a, b *Card) int {
		if c := strings.Compare(a.AppCode, b.AppCode); c != 0 {
			return c
		}
		return strings.Compare(a.RoomID, b.RoomID)
	})
	var q strings.Builder
	q.WriteString("INSERT INTO room_list_entries (" + cardCols + ") VALUES ")
	args := make([]any, 0, 20*len(cards))
	for i, c := range cards {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(cardTuple)
		args = append(args, c.AppCode, c.RoomID, c.RoomShortID, c.IMGroupID, c.OwnerUserID, c.HostUserID, c.VisibleRegionID,
			c.Title, c.CoverURL, c.Mode, c.Status, c.Locked, c.Heat, c.OnlineCount, c.SeatCount, c.OccupiedSeatCount,
			c.CreatedAtMs, c.RoomVersion, c.SortScore, c.UpdatedAtMs)
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
		AND e.room_id IN (`+placeholders(len(ids))+`)`, args...)
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

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}
