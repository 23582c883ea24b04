package imbridge_test

import (
	"strconv"
	"testing"
	"time"

	"voiceroom/imbridge"
)

// fakeMembers is a room directory: GroupId → app and present users.
type fakeMembers map[string]struct {
	app   string
	users map[int64]bool
}

func (f fakeMembers) IMGroupMember(groupID string, userID int64) (string, bool, bool) {
	g, ok := f[groupID]
	if !ok {
		return "", false, false
	}
	return g.app, true, g.users[userID]
}

func TestGuard(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	apps := imbridge.Apps{
		Default: &imbridge.Application{SDKAppID: 1400000001, Admin: "admin", SecretKey: "k1", CallbackToken: "token-one"},
		ByApp: map[string]imbridge.Application{
			"two":   {SDKAppID: 1400000002, Admin: "admin", SecretKey: "k2", CallbackToken: "token-two"},
			"open":  {SDKAppID: 1400000003, Admin: "admin", SecretKey: "k3"},
			"other": {SDKAppID: 1400000002, Admin: "admin", SecretKey: "k2", CallbackToken: "token-two"},
		},
	}
	members := fakeMembers{
		"g-one":  {app: "demo", users: map[int64]bool{7: true}},
		"g-two":  {app: "two", users: map[int64]bool{7: true}},
		"g-open": {app: "open", users: map[int64]bool{7: true}},
	}
	m, err := imbridge.NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := imbridge.NewGuard(apps, members, imbridge.GuardConfig{}, m, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	join := func(group, user string) []byte {
		return []byte(`{"CallbackCommand":"Group.CallbackBeforeApplyJoinGroup","GroupId":"` + group + `","Type":"AVChatRoom","Requestor_Account":"` + user + `"}`)
	}
	q := func(app int64, token, at string) imbridge.CallbackQuery {
		return imbridge.CallbackQuery{SDKAppID: strconv.FormatInt(app, 10), CallbackCommand: imbridge.CommandBeforeApplyJoinGroup,
			Sign: imbridge.Sign(token, at), RequestTime: at}
	}
	for _, tc := range []struct {
		name string
		q    imbridge.CallbackQuery
		body []byte
		want int
	}{
		{"present user", q(1400000001, "token-one", ts), join("g-one", "7"), 0},
		{"absent user (left, kicked or swept)", q(1400000001, "token-one", ts), join("g-one", "8"), 1},
		{"unloaded room", q(1400000001, "token-one", ts), join("g-none", "7"), 1},
		{"bad sign", q(1400000001, "wrong", ts), join("g-one", "7"), 1},
		{"stale time", q(1400000001, "token-one", strconv.FormatInt(now.Unix()-61, 10)), join("g-one", "7"), 1},
		{"future time", q(1400000001, "token-one", strconv.FormatInt(now.Unix()+61, 10)), join("g-one", "7"), 1},
		{"second app, own token", q(1400000002, "token-two", ts), join("g-two", "7"), 0},
		{"second app, first app's token", q(1400000002, "token-one", ts), join("g-two", "7"), 1},
		{"group of another application", q(1400000002, "token-two", ts), join("g-one", "7"), 1},
		{"app without a token", imbridge.CallbackQuery{SDKAppID: "1400000003", CallbackCommand: imbridge.CommandBeforeApplyJoinGroup}, join("g-open", "7"), 0},
		{"unknown sdkappid", q(1400009999, "token-one", ts), join("g-one", "7"), 1},
		{"bad body", q(1400000001, "token-one", ts), []byte(`{`), 1},
		{"bad user", q(1400000001, "token-one", ts), join("g-one", "x"), 1},
		{"other command", imbridge.CallbackQuery{SDKAppID: "1400000001", CallbackCommand: "Group.CallbackAfterNewMemberJoin",
			Sign: imbridge.Sign("token-one", ts), RequestTime: ts}, []byte(`{}`), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := g.Handle(tc.q, tc.body); got.ErrorCode != tc.want || got.ActionStatus != "OK" {
				t.Fatalf("reply %+v, want ErrorCode %d", got, tc.want)
			}
		})
	}
}
