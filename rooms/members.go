package rooms

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"voiceroom/apperr"
)

// Bounds of a page of the member list.
const (
	// DefaultMemberLimit is a member page's size when the client names none.
	DefaultMemberLimit = 50
	// MaxMemberLimit bounds a member page's size.
	MaxMemberLimit = 200
)

// Member is a present user as the member list shows them. SeatIndex is -1
// off the seats; SeatMuted is the host's mute of their seat, SelfMuted
// their own; ChatMutedUntilMs is 0 when their chat is not muted.
type Member struct {
	UserID           int64  `json:"user_id"`
	Role             string `json:"role"`
	SeatIndex        int    `json:"seat_index"`
	SeatMuted        bool   `json:"seat_muted"`
	SelfMuted        bool   `json:"self_muted"`
	ChatMutedUntilMs int64  `json:"chat_muted_until_ms"`
	JoinedAtMs       int64  `json:"joined_at_ms"`
}

// MemberPage is one page of a room's member list, with the room's online
// count beside it. NextCursor is "" on the last page.
type MemberPage struct {
	Members     []Member `json:"members"`
	OnlineCount int      `json:"online_count"`
	NextCursor  string   `json:"next_cursor"`
}

// Role is userID's role in the room v shows, the highest it holds: owner,
// host, admin or member.
func (v View) Role(userID int64) string {
	return role(v.OwnerUserID, v.HostUserID, v.AdminUserIDs, userID)
}

// The groups of the member list, in its order.
const (
	groupSeated = iota // on a seat, by seat index
	groupStaff         // the owner, the host and room admins off the seats, by join time
	groupOthers        // everyone else, by join time
)

// memberKey is a member's place in the list: its group, then the seat
// index (seated) or join time (the rest), then the user id.
type memberKey struct {
	group  int
	order  int64
	userID int64
}

func (k memberKey) compare(o memberKey) int {
	if c := cmpInt(int64(k.group), int64(o.group)); c != 0 {
		return c
	}
	if c := cmpInt(k.order, o.order); c != 0 {
		return c
	}
	return cmpInt(k.userID, o.userID)
}

// encode is the opaque cursor that names k.
func (k memberKey) encode() string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%d.%d", k.group, k.order, k.userID))
}

// decodeMemberCursor reads a cursor encode made; anything else is
// INVALID_ARGUMENT.
func decodeMemberCursor(cursor string) (memberKey, error) {
	bad := apperr.Invalid("cursor", "not a cursor of this list: start again without one")
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return memberKey{}, bad
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 3 {
		return memberKey{}, bad
	}
	var n [3]int64
	for i, p := range parts {
		if n[i], err = strconv.ParseInt(p, 10, 64); err != nil {
			return memberKey{}, bad
		}
	}
	k := memberKey{group: int(n[0]), order: n[1], userID: n[2]}
	if k.group < groupSeated || k.group > groupOthers || k.order < 0 || k.userID <= 0 {
		return memberKey{}, bad
	}
	return k, nil
}

// Members returns a page of the present users of the room v shows: those
// on a seat first (by seat index), then the owner, the host and room
// admins off the seats (by join time), then everyone else (by join time),
// ties by user id. A chat mute that ended by nowMs is not shown. limit
// must be 1..MaxMemberLimit. cursor is "" for the first page, else the
// NextCursor of the page before: the next page holds the members strictly
// after that one in the order now, so users who come and go between two
// pages neither repeat nor push others out. What a cursor cannot cover is
// a member whose place changes between two pages (who takes, changes or
// leaves a seat, becomes or stops being an admin or the host, or leaves
// and joins again, with a new join time): they may be listed twice or not
// at all. A cursor that is not one is INVALID_ARGUMENT.
func (v View) Members(nowMs int64, limit int, cursor string) (MemberPage, error) {
	if limit < 1 || limit > MaxMemberLimit {
		return MemberPage{}, apperr.Invalid("limit", "must be 1..%d", MaxMemberLimit)
	}
	var after *memberKey
	if cursor != "" {
		k, err := decodeMemberCursor(cursor)
		if err != nil {
			return MemberPage{}, err
		}
		after = &k
	}
	seatOf := make(map[int64]SeatView, len(v.Seats))
	for _, s := range v.Seats {
		if s.UserID != 0 {
			seatOf[s.UserID] = s
		}
	}
	type entry struct {
		key memberKey
		m   Member
	}
	entries := make([]entry, 0, len(v.OnlineUsers))
	for _, u := range v.OnlineUsers {
		m := Member{UserID: u.UserID, Role: v.Role(u.UserID), SeatIndex: -1, JoinedAtMs: u.JoinedAtMs}
		key := memberKey{group: groupOthers, order: u.JoinedAtMs, userID: u.UserID}
		if s, ok := seatOf[u.UserID]; ok {
			m.SeatIndex, m.SeatMuted, m.SelfMuted = s.Index, s.Muted, s.SelfMuted
			key.group, key.order = groupSeated, int64(s.Index)
		} else if m.Role != RoleMember {
			key.group = groupStaff
		}
		if mutedUntil := until(v.ChatMutes, u.UserID); mutedUntil > nowMs {
			m.ChatMutedUntilMs = mutedUntil
		}
		if after == nil || key.compare(*after) > 0 {
			entries = append(entries, entry{key, m})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return a.key.compare(b.key) })
	page := MemberPage{Members: make([]Member, 0, min(limit, len(entries))), OnlineCount: v.OnlineCount}
	for _, e := range entries[:min(limit, len(entries))] {
		page.Members = append(page.Members, e.m)
	}
	if len(entries) > limit {
		page.NextCursor = entries[limit-1].key.encode()
	}
	return page, nil
}
