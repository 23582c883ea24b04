package roomevent

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxIMGroupIDLen is Tencent IM's limit on a GroupId, in bytes.
const MaxIMGroupIDLen = 48

// imGroupHashPrefix starts a derived GroupId. Room ids always contain "_"
// (app_code + "_" + uuid) and derived ids never do, so the two forms cannot
// collide.
const imGroupHashPrefix = "vr-"

// IMGroupID returns the Tencent IM GroupId of a room: the room id itself
// when it is a valid GroupId (at most 48 bytes of A-Z a-z 0-9 _ -), which
// keeps the id every existing room already has, else "vr-" and the first 40
// hex digits of SHA-256(app_code "/" room_id): stable, unique within the
// Tencent application and 43 bytes long. It depends on nothing but its
// arguments, so every process derives the same id without storing it.
func IMGroupID(appCode, roomID string) string {
	if ValidIMGroupID(roomID) && !strings.HasPrefix(roomID, imGroupHashPrefix) {
		return roomID
	}
	sum := sha256.Sum256([]byte(appCode + "/" + roomID))
	return imGroupHashPrefix + hex.EncodeToString(sum[:20])
}

// ValidIMGroupID reports whether id is 1 to 48 bytes of A-Z a-z 0-9 _ -
// (a subset of what Tencent accepts for a custom GroupId, never its
// reserved "@TGS#" prefix).
func ValidIMGroupID(id string) bool {
	if id == "" || len(id) > MaxIMGroupIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
