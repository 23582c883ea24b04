package activity

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A board in Redis is two keys of one activity's hash tag, per period:
//
//	act:{<activity_id>}:<period_start_ms>:z  ZSET of members by score
//	act:{<activity_id>}:<period_start_ms>:h  HASH subject -> its member,
//	                                         and "!filled" once rebuilt
//
// A member is "<reached_at_ms, 13 digits>:<subject>" and its score is
// minus the subject's score. Redis orders equal scores by member, so in
// the ascending order of ZRANGE the higher score comes first, an equal
// score puts the earlier reach first, and an equal reach the smaller
// subject (bytewise); MySQL reads order the same (compareEntries), and so
// does settlement's final board. Scores are float64: exact up to 2^53.
//
// Writes are absolute and only ever raise a subject (a score never goes
// down), so a write and a rebuild from MySQL may land in any order: each
// subject ends at the greatest value written, MySQL's latest. The
// consumer writes whether or not the board is filled; a read trusts the
// board only once a rebuild has set "!filled".

const (
	maxReach     = 9999999999999 // milliseconds; year 2286
	filledField  = "!filled"     // subjects are digits or room ids: never "!..."
	rebuildChunk = 500
)

// member is a subject's member for a score reached at reachedMs.
func member(subject string, reachedMs int64) string {
	return fmt.Sprintf("%013d:%s", min(max(reachedMs, 0), maxReach), subject)
}

// parseMember returns the subject and reach time of m.
func parseMember(m string) (string, int64, error) {
	n, subject, ok := strings.Cut(m, ":")
	if !ok || len(n) != 13 {
		return "", 0, fmt.Errorf("board member %q: want <13 digits>:<subject>", m)
	}
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("board member %q: %w", m, err)
	}
	return subject, v, nil
}

// raiseScript sets each subject to (score, member) unless it holds a
// score at least as high (stored negated), and sets the keys' expiry. KEYS: zset, hash.
// ARGV: expire-at (unix seconds), filled ("1" marks the board filled
// after the writes: a rebuild's last chunk), then subject, score, member
// triples.
var raiseScript = redis.NewScript(`
local z, h = KEYS[1], KEYS[2]
for i = 3, #ARGV, 3 do
  local subject, neg, m = ARGV[i], -tonumber(ARGV[i+1]), ARGV[i+2]
  local old = redis.call('HGET', h, subject)
  local raise = true
  if old then
    local cur = redis.call('ZSCORE', z, old)
    if cur and tonumber(cur) <= neg then raise = false end
  end
  if raise then
    if old then redis.call('ZREM', z, old) end
    redis.call('ZADD', z, neg, m)
    redis.call('HSET', h, subject, m)
  end
end
if ARGV[2] == '1' then redis.call('HSET', h, '!filled', '1') end
redis.call('EXPIREAT', h, ARGV[1])
if redis.call('EXISTS', z) == 1 then redis.call('EXPIREAT', z, ARGV[1]) end
return 1
`)

// pageScript reads one page of a filled board and the place of one
// subject; false when the board is not filled. KEYS: zset, hash. ARGV:
// mode (top, around, after, before), boundary score (negated), boundary member,
// limit, me (a subject, or "").
//
// after/before page from a boundary, the entry a cursor names, which
// may have moved since: it is put in the set for the time of the script,
// so its place is where it sits in the order, whether it is still there
// or not. Returns {start (0-based rank of the first item), items
// (member, score pairs; limit+1 of them for top, around and after, to
// tell whether more follow), me rank (-1: none), me score}.
var pageScript = redis.NewScript(`
local z, h = KEYS[1], KEYS[2]
if redis.call('HEXISTS', h, '!filled') == 0 then return false end
local mode, n = ARGV[1], tonumber(ARGV[4])
local meRank, meScore = -1, '0'
if ARGV[5] ~= '' then
  local m = redis.call('HGET', h, ARGV[5])
  if m then
    local r = redis.call('ZRANK', z, m)
    if r then meRank, meScore = r, redis.call('ZSCORE', z, m) end
  end
end
local start, count = 0, n + 1
if mode == 'around' and meRank >= 0 then
  start = math.max(0, meRank - math.floor(n / 2))
elseif mode == 'after' or mode == 'before' then
  local had = redis.call('ZSCORE', z, ARGV[3])
  if not had then redis.call('ZADD', z, ARGV[2], ARGV[3]) end
  local r = redis.call('ZRANK', z, ARGV[3])
  if not had then redis.call('ZREM', z, ARGV[3]) end
  if mode == 'after' then
    start = r
    if had then start = r + 1 end
  else
    start = math.max(0, r - n)
    count = r - start
  end
end
local items = {}
if count > 0 then items = redis.call('ZRANGE', z, start, start + count - 1, 'WITHSCORES') end
return {start, items, meRank, meScore}
`)

// boardCache is the Redis side of the boards.
type boardCache struct {
	rdb    redis.UniversalClient
	prefix string
	after  time.Duration // ExpireAfter
}

func newBoardCache(rdb redis.UniversalClient, cfg ScoreConfig) *boardCache {
	if rdb == nil {
		return nil
	}
	return &boardCache{rdb: rdb, prefix: cfg.KeyPrefix, after: cfg.ExpireAfter}
}

// keys are the zset and hash of one board.
func (c *boardCache) keys(activityID, periodStartMs int64) []string {
	base := c.prefix + "act:{" + strconv.FormatInt(activityID, 10) + "}:" + strconv.FormatInt(periodStartMs, 10)
	return []string{base + ":z", base + ":h"}
}

// drop deletes one board from Redis: the next read rebuilds it from
// MySQL (for an entry that went down, which raise cannot write).
func (c *boardCache) drop(ctx context.Context, activityID, periodStartMs int64) error {
	return c.rdb.Del(ctx, c.keys(activityID, periodStartMs)...).Err()
}

// raise writes entries (each at least its current value) into one
// board, whose period ends at periodEndMs; filled marks it filled.
func (c *boardCache) raise(ctx context.Context, activityID, periodStartMs, periodEndMs int64, entries []Entry, filled bool) error {
	args := make([]any, 0, 2+3*len(entries))
	// A board lives ExpireAfter past its period, or past now for a past
	// period's board (read for audit, rebuilt): Redis's clock is the wall
	// clock.
	exp := time.UnixMilli(max(periodEndMs, time.Now().UnixMilli())).Add(c.after).Unix()
	f := "0"
	if filled {
		f = "1"
	}
	args = append(args, exp, f)
	for _, e := range entries {
		args = append(args, e.Subject, e.Score, member(e.Subject, e.ReachedAtMs))
	}
	return raiseScript.Run(ctx, c.rdb, c.keys(activityID, periodStartMs), args...).Err()
}

// page is what pageScript read.
type page struct {
	start   int // 0-based rank of entries[0]
	entries []Entry
	meRank  int // 1-based; 0 when the subject has no place
	meScore int64
}

// errNotFilled is read's answer for a board that is not in Redis.
var errNotFilled = errors.New("board not in redis")

// read runs pageScript; errNotFilled when the board is not filled.
func (c *boardCache) read(ctx context.Context, activityID, periodStartMs int64, mode string, boundary Entry, limit int, me string) (page, error) {
	bm := ""
	if mode == modeAfter || mode == modeBefore {
		bm = member(boundary.Subject, boundary.ReachedAtMs)
	}
	res, err := pageScript.Run(ctx, c.rdb, c.keys(activityID, periodStartMs), mode, -boundary.Score, bm, limit, me).Slice()
	if errors.Is(err, redis.Nil) {
		return page{}, errNotFilled
	}
	if err != nil {
		return page{}, err
	}
	if len(res) != 4 {
		return page{}, fmt.Errorf("board page: %d values, want 4", len(res))
	}
	var p page
	start, _ := res[0].(int64)
	p.start = int(start)
	items, _ := res[1].([]any)
	for i := 0; i+1 < len(items); i += 2 {
		m, _ := items[i].(string)
		s, _ := items[i+1].(string)
		subject, reached, err := parseMember(m)
		if err != nil {
			return page{}, err
		}
		score, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return page{}, fmt.Errorf("board score %q: %w", s, err)
		}
		p.entries = append(p.entries, Entry{Subject: subject, Score: -int64(score), ReachedAtMs: reached})
	}
	if r, _ := res[2].(int64); r >= 0 {
		p.meRank = int(r) + 1
		s, _ := res[3].(string)
		score, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return page{}, fmt.Errorf("board score %q: %w", s, err)
		}
		p.meScore = -int64(score)
	}
	return p, nil
}
