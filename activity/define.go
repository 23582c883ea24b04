package activity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/mysqldb"
)

// ErrInvalidDefineConfig wraps every DefineConfig and NewDefiner error.
var ErrInvalidDefineConfig = errors.New("activity: invalid definitions config")

// The limits of a definition (docs/activities.md, "Limits").
const (
	MaxNameLen      = 128                 // characters, the name column's width
	MaxWindow       = 90 * 24 * time.Hour // ends_at_ms - starts_at_ms
	MaxAhead        = 365 * 24 * time.Hour
	MaxGiftIDs      = 100
	MaxRegionIDs    = 100
	MaxBands        = 50
	MaxRewardedRank = 1000 // the ranks a leaderboard may reward: 1..MaxRewardedRank
	MaxTarget       = 1_000_000_000_000
	// DefaultMaxRewardCoins is DefineConfig.MaxRewardCoins's default, and
	// MaxMaxRewardCoins its bound (so that no band's sum overflows).
	DefaultMaxRewardCoins = 10_000_000
	MaxMaxRewardCoins     = 1_000_000_000_000
)

// DefineConfig configures a Definer. Zero fields take their defaults.
type DefineConfig struct {
	// MaxRewardCoins is the budget of one activity (max_reward_coins): a
	// leaderboard whose bands could pay more in all is refused, and so is
	// a task whose reward_coins (paid per user per period) is above it.
	// Default DefaultMaxRewardCoins, at most MaxMaxRewardCoins.
	// VOICEROOM_ACTIVITY_MAX_REWARD_COINS.
	MaxRewardCoins int64
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Log records each activity created and cancelled, with its app and
	// operator. Default: discarded.
	Log *slog.Logger
}

// WithDefaults returns c with zero fields set to their defaults.
func (c DefineConfig) WithDefaults() DefineConfig {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.MaxRewardCoins == 0 {
		c.MaxRewardCoins = DefaultMaxRewardCoins
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate checks c after defaults; it never changes c.
func (c DefineConfig) Validate() error {
	c = c.WithDefaults()
	checks := apperr.NewConfigChecks(ErrInvalidDefineConfig)
	checks.Check(c.MaxRewardCoins > 0 && c.MaxRewardCoins <= MaxMaxRewardCoins, "MaxRewardCoins",
		"want 1..%d, got %d", int64(MaxMaxRewardCoins), c.MaxRewardCoins)
	return checks.Err()
}

// Definition is an operator's new activity: the body of POST
// /admin/v1/activities (docs/openapi.yaml, schema NewActivity).
type Definition struct {
	Name        string  `json:"name"`
	Kind        Kind    `json:"kind"`
	Metric      Metric  `json:"metric"`
	GiftIDs     []int64 `json:"gift_ids"`
	RegionIDs   []int64 `json:"region_ids"`
	StartsAtMs  int64   `json:"starts_at_ms"`
	EndsAtMs    int64   `json:"ends_at_ms"`
	Rewards     []Band  `json:"rewards"`
	Target      int64   `json:"target"`
	Period      Period  `json:"period"`
	RewardCoins int64   `json:"reward_coins"`
}

// RegionChecker says whether a region is one of an app's
// (*regions.Service is one): nil for region 0 (GLOBAL) and an active
// region of the app; NOT_FOUND or INVALID_ARGUMENT otherwise.
type RegionChecker interface {
	CheckRegion(ctx context.Context, appCode string, regionID int64) error
}

// Definer is the operators' side of activities: it validates a new
// activity (every refusal a 400 naming its field, nothing created) and
// stores it, lists, reads and cancels an app's activities, and lists
// those a user's region sees.
type Definer struct {
	store   *Store
	regions RegionChecker
	js      jetstream.JetStream
	cfg     DefineConfig
}

// NewDefiner returns the definitions over store; regions checks region
// ids; js is where it reads how far back ROOM_EVENTS holds events (a
// start in the past is allowed only that far back).
func NewDefiner(store *Store, regions RegionChecker, js jetstream.JetStream, cfg DefineConfig) (*Definer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil || regions == nil || js == nil {
		return nil, fmt.Errorf("%w: definitions need a store, regions and jetstream", ErrInvalidDefineConfig)
	}
	return &Definer{store: store, regions: regions, js: js, cfg: cfg}, nil
}

// MaxRewardCoins is the budget of one activity.
func (d *Definer) MaxRewardCoins() int64 { return d.cfg.MaxRewardCoins }

// Create validates def and stores it as a new activity of app, made by
// operator. Bad input is INVALID_ARGUMENT naming the field; an app with
// MaxOpenPerApp activities not yet ended is FAILED_PRECONDITION; MySQL or
// JetStream unreachable is UNAVAILABLE. Nothing is stored unless it
// answers nil.
func (d *Definer) Create(ctx context.Context, app, operator string, def Definition) (Activity, error) {
	nowMs := d.cfg.Now().UnixMilli()
	a, err := def.check(nowMs, d.cfg.MaxRewardCoins)
	if err != nil {
		return Activity{}, err
	}
	if err := d.checkGifts(ctx, app, a.GiftIDs); err != nil {
		return Activity{}, err
	}
	if err := d.checkRegions(ctx, app, a.RegionIDs); err != nil {
		return Activity{}, err
	}
	if a.StartsAtMs < nowMs {
		if err := d.checkHeld(ctx, a.StartsAtMs); err != nil {
			return Activity{}, err
		}
	}
	a.AppCode, a.CreatedBy = app, clip(operator, 64)
	if a, err = d.store.Create(ctx, a); err != nil {
		return Activity{}, err
	}
	d.cfg.Log.Info("activity created", "app_code", app, "activity_id", a.ID, "kind", a.Kind, "metric", a.Metric,
		"starts_at_ms", a.StartsAtMs, "ends_at_ms", a.EndsAtMs, "operator", operator)
	return a, nil
}

// Get returns app's activity id (NOT_FOUND for another app's).
func (d *Definer) Get(ctx context.Context, app string, id int64) (Activity, error) {
	return d.store.Get(ctx, app, id)
}

// Page is one page of an app's activities, oldest first. NextCursor is ""
// on the last page.
type Page struct {
	Items      []Activity `json:"items"`
	NextCursor string     `json:"next_cursor"`
}

// List returns one page of app's activities after cursor ("" for the
// first page; otherwise a NextCursor this returned): limit 0 is
// DefaultListLimit, at most MaxListLimit.
func (d *Definer) List(ctx context.Context, app string, limit int, cursor string) (Page, error) {
	if limit < 0 || limit > MaxListLimit {
		return Page{}, apperr.Invalid("limit", "must be 1..%d", MaxListLimit)
	}
	var after int64
	if cursor != "" {
		if _, err := fmt.Sscan(cursor, &after); err != nil || after <= 0 || fmt.Sprint(after) != cursor {
			return Page{}, apperr.Invalid("cursor", "is not a cursor this route returned")
		}
	}
	items, more, err := d.store.List(ctx, app, after, limit)
	if err != nil {
		return Page{}, err
	}
	p := Page{Items: items}
	if more {
		p.NextCursor = fmt.Sprint(items[len(items)-1].ID)
	}
	return p, nil
}

// Cancel cancels app's activity id for operator before its settlement
// pays (see Store.Cancel).
func (d *Definer) Cancel(ctx context.Context, app, operator string, id int64) (Activity, error) {
	a, err := d.store.Cancel(ctx, app, id)
	if err != nil {
		return Activity{}, err
	}
	d.cfg.Log.Info("activity cancelled", "app_code", app, "activity_id", id, "operator", operator)
	return a, nil
}

// Visible returns the activities a user of region sees: app's scheduled
// and running ones for every region or naming region.
func (d *Definer) Visible(ctx context.Context, app string, region int64) ([]Activity, error) {
	return d.store.Visible(ctx, app, region)
}

// check validates d's own fields at nowMs under the budget maxReward and
// returns the activity it defines (its app and catalog checks aside).
func (d Definition) check(nowMs, maxReward int64) (Activity, error) {
	name := strings.TrimSpace(d.Name)
	switch {
	case name == "":
		return Activity{}, apperr.Invalid("name", "is required")
	case !utf8.ValidString(name):
		return Activity{}, apperr.Invalid("name", "must be UTF-8")
	case utf8.RuneCountInString(name) > MaxNameLen:
		return Activity{}, apperr.Invalid("name", "at most %d characters", MaxNameLen)
	}
	if d.Kind != Leaderboard && d.Kind != Task {
		return Activity{}, apperr.Invalid("kind", "must be leaderboard or task, got %q", d.Kind)
	}
	switch d.Metric {
	case GiftValueSent, GiftValueReceived, RoomGiftValue, GiftCount, MicSeconds:
	default:
		return Activity{}, apperr.Invalid("metric", "must be one of gift_value_sent, gift_value_received, room_gift_value, gift_count, mic_seconds; got %q", d.Metric)
	}
	if d.Kind == Task && d.Metric == RoomGiftValue {
		// A task rewards each user's own progress; a room's is a leaderboard's.
		return Activity{}, apperr.Invalid("metric", "room_gift_value scores rooms: it is for a leaderboard, not a task")
	}
	if err := checkIDs("gift_ids", d.GiftIDs, MaxGiftIDs, 1); err != nil {
		return Activity{}, err
	}
	if len(d.GiftIDs) > 0 && d.Metric == MicSeconds {
		return Activity{}, apperr.Invalid("gift_ids", "only for a gift metric, not mic_seconds")
	}
	if err := checkIDs("region_ids", d.RegionIDs, MaxRegionIDs, 0); err != nil {
		return Activity{}, err
	}
	switch {
	case d.StartsAtMs <= 0:
		return Activity{}, apperr.Invalid("starts_at_ms", "is required (Unix milliseconds)")
	case d.StartsAtMs > nowMs+MaxAhead.Milliseconds():
		return Activity{}, apperr.Invalid("starts_at_ms", "at most %d days ahead", int(MaxAhead.Hours()/24))
	case d.EndsAtMs <= d.StartsAtMs:
		return Activity{}, apperr.Invalid("ends_at_ms", "must be after starts_at_ms")
	case d.EndsAtMs-d.StartsAtMs > MaxWindow.Milliseconds():
		return Activity{}, apperr.Invalid("ends_at_ms", "the window is at most %d days long", int(MaxWindow.Hours()/24))
	}
	a := Activity{Name: name, Kind: d.Kind, Metric: d.Metric, GiftIDs: nilIfEmpty(d.GiftIDs), RegionIDs: nilIfEmpty(d.RegionIDs),
		StartsAtMs: d.StartsAtMs, EndsAtMs: d.EndsAtMs}
	if d.Kind == Leaderboard {
		switch {
		case d.Target != 0:
			return Activity{}, apperr.Invalid("target", "only for a task")
		case d.Period != "":
			return Activity{}, apperr.Invalid("period", "only for a task")
		case d.RewardCoins != 0:
			return Activity{}, apperr.Invalid("reward_coins", "only for a task; a leaderboard pays by its rewards")
		}
		bands, err := checkBands(d.Rewards, maxReward)
		if err != nil {
			return Activity{}, err
		}
		a.Rewards = bands
		return a, nil
	}
	switch {
	case len(d.Rewards) > 0:
		return Activity{}, apperr.Invalid("rewards", "only for a leaderboard; a task pays reward_coins")
	case d.Target <= 0 || d.Target > MaxTarget:
		return Activity{}, apperr.Invalid("target", "must be 1..%d, in the metric's unit", int64(MaxTarget))
	case d.Period != Day && d.Period != Week && d.Period != Window:
		return Activity{}, apperr.Invalid("period", "must be day, week or window, got %q", d.Period)
	case d.RewardCoins <= 0:
		return Activity{}, apperr.Invalid("reward_coins", "must be above 0")
	case d.RewardCoins > maxReward:
		return Activity{}, apperr.Invalid("reward_coins", "%d is above the activity budget max_reward_coins %d", d.RewardCoins, maxReward)
	}
	a.Target, a.Period, a.RewardCoins = d.Target, d.Period, d.RewardCoins
	return a, nil
}

// checkIDs checks a list of ids: at most limit, each at least least,
// none twice.
func checkIDs(field string, ids []int64, limit int, least int64) error {
	if len(ids) > limit {
		return apperr.Invalid(field, "at most %d ids", limit)
	}
	seen := make(map[int64]bool, len(ids))
	for i, id := range ids {
		if id < least {
			return apperr.Invalid(fmt.Sprintf("%s[%d]", field, i), "must be at least %d, got %d", least, id)
		}
		if seen[id] {
			return apperr.Invalid(fmt.Sprintf("%s[%d]", field, i), "%d appears twice", id)
		}
		seen[id] = true
	}
	return nil
}

// checkBands checks a leaderboard's reward bands and returns them by rank:
// at least one and at most MaxBands, each from_rank >= 1, to_rank >=
// from_rank and at most MaxRewardedRank, coins above 0, no two overlapping,
// all of them paying at most maxReward.
func checkBands(in []Band, maxReward int64) ([]Band, error) {
	switch {
	case len(in) == 0:
		return nil, apperr.Invalid("rewards", "a leaderboard needs at least one band {from_rank, to_rank, coins}")
	case len(in) > MaxBands:
		return nil, apperr.Invalid("rewards", "at most %d bands", MaxBands)
	}
	for i, b := range in {
		field := fmt.Sprintf("rewards[%d]", i)
		switch {
		case b.FromRank < 1:
			return nil, apperr.Invalid(field+".from_rank", "must be at least 1")
		case b.ToRank < b.FromRank:
			return nil, apperr.Invalid(field+".to_rank", "must be at least from_rank (%d)", b.FromRank)
		case b.ToRank > MaxRewardedRank:
			return nil, apperr.Invalid(field+".to_rank", "at most %d ranks are rewarded: to_rank at most %d", MaxRewardedRank, MaxRewardedRank)
		case b.Coins <= 0:
			return nil, apperr.Invalid(field+".coins", "must be above 0")
		case b.Coins > maxReward:
			return nil, apperr.Invalid(field+".coins", "%d is above the activity budget max_reward_coins %d", b.Coins, maxReward)
		}
	}
	bands := slices.Clone(in)
	slices.SortStableFunc(bands, func(x, y Band) int { return x.FromRank - y.FromRank })
	var total int64 // at most MaxRewardedRank * MaxMaxRewardCoins: no overflow
	for i, b := range bands {
		if i > 0 && b.FromRank <= bands[i-1].ToRank {
			return nil, apperr.Invalid("rewards", "bands %d..%d and %d..%d overlap", bands[i-1].FromRank, bands[i-1].ToRank, b.FromRank, b.ToRank)
		}
		total += int64(b.ToRank-b.FromRank+1) * b.Coins
	}
	if total > maxReward {
		return nil, apperr.Invalid("rewards", "the bands pay up to %d coins, above the activity budget max_reward_coins %d", total, maxReward)
	}
	return bands, nil
}

// checkGifts checks that each gift id is in app's catalog (table gifts;
// a disabled gift still counts when it is sent).
func (d *Definer) checkGifts(ctx context.Context, app string, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, app)
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := d.store.db.QueryContext(ctx, `SELECT gift_id FROM gifts WHERE app_code = ? AND gift_id IN (`+
		mysqldb.Placeholders(len(ids))+`)`, args...)
	if err != nil {
		return storage(fmt.Errorf("read gifts of %s: %w", app, err))
	}
	defer rows.Close()
	found := make(map[int64]bool, len(ids))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return storage(fmt.Errorf("read gifts of %s: %w", app, err))
		}
		found[id] = true
	}
	if err := rows.Err(); err != nil {
		return storage(fmt.Errorf("read gifts of %s: %w", app, err))
	}
	for i, id := range ids {
		if !found[id] {
			return apperr.Invalid(fmt.Sprintf("gift_ids[%d]", i), "gift %d is not in the app's catalog", id)
		}
	}
	return nil
}

// checkRegions checks that each region id is 0 (GLOBAL) or an active
// region of app; another app's is as unknown as one that does not exist.
func (d *Definer) checkRegions(ctx context.Context, app string, ids []int64) error {
	for i, id := range ids {
		err := d.regions.CheckRegion(ctx, app, id)
		switch {
		case err == nil:
		case apperr.Is(err, apperr.NotFound):
			return apperr.Invalid(fmt.Sprintf("region_ids[%d]", i), "region %d is not a region of this app", id)
		case apperr.Is(err, apperr.InvalidArgument):
			return apperr.Invalid(fmt.Sprintf("region_ids[%d]", i), "%s", strings.TrimPrefix(apperr.MessageOf(err), "region_id: "))
		default:
			return err
		}
	}
	return nil
}

// streamReadTimeout bounds checkHeld's read, so that JetStream down fails
// the creation instead of holding it to the request's deadline.
const streamReadTimeout = 5 * time.Second

// checkHeld refuses a start before the oldest event ROOM_EVENTS still
// holds: an activity read back from its start must find every event from
// it. A stream message is stored after its event was committed, so every
// event committed at or after the first message's time is still held.
// An empty stream that once held events holds none before its last one's
// time; a stream never provisioned or never written lost nothing.
func (d *Definer) checkHeld(ctx context.Context, startMs int64) error {
	oldest, bounded, err := OldestHeld(ctx, d.js)
	if err != nil {
		return err
	}
	// An event of the millisecond before the oldest message's may have
	// been stored before it, and be gone: the bound is the next whole
	// millisecond.
	oldestMs := oldest.UnixMilli()
	if oldest.After(time.UnixMilli(oldestMs)) {
		oldestMs++
	}
	if bounded && startMs < oldestMs {
		return apperr.Invalid("starts_at_ms", "%d is before the oldest event %s holds (%s, %d ms): a start in the past may go back only that far",
			startMs, bus.StreamName, time.UnixMilli(oldestMs).UTC().Format(time.RFC3339Nano), oldestMs).
			WithDetails(map[string]int64{"oldest_held_ms": oldestMs})
	}
	return nil
}

// OldestHeld is the time from which ROOM_EVENTS holds every event stored:
// its first message's time, or, when it holds none, its last one's;
// bounded is false when the stream was never provisioned or never
// written to. JetStream unreachable is UNAVAILABLE.
func OldestHeld(ctx context.Context, js jetstream.JetStream) (oldest time.Time, bounded bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, streamReadTimeout)
	defer cancel()
	st, err := js.Stream(ctx, bus.StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, apperr.Wrap(apperr.Unavailable, "activities unavailable, try again", fmt.Errorf("read stream %s: %w", bus.StreamName, err))
	}
	state := st.CachedInfo().State
	switch {
	case state.Msgs > 0:
		return state.FirstTime, true, nil
	case state.LastSeq > 0:
		return state.LastTime, true, nil
	}
	return time.Time{}, false, nil
}

func nilIfEmpty(ids []int64) []int64 {
	if len(ids) == 0 {
		return nil
	}
	return slices.Clone(ids)
}

// clip cuts s to n characters (the created_by column's width).
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// UserActivity is an activity as its users see it (GET /api/v1/activities;
// docs/openapi.yaml, schema UserActivity): its definition and status,
// without who made it.
type UserActivity struct {
	ID          int64   `json:"activity_id"`
	Name        string  `json:"name"`
	Kind        Kind    `json:"kind"`
	Metric      Metric  `json:"metric"`
	GiftIDs     []int64 `json:"gift_ids,omitempty"`
	RegionIDs   []int64 `json:"region_ids,omitempty"`
	StartsAtMs  int64   `json:"starts_at_ms"`
	EndsAtMs    int64   `json:"ends_at_ms"`
	Rewards     []Band  `json:"rewards,omitempty"`
	Target      int64   `json:"target,omitempty"`
	Period      Period  `json:"period,omitempty"`
	RewardCoins int64   `json:"reward_coins,omitempty"`
	Status      Status  `json:"status"`
}

// ForUser is a as its users see it.
func (a Activity) ForUser() UserActivity {
	return UserActivity{ID: a.ID, Name: a.Name, Kind: a.Kind, Metric: a.Metric, GiftIDs: a.GiftIDs, RegionIDs: a.RegionIDs,
		StartsAtMs: a.StartsAtMs, EndsAtMs: a.EndsAtMs, Rewards: a.Rewards, Target: a.Target, Period: a.Period,
		RewardCoins: a.RewardCoins, Status: a.Status}
}

// SeenBy returns app's activity id as a user of region may see it:
// NOT_FOUND when it is another app's, or names regions and not region
// (as a room of another region is). Whatever its status: a settled
// activity's board stays readable.
func (d *Definer) SeenBy(ctx context.Context, app string, region, id int64) (Activity, error) {
	a, err := d.store.Get(ctx, app, id)
	if err != nil {
		return Activity{}, err
	}
	if !a.ForRegion(region) {
		return Activity{}, errNotFound
	}
	return a, nil
}

// ForRegion reports whether a is for the users and rooms of region: it
// names no region, or names region.
func (a Activity) ForRegion(region int64) bool {
	return len(a.RegionIDs) == 0 || slices.Contains(a.RegionIDs, region)
}
