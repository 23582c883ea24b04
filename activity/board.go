package activity

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/internal/redisgate"
	"voiceroom/roomranks"
)

// Limits of a board read.
const (
	// DefaultBoardLimit is how many entries a board read lists when the
	// caller names no limit.
	DefaultBoardLimit = 20
	// MaxBoardLimit is the most entries one board read lists.
	MaxBoardLimit = 100
)

// Board read modes (pageScript's and readMySQL's).
const (
	modeTop    = "top"
	modeAround = "around"
	modeAfter  = "after"
	modeBefore = "before"
)

// Entry is one subject's score in one period of an activity, reached at
// ReachedAtMs (the occurred_at_ms of the event that last raised it).
type Entry struct {
	Subject     string
	Score       int64
	ReachedAtMs int64
}

// compareEntries is the order of a board: the higher score first, then
// whoever reached it first, then (the same millisecond) the smaller
// subject, bytewise (as Redis orders the members: see board_redis.go).
func compareEntries(a, b Entry) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	if c := cmp.Compare(a.ReachedAtMs, b.ReachedAtMs); c != 0 {
		return c
	}
	return bytes.Compare([]byte(a.Subject), []byte(b.Subject))
}

// UserRegions finds a user's region; *regions.Service is one.
type UserRegions interface {
	UserRegion(ctx context.Context, appCode string, userID int64) (displayUserID string, regionID int64, err error)
}

// BoardQuery asks for one page of an activity's board in its current
// period.
type BoardQuery struct {
	AppCode    string
	UserID     int64 // the caller: whose place Me is, and whose region must see the activity
	ActivityID int64
	// RoomID, for an activity by room, is the room whose place Me is.
	RoomID string
	// Limit is how many entries the page lists: 1..MaxBoardLimit.
	Limit int
	// Around lists the entries just above and below Me instead of the top.
	Around bool
	// Cursor continues from a page's NextCursor or PrevCursor.
	Cursor string
}

// BoardItem is one entry of a board: a user's or a room's.
type BoardItem struct {
	Rank   int    `json:"rank"`
	UserID int64  `json:"user_id,omitempty"`
	RoomID string `json:"room_id,omitempty"`
	Score  int64  `json:"score"`
}

// Place is the caller's (or the room's) place on a board.
type Place struct {
	Rank  int   `json:"rank"`
	Score int64 `json:"score"`
}

// Board is one page of a board (docs/openapi.yaml, ActivityBoard).
type Board struct {
	ActivityID    int64       `json:"activity_id"`
	Kind          Kind        `json:"kind"`
	Metric        Metric      `json:"metric"`
	PeriodStartMs int64       `json:"period_start_ms"`
	PeriodEndMs   int64       `json:"period_end_ms"`
	Items         []BoardItem `json:"items"`
	// Me is the caller's place (the room's with RoomID); nil without one.
	Me *Place `json:"me"`
	// NextCursor pages on down the board, PrevCursor back up; empty at
	// either end.
	NextCursor string `json:"next_cursor"`
	PrevCursor string `json:"prev_cursor"`
}

// Boards answers board and progress reads: from Redis when the board is
// there, else from MySQL (then the board is rebuilt in Redis).
type Boards struct {
	db       *sql.DB
	reads    *sql.DB // a page's MySQL read (Redis down): db unless SetReads gave replicas
	store    *Store
	cache    *boardCache
	regions  UserRegions
	cal      *roomranks.Calendar
	cfg      ScoreConfig
	log      *slog.Logger
	metrics  *ScoreMetrics
	redis    *redisgate.Gate
	rebuilds singleflight.Group
}

// NewBoards returns the reads over db and rdb (nil: MySQL only); regions
// finds a caller's region (an activity of other regions is not found).
// m may be nil.
func NewBoards(db *sql.DB, rdb redis.UniversalClient, regions UserRegions, cfg ScoreConfig, log *slog.Logger, m *ScoreMetrics) (*Boards, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil || regions == nil {
		return nil, fmt.Errorf("%w: the boards need a database and the regions", ErrInvalidScoreConfig)
	}
	cal, err := roomranks.NewCalendar(cfg.TimeZones)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "activity")
	return &Boards{db: db, reads: db, store: NewStore(db, cfg.Now), cache: newBoardCache(rdb, cfg), regions: regions, cal: cal, cfg: cfg, log: log, metrics: m,
		redis: redisgate.New(rdb, cfg.RedisTimeout, "activity boards", log, func() { m.redisFailed(opRead) })}, nil
}

// SetReads makes a board page read from reads, a pool of replicas that
// may lag (package readdb), while Redis is down. A board's rebuild into
// Redis reads the primary. Call it before the Boards serve.
func (b *Boards) SetReads(reads *sql.DB) { b.reads = reads }

// visible returns activity id of app when user's region sees it, else
// NOT_FOUND (another app's, another region's, none).
func (b *Boards) visible(ctx context.Context, app string, user, id int64) (Activity, error) {
	a, err := b.store.Get(ctx, app, id)
	if err != nil {
		return Activity{}, err
	}
	if a.RegionIDs != nil {
		_, region, err := b.regions.UserRegion(ctx, app, user)
		if apperr.Is(err, apperr.NotFound) {
			return Activity{}, errNotFound // a user without a profile has no region
		}
		if err != nil {
			return Activity{}, err
		}
		if !a.ForRegion(region) {
			return Activity{}, errNotFound
		}
	}
	return a, nil
}

// currentPeriod is the period of a that holds now (the first or the last
// once the window is not running).
func (b *Boards) currentPeriod(a Activity) (int64, int64) {
	now := b.cfg.Now().UnixMilli()
	return periodOf(b.cal, a, min(max(now, a.StartsAtMs), a.EndsAtMs-1))
}

// cursor is a page's boundary: the entry next to the page, and whether
// the next page lists what follows it (after) or precedes it (before).
type cursor struct {
	Dir     string `json:"d"`
	Score   int64  `json:"s"`
	Reached int64  `json:"r"`
	Subject string `json:"k"`
}

func (c cursor) String() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseCursor(s string) (cursor, error) {
	var c cursor
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(raw, &c)
	}
	if err != nil || (c.Dir != modeAfter && c.Dir != modeBefore) || c.Subject == "" || len(c.Subject) > 64 || c.Score < 0 {
		return cursor{}, apperr.Invalid("cursor", "not a cursor of this board: use next_cursor or prev_cursor as answered")
	}
	return c, nil
}

// Board answers q. Errors: INVALID_ARGUMENT naming limit, cursor, around
// or room_id; NOT_FOUND for an activity the caller may not see;
// UNAVAILABLE when MySQL fails while Redis cannot answer.
func (b *Boards) Board(ctx context.Context, q BoardQuery) (Board, error) {
	mode, boundary, err := boardMode(q)
	if err != nil {
		return Board{}, err
	}
	a, err := b.visible(ctx, q.AppCode, q.UserID, q.ActivityID)
	if err != nil {
		return Board{}, err
	}
	ps, pe := b.currentPeriod(a)
	return b.boardOf(ctx, a, q, ps, pe, mode, boundary)
}

// boardMode checks q's limit and cursor and returns the read's mode and
// boundary.
func boardMode(q BoardQuery) (string, Entry, error) {
	if q.Limit < 1 || q.Limit > MaxBoardLimit {
		return "", Entry{}, apperr.Invalid("limit", "must be 1..%d", MaxBoardLimit)
	}
	mode, boundary := modeTop, Entry{}
	if q.Cursor != "" {
		if q.Around {
			return "", Entry{}, apperr.Invalid("around", "cannot be combined with a cursor")
		}
		c, err := parseCursor(q.Cursor)
		if err != nil {
			return "", Entry{}, err
		}
		mode, boundary = c.Dir, Entry{Subject: c.Subject, Score: c.Score, ReachedAtMs: c.Reached}
	} else if q.Around {
		mode = modeAround
	}
	return mode, boundary, nil
}

// boardOf reads one page of a's board in its period ps..pe for q, whose
// caller may see a.
func (b *Boards) boardOf(ctx context.Context, a Activity, q BoardQuery, ps, pe int64, mode string, boundary Entry) (Board, error) {
	me := strconv.FormatInt(q.UserID, 10)
	if a.ByRoom() {
		me = ""
		if q.RoomID != "" {
			if len(q.RoomID) > voiceroom.RoomIDMax || !strings.HasPrefix(q.RoomID, q.AppCode+"_") {
				return Board{}, apperr.Invalid("room_id", "not a room of this app")
			}
			me = q.RoomID
		}
	}
	if q.UserID <= 0 && !a.ByRoom() {
		me = ""
	}
	p, err := b.page(ctx, a.ID, ps, pe, mode, boundary, q.Limit, me)
	if err != nil {
		return Board{}, err
	}
	out := Board{ActivityID: a.ID, Kind: a.Kind, Metric: a.Metric, PeriodStartMs: ps, PeriodEndMs: pe, Items: []BoardItem{}}
	if p.meRank > 0 {
		out.Me = &Place{Rank: p.meRank, Score: p.meScore}
	}
	entries := p.entries
	more := mode == modeBefore // the boundary follows the page
	if mode != modeBefore && len(entries) > q.Limit {
		entries, more = entries[:q.Limit], true
	}
	for i, e := range entries {
		item := BoardItem{Rank: p.start + i + 1, Score: e.Score}
		if a.ByRoom() {
			item.RoomID = e.Subject
		} else {
			item.UserID, _ = strconv.ParseInt(e.Subject, 10, 64)
		}
		out.Items = append(out.Items, item)
	}
	if len(entries) > 0 {
		first, last := entries[0], entries[len(entries)-1]
		if p.start > 0 {
			out.PrevCursor = cursor{Dir: modeBefore, Score: first.Score, Reached: first.ReachedAtMs, Subject: first.Subject}.String()
		}
		if more {
			out.NextCursor = cursor{Dir: modeAfter, Score: last.Score, Reached: last.ReachedAtMs, Subject: last.Subject}.String()
		}
	}
	return out, nil
}

// page reads one page: from Redis when the board is filled there (after
// rebuilding it if it is missing), else from MySQL.
func (b *Boards) page(ctx context.Context, id, ps, pe int64, mode string, boundary Entry, limit int, me string) (page, error) {
	if b.redis.Up() {
		p, err := b.readRedis(ctx, id, ps, mode, boundary, limit, me)
		if err == errNotFilled {
			if err = b.rebuild(ctx, id, ps, pe); err == nil {
				p, err = b.readRedis(ctx, id, ps, mode, boundary, limit, me)
			}
		}
		switch {
		case err == nil:
			b.metrics.read(sourceRedis)
			return p, nil
		case err != errNotFilled:
			b.redis.Failed(err)
		}
	}
	p, err := readMySQL(ctx, b.reads, id, ps, mode, boundary, limit, me)
	if err != nil {
		return page{}, apperr.Wrap(apperr.Unavailable, "boards unavailable, try again", err)
	}
	b.metrics.read(sourceMySQL)
	return p, nil
}

func (b *Boards) readRedis(ctx context.Context, id, ps int64, mode string, boundary Entry, limit int, me string) (page, error) {
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RedisTimeout)
	defer cancel()
	return b.cache.read(rctx, id, ps, mode, boundary, limit, me)
}

// rebuild writes a board from MySQL into Redis and marks it filled; the
// reads that find one board missing at once share one rebuild.
func (b *Boards) rebuild(ctx context.Context, id, ps, pe int64) error {
	_, err, _ := b.rebuilds.Do(fmt.Sprint(id, ":", ps), func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.WriteTimeout)
		defer cancel()
		return nil, rebuildBoard(rctx, b.db, b.cache, id, ps, pe)
	})
	if err == nil {
		b.metrics.rebuilt()
	}
	return err
}

// rebuildBoard writes one board (activity id, period ps..pe) from MySQL
// into Redis, in chunks, and marks it filled with the last one. Safe
// beside the consumer: both only raise entries.
func rebuildBoard(ctx context.Context, db *sql.DB, c *boardCache, id, ps, pe int64) error {
	rows, err := db.QueryContext(ctx, `SELECT subject, score, reached_at_ms FROM activity_scores WHERE activity_id = ? AND period_start_ms = ?`, id, ps)
	if err != nil {
		return err
	}
	var all []Entry
	for rows.Next() {
		var e Entry
		if err := rows.Scan(&e.Subject, &e.Score, &e.ReachedAtMs); err != nil {
			rows.Close()
			return err
		}
		all = append(all, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for i := 0; ; i += rebuildChunk {
		chunk := all[i:min(i+rebuildChunk, len(all))]
		last := i+rebuildChunk >= len(all)
		if err := c.raise(ctx, id, ps, pe, chunk, last); err != nil {
			return err
		}
		if last {
			return nil
		}
	}
}

// The board's order in SQL (compareEntries), and the conditions of the
// entries before and after a boundary.
const (
	orderDesc  = ` ORDER BY score DESC, reached_at_ms ASC, BINARY subject ASC`
	orderAsc   = ` ORDER BY score ASC, reached_at_ms DESC, BINARY subject DESC`
	beforeCond = ` AND (score > ? OR (score = ? AND (reached_at_ms < ? OR (reached_at_ms = ? AND BINARY subject < ?))))`
	afterCond  = ` AND (score < ? OR (score = ? AND (reached_at_ms > ? OR (reached_at_ms = ? AND BINARY subject > ?))))`
	boardFrom  = `SELECT subject, score, reached_at_ms FROM activity_scores WHERE activity_id = ? AND period_start_ms = ?`
)

func boundaryArgs(e Entry) []any {
	return []any{e.Score, e.Score, e.ReachedAtMs, e.ReachedAtMs, e.Subject}
}

// readMySQL reads a page as pageScript does, from MySQL.
func readMySQL(ctx context.Context, db *sql.DB, id, ps int64, mode string, boundary Entry, limit int, me string) (page, error) {
	var p page
	var meEntry Entry
	if me != "" {
		err := db.QueryRowContext(ctx, boardFrom+` AND subject = ?`, id, ps, me).Scan(&meEntry.Subject, &meEntry.Score, &meEntry.ReachedAtMs)
		switch {
		case err == sql.ErrNoRows:
		case err != nil:
			return p, err
		default:
			n, err := countBefore(ctx, db, id, ps, meEntry)
			if err != nil {
				return p, err
			}
			p.meRank, p.meScore = n+1, meEntry.Score
		}
	}
	args := []any{id, ps}
	var q string
	switch {
	case mode == modeAround && p.meRank > 0:
		p.start = max(0, p.meRank-1-limit/2)
		q = boardFrom + orderDesc + fmt.Sprintf(" LIMIT %d OFFSET %d", limit+1, p.start)
	case mode == modeAfter:
		q, args = boardFrom+afterCond+orderDesc+fmt.Sprintf(" LIMIT %d", limit+1), append(args, boundaryArgs(boundary)...)
	case mode == modeBefore:
		q, args = boardFrom+beforeCond+orderAsc+fmt.Sprintf(" LIMIT %d", limit), append(args, boundaryArgs(boundary)...)
	default:
		top, err := readTop(ctx, db, id, ps, limit+1)
		if err != nil {
			return p, err
		}
		p.entries = top
		return p, nil
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	for rows.Next() {
		var e Entry
		if err := rows.Scan(&e.Subject, &e.Score, &e.ReachedAtMs); err != nil {
			return p, err
		}
		p.entries = append(p.entries, e)
	}
	if err := rows.Err(); err != nil {
		return p, err
	}
	if mode == modeBefore {
		slices.Reverse(p.entries)
	}
	if (mode == modeAfter || mode == modeBefore) && len(p.entries) > 0 {
		n, err := countBefore(ctx, db, id, ps, p.entries[0])
		if err != nil {
			return p, err
		}
		p.start = n
	}
	return p, nil
}

// countBefore counts the entries ahead of e on a board: three ranges of
// idx_activity_board (a higher score; the same score reached earlier; the
// same score and time, a smaller subject), each read by the index alone.
func countBefore(ctx context.Context, db *sql.DB, id, ps int64, e Entry) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM activity_scores WHERE activity_id = ? AND period_start_ms = ? AND score > ?) +
		(SELECT COUNT(*) FROM activity_scores WHERE activity_id = ? AND period_start_ms = ? AND score = ? AND reached_at_ms < ?) +
		(SELECT COUNT(*) FROM activity_scores WHERE activity_id = ? AND period_start_ms = ? AND score = ? AND reached_at_ms = ? AND BINARY subject < ?)`,
		id, ps, e.Score, id, ps, e.Score, e.ReachedAtMs, id, ps, e.Score, e.ReachedAtMs, e.Subject).Scan(&n)
	return n, err
}

// readTop reads the first n entries of a board. The index orders by score
// only, so it reads the n-th highest score first (a backward scan of n
// index entries) and then every entry at or above it (a range), and
// orders those: no sort of the whole board.
func readTop(ctx context.Context, db *sql.DB, id, ps int64, n int) ([]Entry, error) {
	var floor int64
	err := db.QueryRowContext(ctx, `SELECT score FROM activity_scores WHERE activity_id = ? AND period_start_ms = ?
		ORDER BY score DESC LIMIT 1 OFFSET `+strconv.Itoa(n-1), id, ps).Scan(&floor)
	if err == sql.ErrNoRows {
		floor = 0 // fewer than n entries: all of them
	} else if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, boardFrom+` AND score >= ?`, id, ps, floor)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		if err := rows.Scan(&e.Subject, &e.Score, &e.ReachedAtMs); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, compareEntries)
	return out[:min(n, len(out))], nil
}
