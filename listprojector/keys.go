package listprojector

import (
	"strconv"
	"strings"
)

// Keys is the read model's Redis layout under Prefix (tests isolate
// themselves with it). Each key's hash tag (in braces) is what it is
// written atomically with: a region's sets and ready key are filled in one
// transaction, and a hide set is filled by a script that reads its gen, so
// they share {app:region}; a card is written and read alone (a page's cards
// by one MGET per slot on a cluster), so it has its own {app:room}, and
// the cards spread over every master (see internal/redisconn):
//
//	room:list:{app:<region>}:hot   ZSET room_id -> sort_score
//	room:list:{app:<region>}:new   ZSET room_id -> created_at_ms
//	room:list:{app:<region>}:ready "1" once both sets were filled from MySQL
//	room:card:{app:<room_id>}      the Card as JSON, expiring after CardTTL
//	room:hides:{app:<region>}      ZSET of the applying hides (hides_redis.go)
//	room:hides:{app:<region>}:gen  bumped by every hide and unhide
//
// The projector adds to the sets of any region, so a set without its ready
// key may be partial: it is never read, and a reader that finds it so
// fills it from MySQL (Mirror.RepairRegion).
//
// Package roomlist keeps its frozen list orders under the same prefix and
// layout, room:frozen:{app:<id>}; they are no part of the read model and
// only roomlist writes or reads them (roomlist/frozen_redis.go).
type Keys struct{ Prefix string }

// List is the set of a region's tab (TabHot or TabNew).
func (k Keys) List(app string, region int64, tab string) string {
	return k.Prefix + "room:list:{" + app + ":" + strconv.FormatInt(region, 10) + "}:" + tab
}

// Ready is the key that marks a region's sets filled from MySQL.
func (k Keys) Ready(app string, region int64) string {
	return k.Prefix + "room:list:{" + app + ":" + strconv.FormatInt(region, 10) + "}:ready"
}

// Card is the key of a room's card.
func (k Keys) Card(app, room string) string { return k.Prefix + "room:card:{" + app + ":" + room + "}" }

// Hides is the key of a region's hide set.
func (k Keys) Hides(app string, region int64) string {
	return k.Prefix + "room:hides:{" + app + ":" + strconv.FormatInt(region, 10) + "}"
}

func (k Keys) hidesGen(app string, region int64) string { return k.Hides(app, region) + ":gen" }

// CardPrefix begins every card key, and HidesPrefix every hide set's key
// (and its gen key): a client that tracks them sees every change of a card
// or hide set.
func (k Keys) CardPrefix() string { return k.Prefix + "room:card:" }

// HidesPrefix: see CardPrefix.
func (k Keys) HidesPrefix() string { return k.Prefix + "room:hides:" }

// ParseCard returns the app and room of a card key; ok is false for any
// other key.
func (k Keys) ParseCard(key string) (app, room string, ok bool) {
	rest, ok := k.cut(key, "room:card:{")
	if !ok {
		return "", "", false
	}
	if rest, ok = strings.CutSuffix(rest, "}"); !ok {
		return "", "", false
	}
	return strings.Cut(rest, ":") // an app code has no colon
}

// ParseHides returns the app and region of a hide set's key; ok is false
// for any other key, its gen key included.
func (k Keys) ParseHides(key string) (app string, region int64, ok bool) {
	rest, ok := k.cut(key, "room:hides:{")
	if !ok {
		return "", 0, false
	}
	if rest, ok = strings.CutSuffix(rest, "}"); !ok {
		return "", 0, false
	}
	app, reg, ok := strings.Cut(rest, ":")
	if !ok {
		return "", 0, false
	}
	region, err := strconv.ParseInt(reg, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return app, region, true
}

// cut returns key without the prefix and then kind, if it has both.
func (k Keys) cut(key, kind string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.Prefix)
	if !ok {
		return "", false
	}
	return strings.CutPrefix(rest, kind)
}
