package rooms

import (
	"encoding/base64"
	"fmt"
	"slices"
	"testing"

	"voiceroom/apperr"
)

// memberRoom is a view of a room: owner 1 (present), host 2 (on seat 3),
// admins 3 (present) and 4 (absent), members 5..9 joined in turn, 6 on
// seat 0 (muted by the host and by themself), 7's chat muted until 5000,
// 8's until 1000.
func memberRoom() View {
	v := View{OwnerUserID: 1, HostUserID: 2, AdminUserIDs: []int64{3, 4}, Seats: make([]SeatView, 4),
		ChatMutes: []Ban{{UserID: 7, UntilMs: 5000}, {UserID: 8, UntilMs: 1000}}}
	for i := range v.Seats {
		v.Seats[i].Index = i
	}
	v.Seats[3].UserID = 2
	v.Seats[0] = SeatView{Index: 0, UserID: 6, Muted: true, SelfMuted: true}
	// Joined: 9 first, then 1, 3, 5, 6, 7, 8, 2; 5 and 7 at the same time.
	joined := map[int64]int64{9: 10, 1: 20, 3: 30, 5: 40, 6: 50, 7: 40, 8: 70, 2: 80}
	for _, id := range []int64{1, 2, 3, 5, 6, 7, 8, 9} { // by user id, like the state
		v.OnlineUsers = append(v.OnlineUsers, OnlineUser{UserID: id, JoinedAtMs: joined[id]})
	}
	v.OnlineCount = len(v.OnlineUsers)
	return v
}

func TestRole(t *testing.T) {
	v := memberRoom()
	for _, tc := range []struct {
		user int64
		want string
	}{{1, RoleOwner}, {2, RoleHost}, {3, RoleAdmin}, {4, RoleAdmin}, {5, RoleMember}, {0, RoleMember}} {
		if got := v.Role(tc.user); got != tc.want {
			t.Errorf("Role(%d) = %s, want %s", tc.user, got, tc.want)
		}
	}
	// The highest role counts: an owner made host is the owner.
	v.HostUserID = 1
	if got := v.Role(1); got != RoleOwner {
		t.Errorf("owner who is host: %s", got)
	}
}

func userIDs(ms []Member) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.UserID
	}
	return out
}

// TestMembersOrder: seated by seat, then owner, host and admins by join
// time, then the rest by join time and user id; each with its role, seat
// and mute states.
func TestMembersOrder(t *testing.T) {
	v := memberRoom()
	page, err := v.Members(2000, MaxMemberLimit, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{6, 2, 1, 3, 9, 5, 7, 8}; !slices.Equal(userIDs(page.Members), want) {
		t.Fatalf("order %v, want %v", userIDs(page.Members), want)
	}
	if page.OnlineCount != 8 || page.NextCursor != "" {
		t.Fatalf("online %d, next %q", page.OnlineCount, page.NextCursor)
	}
	byID := map[int64]Member{}
	for _, m := range page.Members {
		byID[m.UserID] = m
	}
	for _, want := range []Member{
		{UserID: 6, Role: RoleMember, SeatIndex: 0, SeatMuted: true, SelfMuted: true, JoinedAtMs: 50},
		{UserID: 2, Role: RoleHost, SeatIndex: 3, JoinedAtMs: 80},
		{UserID: 1, Role: RoleOwner, SeatIndex: -1, JoinedAtMs: 20},
		{UserID: 3, Role: RoleAdmin, SeatIndex: -1, JoinedAtMs: 30},
		{UserID: 7, Role: RoleMember, SeatIndex: -1, ChatMutedUntilMs: 5000, JoinedAtMs: 40},
		{UserID: 8, Role: RoleMember, SeatIndex: -1, JoinedAtMs: 70}, // the mute ended at 1000
	} {
		if got := byID[want.UserID]; got != want {
			t.Errorf("member %d: %+v, want %+v", want.UserID, got, want)
		}
	}
}

// TestMembersPagesWhileUsersComeAndGo: pages of 3 list everyone once, in
// order, while users before and after the cursor leave and join between
// pages.
func TestMembersPagesWhileUsersComeAndGo(t *testing.T) {
	v := memberRoom()
	first, err := v.Members(2000, 3, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{6, 2, 1}; !slices.Equal(userIDs(first.Members), want) || first.NextCursor == "" {
		t.Fatalf("first page %v next %q, want %v and a cursor", userIDs(first.Members), first.NextCursor, want)
	}
	// Between pages: 1 (already listed) and 9 (not yet) leave; 10 joins.
	leave := func(id int64) {
		v.OnlineUsers = slices.DeleteFunc(v.OnlineUsers, func(u OnlineUser) bool { return u.UserID == id })
	}
	leave(1)
	leave(9)
	v.OnlineUsers = append(v.OnlineUsers, OnlineUser{UserID: 10, JoinedAtMs: 90})
	v.OnlineCount = len(v.OnlineUsers)

	var rest []int64
	cursor := first.NextCursor
	for pages := 0; cursor != ""; pages++ {
		if pages > 5 {
			t.Fatal("the pages do not end")
		}
		p, err := v.Members(2000, 3, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if p.OnlineCount != 7 {
			t.Fatalf("online count %d, want 7", p.OnlineCount)
		}
		rest = append(rest, userIDs(p.Members)...)
		cursor = p.NextCursor
	}
	if want := []int64{3, 5, 7, 8, 10}; !slices.Equal(rest, want) {
		t.Fatalf("after the first page: %v, want %v (no repeat, no skip)", rest, want)
	}
}

func TestMembersBadInput(t *testing.T) {
	v := memberRoom()
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name   string
		limit  int
		cursor string
		field  string
	}{
		{"limit 0", 0, "", "limit"},
		{"limit too big", MaxMemberLimit + 1, "", "limit"},
		{"not base64", 10, "!!", "cursor"},
		{"not three numbers", 10, enc("1.2"), "cursor"},
		{"not numbers", 10, enc("a.b.c"), "cursor"},
		{"unknown group", 10, enc("3.0.1"), "cursor"},
		{"no user", 10, enc("0.1.0"), "cursor"},
		{"negative order", 10, enc("1.-5.3"), "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Members(0, tc.limit, tc.cursor)
			if apperr.CodeOf(err) != apperr.InvalidArgument || apperr.FieldOf(err) != tc.field {
				t.Fatalf("err %v, want INVALID_ARGUMENT on %s", err, tc.field)
			}
		})
	}
	// A cursor past everyone is an empty last page, not an error.
	p, err := v.Members(0, 10, enc(fmt.Sprintf("%d.%d.%d", groupOthers, 1<<40, 1)))
	if err != nil || len(p.Members) != 0 || p.Members == nil || p.NextCursor != "" {
		t.Fatalf("past the end: %+v, %v", p, err)
	}
}
