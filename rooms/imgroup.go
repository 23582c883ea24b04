package rooms

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

// IMGroupMember reports whether userID is present in the loaded room whose
// IM GroupId is groupID, and that room's app_code (found is false when no
// loaded room has that GroupId). Present means JoinRoom succeeded and the
// user has not left, been kicked or been swept since. A room that is not
// loaded has nobody present: the rooms role loads every room that lists
// users when it starts. It reads memory only (no I/O, no cell token), for
// the join-group callback.
func (s *Service) IMGroupMember(groupID string, userID int64) (appCode string, found, present bool) {
	s.mu.Lock()
	key, ok := s.groups[groupID]
	var c *cell
	if ok {
		c = s.cells[key]
	}
	s.mu.Unlock()
	if c == nil {
		return "", false, false
	}
	st := c.state.Load()
	if st == nil {
		return "", false, false
	}
	return key.AppCode, true, st.isPresent(userID)
}

// indexGroup and unindexGroup keep s.groups in step with s.cells; s.mu is
// held.
func (s *Service) indexGroup(key roomKey) {
	s.groups[IMGroupID(key.AppCode, key.RoomID)] = key
}

func (s *Service) unindexGroup(key roomKey) {
	g := IMGroupID(key.AppCode, key.RoomID)
	if s.groups[g] == key {
		delete(s.groups, g)
	}
}
