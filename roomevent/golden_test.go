package roomevent_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
)

// exampleCard is the card of every golden event.
var exampleCard = roomevent.Card{
	Listing: roomevent.Listing{
		RoomID: "demo_0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b", RoomShortID: "48213", IMGroupID: "demo_0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b",
		OwnerUserID: 1001, HostUserID: 1002, VisibleRegionID: 3, Title: "Friday night", CoverURL: "https://cdn.example.com/c.png",
		Mode: "chat", Status: roomevent.StatusActive, Locked: true, Heat: 120, OnlineCount: 7, SeatCount: 8,
		OccupiedSeatCount: 3, CreatedAtMs: 1764590400000,
	},
	RoomVersion: 42,
}

// examples holds a body of every event type; a type missing here fails
// TestEveryTypeHasAGoldenEvent.
var examples = map[string]any{
	roomevent.RoomCreated:         nil,
	roomevent.RoomUserJoined:      roomevent.UserJoined{UserID: 2001},
	roomevent.RoomUserLeft:        roomevent.UserLeft{UserID: 2001, Reason: roomevent.LeaveReasonStale, SeatIndex: 2},
	roomevent.RoomMicUp:           roomevent.MicMoved{UserID: 2001, SeatIndex: 2},
	roomevent.RoomMicDown:         roomevent.MicMoved{UserID: 2001, SeatIndex: 2},
	roomevent.RoomMicChanged:      roomevent.MicChanged{UserID: 2001, FromSeatIndex: 2, ToSeatIndex: 5},
	roomevent.RoomSeatLockChanged: roomevent.SeatLockChanged{SeatIndex: 4, Locked: true},
	roomevent.RoomHostTransferred: roomevent.HostTransferred{FromUserID: 1001, ToUserID: 1002},
	roomevent.RoomGiftSent: roomevent.GiftSent{SenderUserID: 2001, ReceiverUserID: 1002, GiftID: 9, GiftName: "rose",
		Count: 3, Value: 30, HeatDelta: 30},
	roomevent.RoomHeatChanged:     roomevent.HeatChanged{Heat: 120, Delta: 30},
	roomevent.RoomRankChanged:     roomevent.RankChanged{GiftRank: []roomevent.Contribution{{UserID: 2001, Value: 90}, {UserID: 2002, Value: 30}}},
	roomevent.RoomPasswordChanged: roomevent.PasswordChanged{Locked: true},
	roomevent.RoomUserKicked:      roomevent.UserKicked{UserID: 2003, ByUserID: 1002, BanUntilMs: 1764594000000},
	roomevent.RoomClosed:          roomevent.Closed{ByUserID: 0, Operator: "ops-anna"},
	roomevent.RoomVisibleRegionChanged: roomevent.VisibleRegionChanged{OldRegionID: 3, NewRegionID: 4,
		Reason: "country moved", Operator: "ops-anna"},
	roomevent.RoomBanned:                roomevent.Moderated{Reason: "spam", Operator: "ops-anna"},
	roomevent.RoomRestored:              roomevent.Moderated{Reason: "appeal granted", Operator: "ops-anna"},
	roomevent.RoomAdminAdded:            roomevent.AdminChanged{UserID: 2001, ByUserID: 1001},
	roomevent.RoomAdminRemoved:          roomevent.AdminChanged{UserID: 2001, ByUserID: 1001},
	roomevent.RoomSeatMuteChanged:       roomevent.SeatMuteChanged{SeatIndex: 2, Muted: true, ByUserID: 1002},
	roomevent.RoomSelfMuteChanged:       roomevent.SelfMuteChanged{UserID: 2001, SeatIndex: 2, Muted: true},
	roomevent.RoomSeatModeChanged:       roomevent.SeatModeChanged{SeatMode: roomevent.SeatModeApply},
	roomevent.RoomMicRequested:          roomevent.MicRequested{UserID: 2004, SeatIndex: -1, ExpiresAtMs: 1764590700000},
	roomevent.RoomMicRequestCancelled:   roomevent.MicRequestEnded{UserID: 2004, ByUserID: 2004, SeatIndex: -1},
	roomevent.RoomMicRequestApproved:    roomevent.MicRequestEnded{UserID: 2004, ByUserID: 1002, SeatIndex: 3},
	roomevent.RoomMicRequestRejected:    roomevent.MicRequestEnded{UserID: 2004, ByUserID: 1002, SeatIndex: -1},
	roomevent.RoomMicInvited:            roomevent.MicInvited{UserID: 2005, ByUserID: 1002, SeatIndex: 4, ExpiresAtMs: 1764590460000},
	roomevent.RoomMicInvitationAccepted: roomevent.MicInvitationEnded{UserID: 2005, SeatIndex: 4},
	roomevent.RoomMicInvitationDeclined: roomevent.MicInvitationEnded{UserID: 2005, SeatIndex: -1},
	roomevent.RoomInfoChanged: roomevent.InfoChanged{Title: "Friday night", Notice: "Be kind. Music from 9.",
		CoverURL: "https://cdn.example.com/c.png", Description: "Chat and songs", ByUserID: 1002},
	roomevent.RoomChatMuted: roomevent.ChatMuted{UserID: 2003, ByUserID: 1002, UntilMs: 1764591000000, Seconds: 600},
	roomevent.ActivityRewarded: roomevent.Rewarded{ActivityID: 12, Name: "Weekend gifts", Reason: "rank", PeriodStartMs: 1764374400000,
		UserID: 2001, Subject: "2001", Rank: 1, Score: 900, Coins: 500, EntryKey: "activity:12:rank:1764374400000:2001", PaidAtMs: 1764590460000},
	roomevent.ActivitySettled: roomevent.ActivityResult{ActivityID: 12, Name: "Weekend gifts", Kind: "leaderboard", Metric: "gift_value_sent",
		StartsAtMs: 1764374400000, EndsAtMs: 1764547200000, SettledAtMs: 1764590460000, Payouts: 2, Coins: 800,
		Winners: []roomevent.Winner{{Rank: 1, Subject: "2001", UserID: 2001, Score: 900, Coins: 500}, {Rank: 2, Subject: "2002", UserID: 2002, Score: 700, Coins: 300}}},
	roomevent.RoomPKStarted: roomevent.PKStarted{BattleID: "0192a3b4-1111-7000-8000-000000000001",
		OpponentRoomID: "demo_0192a3b4-aaaa-7e8f-9a0b-1c2d3e4f5a6b", StartsAtMs: 1764590460000, EndsAtMs: 1764590760000},
	roomevent.RoomPKScoreChanged: roomevent.PKScore{BattleID: "0192a3b4-1111-7000-8000-000000000001",
		OpponentRoomID: "demo_0192a3b4-aaaa-7e8f-9a0b-1c2d3e4f5a6b", MyScore: 900, OpponentScore: 700, Seq: 12},
	roomevent.RoomPKEnded: roomevent.PKEnded{BattleID: "0192a3b4-1111-7000-8000-000000000001",
		OpponentRoomID: "demo_0192a3b4-aaaa-7e8f-9a0b-1c2d3e4f5a6b", Reason: roomevent.PKReasonTimeUp, MyScore: 900, OpponentScore: 700,
		Result: roomevent.PKWin, WinnerRoomID: "demo_0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b"},
	roomevent.PKSettled: roomevent.PKResult{BattleID: "0192a3b4-1111-7000-8000-000000000001",
		RoomID: "demo_0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b", OpponentRoomID: "demo_0192a3b4-aaaa-7e8f-9a0b-1c2d3e4f5a6b",
		Reason: roomevent.PKReasonTimeUp, RoomScore: 900, OpponentScore: 700, WinnerRoomID: "demo_0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b",
		StartsAtMs: 1764590460000, EndsAtMs: 1764590760000, EndedAtMs: 1764590760400},
}

// TestCardGolden pins the card's JSON, as events carry it.
func TestCardGolden(t *testing.T) {
	b, err := json.Marshal(exampleCard)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Golden(t, "card.json", b)
}

// TestEveryTypeHasAGoldenEvent pins the stored and published form of every
// event type: the envelope as the outbox row holds it and ROOM_EVENTS
// carries it, byte for byte. It also decodes the golden bytes back into the
// type's body and card, so a renamed field fails in both directions.
func TestEveryTypeHasAGoldenEvent(t *testing.T) {
	card, err := json.Marshal(exampleCard)
	if err != nil {
		t.Fatal(err)
	}
	for i, typ := range roomevent.Types() {
		t.Run(typ, func(t *testing.T) {
			body, ok := examples[typ]
			if !ok {
				t.Fatalf("no example body for %s: add one to examples", typ)
			}
			spec, _ := roomevent.Lookup(typ)
			var payload json.RawMessage
			var err error
			if spec.NoRoom {
				payload, err = json.Marshal(body)
			} else {
				payload, err = roomevent.EncodePayload(card, body)
			}
			if err != nil {
				t.Fatal(err)
			}
			env := bus.Envelope{
				EventID: "0192a3b4-0000-7000-8000-" + []string{"000000000000", "000000000001"}[i%2], AppCode: "demo",
				RoomID: exampleCard.RoomID, RoomVersion: exampleCard.RoomVersion, EventType: typ,
				CommandID: "cmd-0192a3b4", RequestID: "req-1", OccurredAtMs: 1764590460000, Payload: payload,
			}
			if spec.NoRoom {
				env.RoomID, env.RoomVersion, env.CommandID, env.RequestID = roomevent.ActivityRoomID(12), 3, "activity-12-settle", ""
				if typ == roomevent.PKSettled {
					battle := "0192a3b4-1111-7000-8000-000000000001"
					env.RoomID, env.RoomVersion, env.CommandID = roomevent.PKRoomID(battle), 1, "pk:"+battle+":settled"
				}
			}
			msg, err := env.Message()
			if err != nil {
				t.Fatal(err)
			}
			testenv.Golden(t, typ+".json", msg.Data)

			got, err := bus.DecodeEnvelope(msg.Data)
			if err != nil {
				t.Fatal(err)
			}
			if spec.NoRoom {
				if _, err := roomevent.DecodeCard(got.Payload); err != roomevent.ErrNoCard {
					t.Fatalf("%s carries a card: %v", typ, err)
				}
				checkBody(t, got.Payload, typ, body)
				return
			}
			c, err := roomevent.DecodeCard(got.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if c != exampleCard {
				t.Errorf("card decoded as %+v, want %+v", c, exampleCard)
			}
			if err := c.Check(env.RoomID, env.RoomVersion); err != nil {
				t.Error(err)
			}
			checkBody(t, got.Payload, typ, body)
		})
	}
}

// checkBody decodes payload's body (without the card) into a new body of
// typ and checks that it encodes as body again.
func checkBody(t *testing.T, payload []byte, typ string, body any) {
	t.Helper()
	{
		{
			nb := roomevent.NewBody(typ)
			if (nb == nil) != (body == nil) {
				t.Fatalf("NewBody(%s) = %T, example body %T", typ, nb, body)
			}
			if nb == nil {
				return
			}
			dec := json.NewDecoder(bytes.NewReader(withoutRoom(t, payload)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(nb); err != nil {
				t.Fatalf("golden payload does not decode into %T: %v", nb, err)
			}
			again, err := json.Marshal(nb)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, want) {
				t.Errorf("body round trip: %s, want %s", again, want)
			}
		}
	}
}

// withoutRoom returns payload's fields other than "room".
func withoutRoom(t *testing.T, payload []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "room")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
