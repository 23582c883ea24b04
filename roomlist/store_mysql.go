package roomlist

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"voiceroom/listprojector"
	"voiceroom/mysqldb"
)

// readCards returns the stored cards of app's rooms ids, by room id.
func readCards(ctx context.Context, db *sql.DB, app string, ids []string) (map[string]*listprojector.Card, error) {
	out := make(map[string]*listprojector.Card, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, app)
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := db.QueryContext(ctx, `SELECT `+listprojector.CardColumns("")+` FROM room_list_entries WHERE app_code = ? AND room_id IN (`+
		mysqldb.Placeholders(len(ids))+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("read cards: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		c, err := listprojector.ScanCard(rows)
		if err != nil {
			return nil, fmt.Errorf("read cards: %w", err)
		}
		out[c.RoomID] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read cards: %w", err)
	}
	return out, nil
}

// readCardsHidden returns the stored cards of app's rooms ids, by room id,
// and which of them are hidden in region at nowMs, in one query (the
// list's path when Redis gives nothing): ids of a page (MaxLimit at most)
// through a prepared statement of ps.
func readCardsHidden(ctx context.Context, ps *stmts, app string, region int64, ids []string, nowMs int64) (map[string]*listprojector.Card, map[string]bool, error) {
	out := make(map[string]*listprojector.Card, len(ids))
	if len(ids) == 0 {
		return out, nil, nil
	}
	n := pageArity(len(ids))
	args := make([]any, 0, n+3)
	args = append(args, region, nowMs, app)
	for _, id := range ids {
		args = append(args, id)
	}
	for len(args) < n+3 {
		args = append(args, ids[0]) // a repeated id reads its row once
	}
	rows, err := ps.query(ctx, cardsHiddenSQL(n), args...)
	if err != nil {
		return nil, nil, fmt.Errorf("read cards: %w", err)
	}
	defer rows.Close()
	var hidden map[string]bool
	for rows.Next() {
		var hide sql.NullInt64
		c, err := listprojector.ScanCard(rows, &hide)
		if err != nil {
			return nil, nil, fmt.Errorf("read cards: %w", err)
		}
		out[c.RoomID] = c
		if hide.Valid {
			if hidden == nil {
				hidden = map[string]bool{}
			}
			hidden[c.RoomID] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read cards: %w", err)
	}
	return out, hidden, nil
}

// pageArity is the number of room ids readCardsHidden's statement takes
// for n: DefaultLimit or MaxLimit (padded with a repeated id), so a
// handful of statements serve every page; n itself past MaxLimit.
func pageArity(n int) int {
	switch {
	case n <= DefaultLimit:
		return DefaultLimit
	case n <= MaxLimit:
		return MaxLimit
	}
	return n
}

// cardsHiddenSQL reads the cards of n rooms with their applying hides
// (parameters visible_region_id, now_ms, app_code, n room ids): a row per
// room and hide, the hide_id NULL when none applies, so a room with two
// applying hides comes twice (read as one).
//
// Its shape keeps the list's hottest MySQL query cheap (docs/api.md, "The room
// list"): the primary key is forced, since otherwise the optimizer weighs
// a range over every index beginning with app_code at each execution; the
// hides are a join on idx_hides_region, not a dependent subquery (run per
// row through a subquery cache).
func cardsHiddenSQL(n int) string {
	return `SELECT ` + cardColsE + `, h.hide_id FROM room_list_entries e FORCE INDEX (PRIMARY)
		LEFT JOIN room_region_hides h ON h.app_code = e.app_code AND h.visible_region_id = ? AND h.room_id = e.room_id
		AND h.status = 'active' AND (h.expires_at_ms = 0 OR h.expires_at_ms > ?)
		WHERE e.app_code = ? AND e.room_id IN (` + mysqldb.Placeholders(n) + `)`
}

// cardColsE is listprojector.CardColumns qualified with the table alias e.
var cardColsE = listprojector.CardColumns("e")

// regionHasHides reports whether app has an active hide in region,
// expired or not (one probe of idx_hides_region, bounded whatever the
// number of hides).
func regionHasHides(ctx context.Context, ps *stmts, app string, region int64) (bool, error) {
	rows, err := ps.query(ctx, `SELECT 1 FROM room_region_hides FORCE INDEX (idx_hides_region)
		WHERE app_code = ? AND visible_region_id = ? AND status = 'active' LIMIT 1`, app, region)
	if err != nil {
		return false, fmt.Errorf("read hides: %w", err)
	}
	defer rows.Close()
	found := rows.Next()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("read hides: %w", err)
	}
	return found, nil
}

// stmts runs the list's hottest queries as server-side prepared
// statements, prepared once per SQL text (each on the connections it
// runs on) and kept while db is open: the server then neither parses the
// statement nor reads interpolated values on every execution. Only
// statements of fixed text may go through it, so it stays small. A
// statement that cannot be prepared runs as a plain query.
type stmts struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmts(db *sql.DB) *stmts { return &stmts{db: db, m: map[string]*sql.Stmt{}} }

func (ps *stmts) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	ps.mu.Lock()
	st := ps.m[q]
	ps.mu.Unlock()
	if st == nil {
		var err error
		if st, err = ps.db.PrepareContext(ctx, q); err != nil {
			return ps.db.QueryContext(ctx, q, args...)
		}
		ps.mu.Lock()
		if prev := ps.m[q]; prev != nil {
			st.Close()
			st = prev
		} else {
			ps.m[q] = st
		}
		ps.mu.Unlock()
	}
	return st.QueryContext(ctx, args...)
}

// entry is one room in a list order: its id, its key in the tab's order
// (sort_score or created_at_ms) and whether it sits in the pinned section.
type entry struct {
	id     string
	key    int64
	pinned bool
}

// orderBy is the SQL order of each tab; room_id breaks ties, ascending.
func orderBy(tab string) (col, order string) {
	if tab == listprojector.TabNew {
		return "created_at_ms", "created_at_ms DESC, room_id ASC"
	}
	return "sort_score", "sort_score DESC, room_id ASC"
}

// Per-region operator controls that remove a room from a region's lists
// are built here and in listprojector.ApplyingHides: listOrder excludes the
// hides that apply now with notHiddenSQL (parameter now_ms, after
// ListedSQL's), and ApplyingHides reads them for the pages of a frozen
// order and for the Redis hide sets.
const notHiddenSQL = ` AND NOT EXISTS (SELECT 1 FROM room_region_hides h WHERE h.app_code = e.app_code
	AND h.visible_region_id = e.visible_region_id AND h.status = 'active' AND h.room_id = e.room_id
	AND (h.expires_at_ms = 0 OR h.expires_at_ms > ?))`

// activePinsSQL selects the pins that apply now (parameters app_code,
// visible_region_id, now_ms): active, unexpired, on an active room listed
// in the pin's own region. A room that moved region or closed is dropped
// by the join.
const activePinsSQL = `SELECT e.room_id, p.weight, p.expires_at_ms FROM room_region_pins p
	JOIN room_list_entries e ON e.app_code = p.app_code AND e.room_id = p.room_id AND e.visible_region_id = p.visible_region_id
	WHERE p.app_code = ? AND p.visible_region_id = ? AND p.status = 'active' AND p.expires_at_ms > ? AND e.status = 'active'
	ORDER BY p.weight DESC, p.expires_at_ms DESC, e.room_id ASC`

// pinnedNow returns the region's pinned rooms in pin order, each once
// (the strongest pin of a room wins).
func pinnedNow(ctx context.Context, db *sql.DB, app string, region, nowMs int64) ([]string, error) {
	rows, err := db.QueryContext(ctx, activePinsSQL, app, region, nowMs)
	if err != nil {
		return nil, fmt.Errorf("read pins: %w", err)
	}
	defer rows.Close()
	var ids []string
	seen := map[string]bool{}
	for rows.Next() {
		var id string
		var weight, exp int64
		if err := rows.Scan(&id, &weight, &exp); err != nil {
			return nil, fmt.Errorf("read pins: %w", err)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read pins: %w", err)
	}
	return ids, nil
}

// listOrder returns up to limit listed rooms of the region in tab order,
// after (key, id) when after is true. A non-empty query keeps only the
// rooms whose room_short_id is query or whose title starts with it.
// hidesAt, when not 0, leaves out the rooms hidden in the region at that
// time (unix ms); 0 keeps them: a frozen order keeps hidden rooms, and
// every page leaves out the rooms hidden at its own time
// (Lister.pageCards), so that an unhide shows the room again at once.
func listOrder(ctx context.Context, db *sql.DB, app string, region int64, tab, query string, after bool, key int64, id string,
	limit int, hidesAt int64) ([]entry, error) {
	col, order := orderBy(tab)
	q := `SELECT e.room_id, e.` + col + ` FROM room_list_entries e WHERE ` + listprojector.ListedSQL
	args := []any{app, region}
	if hidesAt != 0 {
		q += notHiddenSQL
		args = append(args, hidesAt)
	}
	if query != "" {
		q += ` AND (e.room_short_id = ? OR e.title LIKE ?)`
		args = append(args, query, likePrefix(query))
	}
	if after {
		q += ` AND (e.` + col + ` < ? OR (e.` + col + ` = ? AND e.room_id > ?))`
		args = append(args, key, key, id)
	}
	q += ` ORDER BY ` + order + ` LIMIT ?`
	args = append(args, limit)
	return queryEntries(ctx, db, q, args...)
}

// likeEscaper escapes LIKE's wildcards and its escape character. A
// Replacer builds its tables on first use: one for the process, not one
// per search.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// likePrefix escapes query for LIKE and makes it a prefix pattern.
func likePrefix(query string) string {
	return likeEscaper.Replace(query) + "%"
}

func queryEntries(ctx context.Context, db *sql.DB, q string, args ...any) ([]entry, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read list: %w", err)
	}
	defer rows.Close()
	var out []entry
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.id, &e.key); err != nil {
			return nil, fmt.Errorf("read list: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read list: %w", err)
	}
	return out, nil
}
