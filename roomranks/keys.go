package roomranks

import (
	"fmt"
	"math"
	"strconv"
)

// roomKeys are the Redis keys of one room's ranks. They share the hash
// tag {app:room}, so every script touches one cluster slot:
//
//	rank:{app:room}:journal                   ZSET of the latest gift events, by room_version
//	rank:{app:room}:floor                     the highest version dropped from the journal
//	rank:{app:room}:<by>:<period>:<start_ms>  ZSET of users by coins, and its fill member
type roomKeys struct {
	base string // "<prefix>rank:{app:room}:"
}

func newRoomKeys(prefix, app, room string) roomKeys {
	return roomKeys{base: prefix + "rank:{" + app + ":" + room + "}:"}
}

func (k roomKeys) journal() string { return k.base + "journal" }
func (k roomKeys) floor() string   { return k.base + "floor" }

// set is the sorted set of by over w.
func (k roomKeys) set(by By, w Window) string {
	return fmt.Sprintf("%s%s:%s:%d", k.base, by, w.Period, w.StartMs)
}

// member is a user in the sets: the 19 digits of MaxInt64 - userID, so
// that among equal scores (ZREVRANGE: members in reverse byte order) the
// smaller user id comes first, as in MySQL's ORDER BY value DESC, user_id.
func member(userID int64) string {
	return fmt.Sprintf("%019d", math.MaxInt64-userID)
}

// userOf decodes a member.
func userOf(m string) (int64, error) {
	n, err := strconv.ParseInt(m, 10, 64)
	if err != nil || len(m) != 19 || n < 0 {
		return 0, fmt.Errorf("rank member %q: not a user", m)
	}
	return math.MaxInt64 - n, nil
}
