package roomcluster

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"voiceroom/rooms"
)

// TestCommandCodec: encodeCommand writes what json.Marshal writes, and
// decodeCommand reads back every command as encoding/json would: the
// plain ones without reflection, the rest (escapes, nested arguments,
// another writer's order) through encoding/json.
func TestCommandCodec(t *testing.T) {
	title, notice := "news", ""
	cases := map[string]struct {
		cmd   rooms.Command
		plain bool // read without reflection
	}{
		"join": {cmd: rooms.Command{Kind: rooms.KindJoinRoom, AppCode: "app", RoomID: "app_1", CommandID: "c1", RequestID: "r1",
			Actor: rooms.Actor{UserID: 42}, Password: "secret"}, plain: true},
		"leave without view": {cmd: rooms.Command{Kind: rooms.KindLeaveRoom, AppCode: "app", RoomID: "r", CommandID: "c", ClientKey: true,
			Actor: rooms.Actor{UserID: 7}, NoView: true}, plain: true},
		"every scalar": {cmd: rooms.Command{Kind: "Anything", AppCode: "a", RoomID: "r", CommandID: "c", ClientKey: true, RequestID: "q",
			Actor: rooms.Actor{UserID: -3, Admin: true, Operator: "ops"}, NowMs: 1_700_000_000_123,
			Args: rooms.Args{Title: "t", CoverURL: "https://x/y.png", Description: "d", Mode: "m", SeatCount: 9, ShortID: "s", RegionID: 4,
				SeatIndex: rooms.AnySeat, Locked: true, Muted: true, SeatMode: "apply", ExpiresAtMs: 5, MuteSeconds: 6, TargetUserID: 8,
				BanSeconds: 10, GiftID: 11, GiftName: "rose", Count: 12, Price: 13, HeatPer: 14, PasswordHash: "$2a$10$h", PasswordGiven: true,
				Reason: "why"}, Password: "p", NoView: true}, plain: true},
		"empty": {cmd: rooms.Command{}, plain: true},
		"escapes": {cmd: rooms.Command{Kind: rooms.KindCreateRoom, AppCode: "app", RoomID: "r",
			Args: rooms.Args{Title: "<b>\"quoted\" \\ ünï\u2028\n", Description: "tab\there"}}},
		"info":  {cmd: rooms.Command{Kind: rooms.KindUpdateRoomInfo, AppCode: "app", RoomID: "r", Args: rooms.Args{Info: &rooms.RoomInfo{Title: &title, Notice: &notice}}}},
		"pk":    {cmd: rooms.Command{Kind: "PKStart", AppCode: "app", RoomID: "r", Args: rooms.Args{PK: &rooms.PKArgs{BattleID: "b", OpponentRoomID: "o", EndsAtMs: 9}}}},
		"sweep": {cmd: rooms.Command{Kind: rooms.KindSweepStale, AppCode: "app", RoomID: "r", Actor: rooms.Actor{Admin: true}, Args: rooms.Args{UserIDs: []int64{1, 2}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(&tc.cmd)
			if err != nil {
				t.Fatal(err)
			}
			got, err := encodeCommand(&tc.cmd)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("encodeCommand:\n got %s (%v)\nwant %s", got, err, want)
			}
			var plain rooms.Command
			if ok := readCommand(got, &plain); ok != tc.plain {
				t.Fatalf("read without reflection: %v, want %v", ok, tc.plain)
			}
			var back rooms.Command
			if err := decodeCommand(got, &back); err != nil || !reflect.DeepEqual(back, tc.cmd) {
				t.Fatalf("decodeCommand: %+v (%v), want %+v", back, err, tc.cmd)
			}
		})
	}
	// Another writer's shape (an explicit zero, another order, an unknown
	// field) is read through encoding/json.
	for _, data := range []string{
		`{"kind":"JoinRoom","app":"a","room":"r","actor":{"user_id":1},"args":{"seat_count":0}}`,
		`{"app":"a","kind":"JoinRoom","room":"r","actor":{"user_id":1},"args":{}}`,
		`{"kind":"JoinRoom","app":"a","room":"r","actor":{"user_id":1},"args":{},"later":1}`,
	} {
		var got rooms.Command
		want := rooms.Command{Kind: rooms.KindJoinRoom, AppCode: "a", RoomID: "r", Actor: rooms.Actor{UserID: 1}}
		if err := decodeCommand([]byte(data), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("decodeCommand(%s) = %+v (%v), want %+v", data, got, err, want)
		}
	}
}
