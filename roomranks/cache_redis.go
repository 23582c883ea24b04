package roomranks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// cache is the Redis side of the ranks: the scripts that apply a gift
// event, fill a set from MySQL and read a rank, each atomic (see doc.go
// for why they are exact).
type cache struct {
	rdb     redis.UniversalClient
	prefix  string
	keep    int           // JournalSize
	after   time.Duration // ExpireAfter
	journal time.Duration // the journal's life: longer than any set's
}

func newCache(rdb redis.UniversalClient, cfg Config) *cache {
	if rdb == nil {
		return nil
	}
	// A week's set lives at most 7 days plus ExpireAfter from its last
	// write; the journal outlives it, so a set in Redis always has the
	// journal of the events applied to it.
	return &cache{rdb: rdb, prefix: cfg.KeyPrefix, keep: cfg.JournalSize, after: cfg.ExpireAfter,
		journal: 7*24*time.Hour + cfg.ExpireAfter + time.Hour}
}

// Outcomes of applyScript, as counted in voiceroom_ranks_events_total.
const (
	resultApplied     = "applied"     // added to at least one set in Redis
	resultUncached    = "uncached"    // journaled only: none of its sets is in Redis
	resultDuplicate   = "duplicate"   // counted already (a repeat, or in a set filled after it)
	resultInvalidated = "invalidated" // too old to tell: its sets were dropped, to be filled again
	resultZero        = "zero_value"  // a gift of price 0: no ledger row, nothing counts
)

// A set in Redis always holds its fill member, "fill:<V>" at score -inf:
// V is the room's version its MySQL sums were read at. A set without it
// is not in Redis (never filled, expired, dropped or evicted whole), and
// the fill member never ranks above a user.

// applyScript applies one gift event.
// KEYS: journal, floor, then the sets sender/day, receiver/day,
// sender/week, receiver/week.
// ARGV: version, journal entry, value, sender member, receiver member,
// journal size, journal life in ms.
//
// A version in the journal was applied: duplicate. One at or below the
// floor (dropped from the journal, or older than anything in it) may have
// been applied or not: a set filled at or above it counts it, any other
// set is dropped (invalidated) and filled again on its next read. Any
// other version is new: journaled, and added to each set whose fill
// version is below it (applied); when every set in Redis was filled at
// or above it, it was counted already (duplicate); with none of its sets
// in Redis it is only journaled (uncached).
var applyScript = redis.NewScript(`
local function filledAt(set)
  local f = redis.call('ZRANGEBYSCORE', set, '-inf', '-inf', 'LIMIT', 0, 1)
  if #f == 0 then return nil end
  return tonumber(string.sub(f[1], 6))
end
local v = tonumber(ARGV[1])
if redis.call('ZCOUNT', KEYS[1], v, v) > 0 then return 'duplicate' end
local floor = tonumber(redis.call('GET', KEYS[2]) or '0')
if v <= floor then
  local dropped = false
  for i = 3, 6 do
    local at = filledAt(KEYS[i])
    if at and v > at then
      redis.call('DEL', KEYS[i])
      dropped = true
    end
  end
  if dropped then return 'invalidated' end
  return 'duplicate'
end
redis.call('ZADD', KEYS[1], v, ARGV[2])
local keep = tonumber(ARGV[6])
local n = redis.call('ZCARD', KEYS[1])
if n > keep then
  local gone = redis.call('ZRANGE', KEYS[1], n - keep - 1, n - keep - 1, 'WITHSCORES')
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - keep - 1)
  if tonumber(gone[2]) > floor then redis.call('SET', KEYS[2], gone[2]) end
end
redis.call('PEXPIRE', KEYS[1], ARGV[7])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[7]) end
local members = {ARGV[4], ARGV[5], ARGV[4], ARGV[5]}
local applied, counted = false, false
for i = 3, 6 do
  local at = filledAt(KEYS[i])
  if at and v > at then
    redis.call('ZINCRBY', KEYS[i], ARGV[3], members[i - 2])
    applied = true
  elseif at then
    counted = true
  end
end
if applied then return 'applied' end
if counted then return 'duplicate' end
return 'uncached'
`)

// gift is what the ranks need of one RoomGiftSent event.
type gift struct {
	app, room        string
	version          int64
	sender, receiver int64
	value            int64
	atMs             int64 // the command's time: occurred_at_ms
	day, week        Window
}

// apply runs applyScript for g and returns its outcome.
func (c *cache) apply(ctx context.Context, g gift) (string, error) {
	k := newRoomKeys(c.prefix, g.app, g.room)
	s, r := member(g.sender), member(g.receiver)
	keys := []string{k.journal(), k.floor(), k.set(BySender, g.day), k.set(ByReceiver, g.day), k.set(BySender, g.week), k.set(ByReceiver, g.week)}
	entry := fmt.Sprintf("%d|%s|%s|%d|%d", g.version, s, r, g.value, g.atMs)
	res, err := applyScript.Run(ctx, c.rdb, keys, g.version, entry, g.value, s, r, c.keep, c.journal.Milliseconds()).Text()
	if err != nil {
		return "", fmt.Errorf("apply gift %s/%s@%d: %w", g.app, g.room, g.version, err)
	}
	return res, nil
}

// Outcomes of fillScript, as counted in voiceroom_ranks_refills_total.
const (
	fillFilled = "filled" // the set holds MySQL's sums and the journal's later gifts
	fillExists = "exists" // another fill came first: left as it is
	fillBehind = "behind" // the journal no longer covers the gifts after the snapshot: not filled
)

// fillScript puts a set filled from MySQL in Redis.
// KEYS: set, journal, floor.
// ARGV: the snapshot's version, the set's life in ms, the window's start
// and end, the journal field of the set's users (2 sender, 3 receiver),
// the journal's life in ms, replace (1: over an existing set), then
// member, score pairs.
//
// The set is MySQL's sums as of version V plus the journaled gifts above
// V in the window: those the consumer handled between the snapshot and
// now (it added them to no set, or to the set this replaces). If gifts
// above V were dropped from the journal (floor > V), the fill cannot
// know them: it leaves Redis alone (behind) and the next read tries
// again.
var fillScript = redis.NewScript(`
if ARGV[7] ~= '1' and redis.call('EXISTS', KEYS[1]) == 1 then return 'exists' end
if tonumber(redis.call('GET', KEYS[3]) or '0') > tonumber(ARGV[1]) then return 'behind' end
redis.call('DEL', KEYS[1])
redis.call('ZADD', KEYS[1], '-inf', 'fill:' .. ARGV[1])
local i = 8
while i <= #ARGV do
  local args = {}
  local last = math.min(i + 999, #ARGV)
  for j = i, last, 2 do
    args[#args + 1] = ARGV[j + 1]
    args[#args + 1] = ARGV[j]
  end
  redis.call('ZADD', KEYS[1], unpack(args))
  i = last + 1
end
local field = tonumber(ARGV[5])
local from, to = tonumber(ARGV[3]), tonumber(ARGV[4])
for _, e in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf')) do
  local p = {}
  for part in string.gmatch(e, '[^|]+') do p[#p + 1] = part end
  local at = tonumber(p[5])
  if at >= from and at < to then redis.call('ZINCRBY', KEYS[1], p[4], p[field]) end
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
for _, k in ipairs({KEYS[2], KEYS[3]}) do
  local ttl = redis.call('PTTL', k)
  if ttl >= 0 and ttl < tonumber(ARGV[6]) then redis.call('PEXPIRE', k, ARGV[6]) end
end
return 'filled'
`)

// fill stores l as the set of by over w in room, unless a set is there
// already (replace overwrites it). nowMs places the set's expiry:
// ExpireAfter past the window's end. A window already expired is not
// stored (fillExists: nothing to do).
func (c *cache) fill(ctx context.Context, app, room string, by By, w Window, l loaded, replace bool, nowMs int64) (string, error) {
	ttl := w.EndMs + c.after.Milliseconds() - nowMs
	if ttl <= 0 {
		return fillExists, nil
	}
	k := newRoomKeys(c.prefix, app, room)
	field := 2
	if by == ByReceiver {
		field = 3
	}
	rep := 0
	if replace {
		rep = 1
	}
	args := make([]any, 0, 7+2*len(l.entries))
	args = append(args, l.version, ttl, w.StartMs, w.EndMs, field, c.journal.Milliseconds(), rep)
	for _, e := range l.entries {
		args = append(args, member(e.UserID), e.Value)
	}
	res, err := fillScript.Run(ctx, c.rdb, []string{k.set(by, w), k.journal(), k.floor()}, args...).Text()
	if err != nil {
		return "", fmt.Errorf("fill rank %s/%s %s %s: %w", app, room, by, w.Period, err)
	}
	return res, nil
}

// readScript reads a rank: nil when its set is not in Redis, else {the
// top members with scores (the fill member last when fewer users), the
// caller's 0-based rank or nil, the caller's score or nil}.
// KEYS: set. ARGV: limit, the caller's member.
var readScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
return {redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES'),
  redis.call('ZREVRANK', KEYS[1], ARGV[2]), redis.call('ZSCORE', KEYS[1], ARGV[2])}
`)

// read returns the top limit of the set of by over w and the caller's
// place; ok is false when the set is not in Redis.
func (c *cache) read(ctx context.Context, app, room string, by By, w Window, limit int, userID int64) (top []Entry, me *Place, ok bool, err error) {
	k := newRoomKeys(c.prefix, app, room)
	raw, err := readScript.Run(ctx, c.rdb, []string{k.set(by, w)}, limit, member(userID)).Slice()
	if errors.Is(err, redis.Nil) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("read rank %s/%s %s %s: %w", app, room, by, w.Period, err)
	}
	bad := func(what string) error {
		return fmt.Errorf("read rank %s/%s %s %s: unexpected %s", app, room, by, w.Period, what)
	}
	if len(raw) != 3 {
		return nil, nil, false, bad("reply")
	}
	pairs, _ := raw[0].([]any)
	for i := 0; i+1 < len(pairs); i += 2 {
		m, _ := pairs[i].(string)
		s, _ := pairs[i+1].(string)
		if strings.HasPrefix(m, "fill:") {
			break
		}
		u, err := userOf(m)
		if err != nil {
			return nil, nil, false, err
		}
		v, err := parseScore(s)
		if err != nil {
			return nil, nil, false, bad("score " + s)
		}
		top = append(top, Entry{UserID: u, Value: v})
	}
	if rank, isInt := raw[1].(int64); isInt && raw[2] != nil {
		s, _ := raw[2].(string)
		v, err := parseScore(s)
		if err != nil {
			return nil, nil, false, bad("score " + s)
		}
		me = &Place{Rank: int(rank) + 1, Value: v}
	}
	return top, me, true, nil
}

// parseScore reads a score: an integer, which Redis may print as a float
// ("1e+16" past 17 digits).
func parseScore(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	return int64(f), nil
}
