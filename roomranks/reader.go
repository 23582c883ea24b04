package roomranks

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/internal/redisgate"
)

// Limits of a read.
const (
	// DefaultLimit is the length of a rank when the caller names none.
	DefaultLimit = 20
	// MaxLimit is the longest rank a read returns.
	MaxLimit = 100
)

// Query asks for one rank of a room.
type Query struct {
	AppCode string
	RoomID  string
	// UserID is the caller, whose place the answer gives.
	UserID int64
	By     By
	Period Period
	// Limit is how many of the top the answer lists: 1..MaxLimit.
	Limit int
}

// Item is one user's place in a rank.
type Item struct {
	UserID int64 `json:"user_id"`
	Value  int64 `json:"value"`
	Rank   int   `json:"rank"`
}

// Place is the caller's place: rank (1 is the top) and coins.
type Place struct {
	Rank  int   `json:"rank"`
	Value int64 `json:"value"`
}

// Page is the answer to a Query (docs/openapi.yaml, schema RoomRank).
type Page struct {
	RoomID        string `json:"room_id"`
	By            By     `json:"by"`
	Period        Period `json:"period"`
	TimeZone      string `json:"time_zone"`
	PeriodStartMs int64  `json:"period_start_ms"`
	PeriodEndMs   int64  `json:"period_end_ms"`
	Items         []Item `json:"items"`
	// Me is the caller's place; nil when the caller has no coins in it.
	Me *Place `json:"me"`
}

// Reader answers rank reads: from the Redis sets when they are there,
// else from MySQL, then filling the set so the next read finds it.
type Reader struct {
	db      *sql.DB
	cache   *cache
	cal     *Calendar
	cfg     Config
	log     *slog.Logger
	metrics *Metrics

	loads singleflight.Group // one MySQL read (and fill) at a time per set
	redis *redisgate.Gate    // whether a read may use Redis now (nil without Redis)
}

// NewReader returns a Reader over db and rdb; rdb may be nil (MySQL
// only), m may be nil.
func NewReader(db *sql.DB, rdb redis.UniversalClient, cfg Config, log *slog.Logger, m *Metrics) (*Reader, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, fmt.Errorf("%w: the ranks reader needs a database", ErrInvalidConfig)
	}
	cal, err := NewCalendar(cfg.TimeZones)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "roomranks")
	return &Reader{db: db, cache: newCache(rdb, cfg), cal: cal, cfg: cfg, log: log, metrics: m,
		redis: redisgate.New(rdb, cfg.RedisTimeout, "ranks", log, func() { m.redisFailed(opRead) })}, nil
}

// Read answers q for the period holding now. Errors: INVALID_ARGUMENT
// for a bad limit, NOT_FOUND for a room the app does not have (a room id
// without the app's prefix is not looked up), UNAVAILABLE when MySQL
// fails while Redis cannot answer.
func (r *Reader) Read(ctx context.Context, q Query) (Page, error) {
	if q.Limit < 1 || q.Limit > MaxLimit {
		return Page{}, apperr.Invalid("limit", "must be 1..%d", MaxLimit)
	}
	if _, err := ParseBy(string(q.By)); err != nil {
		return Page{}, err
	}
	if _, err := ParsePeriod(string(q.Period)); err != nil {
		return Page{}, err
	}
	if len(q.RoomID) > voiceroom.RoomIDMax || !strings.HasPrefix(q.RoomID, q.AppCode+"_") {
		return Page{}, apperr.New(apperr.NotFound, "room not found")
	}
	w := r.cal.Window(q.AppCode, q.Period, r.cfg.Now().UnixMilli())
	page := Page{RoomID: q.RoomID, By: q.By, Period: q.Period, TimeZone: r.cal.Location(q.AppCode).String(),
		PeriodStartMs: w.StartMs, PeriodEndMs: w.EndMs, Items: []Item{}}
	if r.redisUp() {
		rctx, cancel := context.WithTimeout(ctx, r.cfg.RedisTimeout)
		top, me, ok, err := r.cache.read(rctx, q.AppCode, q.RoomID, q.By, w, q.Limit, q.UserID)
		cancel()
		switch {
		case err != nil:
			r.redisFailed(err)
		case ok:
			r.metrics.read(sourceRedis)
			page.Me = me
			for i, e := range top {
				page.Items = append(page.Items, Item{UserID: e.UserID, Value: e.Value, Rank: i + 1})
			}
			return page, nil
		}
	}
	l, err := r.load(ctx, q.AppCode, q.RoomID, q.By, w)
	if err != nil {
		return Page{}, err
	}
	if !l.found {
		return Page{}, apperr.New(apperr.NotFound, "room not found")
	}
	r.metrics.read(sourceMySQL)
	for i, e := range l.entries {
		if i < q.Limit {
			page.Items = append(page.Items, Item{UserID: e.UserID, Value: e.Value, Rank: i + 1})
		}
		if e.UserID == q.UserID {
			page.Me = &Place{Rank: i + 1, Value: e.Value}
		}
	}
	return page, nil
}

// load reads a rank from MySQL and, when Redis is up, fills its set; the
// callers that ask for one set at once share one load.
func (r *Reader) load(ctx context.Context, app, room string, by By, w Window) (loaded, error) {
	key := app + "\x00" + room + "\x00" + string(by) + "\x00" + string(w.Period) + "\x00" + strconv.FormatInt(w.StartMs, 10)
	v, err, _ := r.loads.Do(key, func() (any, error) {
		// Shared by several requests: the first one's cancellation must
		// not fail the others.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.WriteTimeout)
		defer cancel()
		l, err := loadSums(lctx, r.db, app, room, by, w)
		if err != nil {
			r.metrics.mysqlFailed()
			return loaded{}, apperr.Wrap(apperr.Unavailable, "ranks unavailable, try again", err)
		}
		if l.found && r.redisUp() {
			res, err := r.cache.fill(lctx, app, room, by, w, l, false, r.cfg.Now().UnixMilli())
			if err != nil {
				r.redisFailed(err)
			} else {
				r.metrics.refill(res)
			}
		}
		return l, nil
	})
	if err != nil {
		return loaded{}, err
	}
	return v.(loaded), nil
}

// redisUp reports whether a read may use Redis (see redisgate).
func (r *Reader) redisUp() bool { return r.redis.Up() }

// redisFailed notes a Redis error: reads leave Redis alone for a while,
// then probe it (see redisgate).
func (r *Reader) redisFailed(err error) { r.redis.Failed(err) }
