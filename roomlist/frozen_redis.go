package roomlist

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/listprojector"
)

// Frozen orders in Redis, so that a chain of pages continues exactly on
// any api process (see freezer). The key follows the read model's layout
// (listprojector.Keys: its prefix; a tag of its own, {app:<id>}, for it is
// written and read alone, so orders spread over a cluster's masters) but
// is the list query's own, written and read only here:
//
//	room:frozen:{app:<id, hex>}   the order (encodeFrozen), expiring ChainTTL after its freeze
//
// The cursor still carries only the order's id: the order is read from
// Redis by the process that does not hold it, once.
func frozenKey(k listprojector.Keys, app string, id uint64) string {
	return k.Prefix + "room:frozen:{" + app + ":" + strconv.FormatUint(id, 16) + "}"
}

// The encoding of a frozen order, compact because an order holds up to
// ChainDepth rooms and busy lists are frozen every FreezeEvery (19 to 20
// bytes a room for the rooms service's ids, app_ and a UUID, 41 bytes as
// text; TestFrozenEncodingSize):
//
//	version byte (frozenV1), flags byte (1: complete)
//	varint at (unix ms), varint region, uvarint-prefixed tab and query hash
//	uvarint n, then n entries in order:
//	  uvarint form<<1 | pinned
//	  form idRaw: uvarint-prefixed room id
//	  form idApp: the id is app_ + rest: uvarint-prefixed rest
//	  form idUUID: the id is app_ + a lowercase UUID: its 16 bytes
//	  varint (previous key - key), the first from 0
//
// The app and the id are the key's. A reader that meets another version
// (a newer process during an upgrade) treats the order as unreadable: the
// chain continues on the live order.
const frozenV1 = 1

const (
	idRaw = iota
	idApp
	idUUID
)

// encodeFrozen encodes f (see frozenV1).
func encodeFrozen(f *frozenOrder) []byte {
	b := make([]byte, 0, 32+len(f.tab)+len(f.query)+len(f.entries)*20)
	flags := byte(0)
	if f.complete {
		flags = 1
	}
	b = append(b, frozenV1, flags)
	b = binary.AppendVarint(b, f.at.UnixMilli())
	b = binary.AppendVarint(b, f.region)
	b = appendString(b, f.tab)
	b = appendString(b, f.query)
	b = binary.AppendUvarint(b, uint64(len(f.entries)))
	prefix := f.app + "_"
	var prev int64
	for _, e := range f.entries {
		pinned := uint64(0)
		if e.pinned {
			pinned = 1
		}
		rest, ok := strings.CutPrefix(e.id, prefix)
		switch {
		case ok && isUUID(rest):
			b = binary.AppendUvarint(b, idUUID<<1|pinned)
			b = appendUUID(b, rest)
		case ok:
			b = binary.AppendUvarint(b, idApp<<1|pinned)
			b = appendString(b, rest)
		default:
			b = binary.AppendUvarint(b, idRaw<<1|pinned)
			b = appendString(b, e.id)
		}
		b = binary.AppendVarint(b, prev-e.key)
		prev = e.key
	}
	return b
}

var errFrozenEncoding = errors.New("frozen order: bad encoding")

// decodeFrozen decodes the order id of app stored as raw.
func decodeFrozen(raw []byte, app string, id uint64) (*frozenOrder, error) {
	if len(raw) < 2 || raw[0] != frozenV1 {
		return nil, errFrozenEncoding
	}
	d := decoder{b: raw[2:]}
	f := &frozenOrder{id: id, app: app, complete: raw[1]&1 != 0}
	f.at = time.UnixMilli(d.varint())
	f.region = d.varint()
	f.tab = d.string()
	f.query = d.string()
	n := d.uvarint()
	if d.err || n > uint64(len(d.b))/2 { // an entry takes 2 bytes at least
		return nil, errFrozenEncoding
	}
	f.entries = make([]entry, n)
	prefix := app + "_"
	var prev int64
	for i := range f.entries {
		h := d.uvarint()
		e := &f.entries[i]
		e.pinned = h&1 != 0
		switch h >> 1 {
		case idRaw:
			e.id = d.string()
		case idApp:
			e.id = prefix + d.string()
		case idUUID:
			e.id = prefix + d.uuid()
		default:
			return nil, errFrozenEncoding
		}
		e.key = prev - d.varint()
		prev = e.key
		if d.err {
			return nil, errFrozenEncoding
		}
	}
	if d.err || len(d.b) != 0 {
		return nil, errFrozenEncoding
	}
	return f, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// isUUID reports whether s is a UUID as uuid.NewString writes it: 36
// characters, lowercase hex, hyphens at 8, 13, 18 and 23.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// appendUUID appends the 16 bytes of the UUID s (isUUID).
func appendUUID(b []byte, s string) []byte {
	var raw [16]byte
	hex.Decode(raw[0:4], []byte(s[0:8]))
	hex.Decode(raw[4:6], []byte(s[9:13]))
	hex.Decode(raw[6:8], []byte(s[14:18]))
	hex.Decode(raw[8:10], []byte(s[19:23]))
	hex.Decode(raw[10:16], []byte(s[24:36]))
	return append(b, raw[:]...)
}

// decoder reads an encoded order; err sticks at the first fault.
type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n uint64) []byte {
	if d.err || n > uint64(len(d.b)) {
		d.err, d.b = true, nil
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

func (d *decoder) string() string { return string(d.bytes(d.uvarint())) }

func (d *decoder) uuid() string {
	raw := d.bytes(16)
	if raw == nil {
		return ""
	}
	var s [36]byte
	hex.Encode(s[0:8], raw[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], raw[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], raw[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], raw[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], raw[10:16])
	return string(s[:])
}

// saveFrozen writes f to Redis for the rest of its ChainTTL, bounded by
// RedisTimeout; freezer.save. A failure (or Redis down) is counted and
// logged sparsely: the order's cursors then continue exactly only in this
// process, elsewhere on the live order.
func (l *Lister) saveFrozen(ctx context.Context, f *frozenOrder) {
	ttl := l.cfg.ChainTTL - l.cfg.Now().Sub(f.at)
	if ttl < time.Millisecond {
		return
	}
	if !l.redisUp() {
		l.metrics.frozenRedis(frozenStoreFailed)
		return
	}
	rctx, cancel := context.WithTimeout(ctx, l.cfg.RedisTimeout)
	defer cancel()
	if err := l.cache.rdb.Set(rctx, frozenKey(l.cache.keys, f.app, f.id), encodeFrozen(f), ttl).Err(); err != nil {
		l.metrics.frozenRedis(frozenStoreFailed)
		if l.frozenLog.allow() {
			l.log.Warn("writing a frozen list order to redis failed; its cursors continue exactly only in this process (logged at most once a minute)",
				"app_code", f.app, "region_id", f.region, "error", err)
		}
		return
	}
	l.metrics.frozenRedis(frozenStored)
}

// loadFrozen reads the order a cursor walks from Redis, when this process
// does not hold it (another froze it, or this one before a restart), and
// keeps it (see freezer.load). nil when Redis has no such order, or
// fails, or is off: the chain then continues on the live order. A Redis
// error makes the list leave Redis alone for a while (redisFailed), as
// any read of it does.
func (l *Lister) loadFrozen(ctx context.Context, c cursor) *frozenOrder {
	if l.cache == nil {
		l.metrics.frozenRedis(frozenGone)
		return nil
	}
	if !l.redisUp() {
		l.metrics.frozenRedis(frozenLoadFailed)
		return nil
	}
	f, err := l.frozen.load(ctx, c.Frozen, func() (*frozenOrder, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.RedisTimeout)
		defer cancel()
		raw, err := l.cache.rdb.Get(rctx, frozenKey(l.cache.keys, c.App, c.Frozen)).Bytes()
		switch {
		case errors.Is(err, redis.Nil):
			return nil, nil
		case err != nil:
			l.redisFailed(err)
			return nil, fmt.Errorf("read frozen order: %w", err)
		}
		f, err := decodeFrozen(raw, c.App, c.Frozen)
		if err != nil && l.frozenLog.allow() {
			l.log.Warn("a frozen list order in redis is unreadable; its chain continues on the live order (logged at most once a minute)",
				"app_code", c.App, "bytes", len(raw), "error", err)
		}
		return f, err
	})
	switch {
	case f != nil:
		l.metrics.frozenRedis(frozenLoaded)
	case err != nil:
		l.metrics.frozenRedis(frozenLoadFailed)
	default:
		l.metrics.frozenRedis(frozenGone)
	}
	return f
}

// sparse lets a log line through at most once a minute.
type sparse struct{ last atomic.Int64 }

func (s *sparse) allow() bool {
	now := time.Now().UnixMilli()
	last := s.last.Load()
	return now-last >= time.Minute.Milliseconds() && s.last.CompareAndSwap(last, now)
}
