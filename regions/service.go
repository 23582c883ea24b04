package regions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/mysqldb"
	"voiceroom/promreg"
)

// Config configures a Service. The zero value is valid: zero fields take
// the defaults given.
type Config struct {
	// CacheSize bounds the in-process user profile cache, in users.
	// 1..10000000, default 100000 (about 10 MB).
	CacheSize int
	// CacheTTL is the longest an entry is served after it was read from
	// MySQL. Changes made through this Service invalidate at once; changes made
	// by another process are seen within CacheTTL. At most 10m, default 3s.
	CacheTTL time.Duration
	// DisableCache makes every lookup read MySQL.
	DisableCache bool
	// RebuildBatch is how many users one rebuild transaction recomputes.
	// 1..5000, default 500.
	RebuildBatch int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.CacheSize == 0 {
		c.CacheSize = 100_000
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = 3 * time.Second
	}
	if c.RebuildBatch == 0 {
		c.RebuildBatch = 500
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate checks c after defaults are applied; it never changes c. Errors
// are *apperr.ConfigError naming the field.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.CacheSize < 0 || c.CacheSize > 10_000_000:
		return apperr.BadConfig("CacheSize", "cache size %d: want 1..10000000", c.CacheSize)
	case c.CacheTTL < 0 || c.CacheTTL > 10*time.Minute:
		return apperr.BadConfig("CacheTTL", "cache ttl %v: want up to 10m", c.CacheTTL)
	case c.RebuildBatch < 1 || c.RebuildBatch > 5000:
		return apperr.BadConfig("RebuildBatch", "rebuild batch %d: want 1..5000", c.RebuildBatch)
	}
	return nil
}

// Service owns countries, regions and users' regions of every app. It is safe
// for concurrent use.
type Service struct {
	db    *sql.DB
	log   *slog.Logger
	cfg   Config
	now   func() time.Time
	cache *cache // nil when disabled
	stmts *stmtCache

	// afterMappingRead, when set (by tests only), runs inside PutProfile's
	// transaction between the mapping read and the user's lock: the window
	// an operator's concurrent change must not slip through.
	afterMappingRead func()
}

// New returns a Service on db, whose migrations must be applied: it prepares
// its frequent statements there, within ctx. reg, when not nil, receives the
// cache metrics. Close releases the statements.
func New(ctx context.Context, db *sql.DB, log *slog.Logger, reg prometheus.Registerer, cfg Config) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("regions: %w", err)
	}
	stmts, err := newStmtCache(ctx, db, hotStatements())
	if err != nil {
		return nil, fmt.Errorf("regions: %w", err)
	}
	s := &Service{db: db, log: log, cfg: cfg, now: cfg.Now, stmts: stmts}
	if !cfg.DisableCache {
		s.cache = newCache(cfg.CacheSize, cfg.CacheTTL)
		r := promreg.On(reg)
		s.cache.register(r)
		if err := r.Err(); err != nil {
			stmts.close()
			return nil, fmt.Errorf("regions metrics: %w", err)
		}
	}
	return s, nil
}

// Close releases the prepared statements. Call it after the last request,
// before closing db.
func (s *Service) Close() { s.stmts.close() }

// UserRegion returns the user's display_user_id and region_id (0 = GLOBAL). A user without a profile is an *apperr.Error of kind NotFound; a store failure is kind Unavailable.
//
// It is the hot path of room creation and listing: answered from the
// in-process cache when it can (see profile). It fails closed: when the
// user cannot be read, the caller gets the error, never a stale or default
// region.
func (s *Service) UserRegion(ctx context.Context, appCode string, userID int64) (displayUserID string, regionID int64, err error) {
	p, err := s.profile(ctx, appCode, userID)
	if err != nil {
		return "", 0, err
	}
	return p.DisplayUserID, p.RegionID, nil
}

// profile returns the user's profile from the in-process cache, or reads
// it from MySQL and caches it. A change made through this Service is seen
// at once; one made by another process within CacheTTL.
func (s *Service) profile(ctx context.Context, appCode string, userID int64) (Profile, error) {
	k := cacheKey{app: appCode, user: userID}
	now := s.now()
	var gen uint64
	if s.cache != nil {
		if e, ok := s.cache.get(k, now); ok {
			return e.profile, nil
		}
		gen = s.cache.generation(k)
	}
	if err := validAppCode(appCode); err != nil {
		return Profile{}, err
	}
	if err := validUserID("user_id", userID); err != nil {
		return Profile{}, err
	}
	p, _, err := readProfile(ctx, s.stmts.on(nil), appCode, userID)
	if err != nil {
		return Profile{}, err
	}
	if s.cache != nil {
		// now was taken before the read, so the entry expires no later than
		// CacheTTL after the value was current.
		s.cache.put(k, p, now, gen)
	}
	return p, nil
}

// CheckRegion returns nil when regionID is 0 (GLOBAL) or an active region of appCode; otherwise an *apperr.Error (InvalidArgument naming field "region_id", or NotFound).
//
// A store failure is kind Unavailable.
func (s *Service) CheckRegion(ctx context.Context, appCode string, regionID int64) error {
	if err := checkRegionID(regionID); err != nil {
		return err
	}
	if regionID == 0 {
		return nil
	}
	if err := validAppCode(appCode); err != nil {
		return err
	}
	r, err := readRegion(ctx, s.db, appCode, regionID, false)
	if err != nil {
		return err
	}
	return activeRegion(r)
}

func activeRegion(r Region) error {
	if r.Status != StatusActive {
		return apperr.Invalid("region_id", "region %d is disabled", r.ID)
	}
	return nil
}

// update runs fn in a transaction retried on deadlock. Failures that carry no
// kind (begin, commit, retries exhausted) are the store's: Unavailable.
func (s *Service) update(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	err := mysqldb.Update(ctx, s.db, fn)
	var ae *apperr.Error
	if err != nil && !errors.As(err, &ae) {
		return unavailable(op, err)
	}
	return err
}

// invalidate drops users from this process's cache after their change
// committed. Other processes see the change within CacheTTL.
func (s *Service) invalidate(app string, userIDs ...int64) {
	if s.cache == nil {
		return
	}
	for _, id := range userIDs {
		s.cache.invalidate(cacheKey{app: app, user: id})
	}
}

func (s *Service) nowMs() int64 { return s.now().UnixMilli() }
