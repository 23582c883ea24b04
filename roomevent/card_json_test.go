package roomevent

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

var oddStrings = []string{"", "plain", `q"uote\back`, "<tag>&amp;", "tab\tnl\nret", "\x00\x1f\x7f",
	"é中文😀", "\u2028\u2029", "bad\xffutf8\xc3", strings.Repeat("x", 300)}

func randomCard(rng *rand.Rand, pick func() string) Card {
	return Card{Listing: Listing{RoomID: pick(), RoomShortID: pick(), IMGroupID: pick(), OwnerUserID: rng.Int64() - 1<<62,
		HostUserID: rng.Int64N(1 << 40), VisibleRegionID: rng.Int64N(100), Title: pick(), CoverURL: pick(), Mode: pick(),
		Status: pick(), Locked: rng.IntN(2) == 0, Heat: rng.Int64(), OnlineCount: rng.IntN(1 << 20), SeatCount: rng.IntN(20),
		OccupiedSeatCount: rng.IntN(20) - 1, CreatedAtMs: rng.Int64N(1 << 50)}, RoomVersion: rng.Int64N(1 << 40)}
}

// The card's hand-made encoding must be what json.Marshal makes of it,
// for every string a room could carry.
func TestCardAppendJSONAsJSONMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 2000 {
		pick := func() string {
			s := oddStrings[rng.IntN(len(oddStrings))]
			for range rng.IntN(3) {
				s += string(rune(rng.IntN(0x3000)))
			}
			return s
		}
		c := randomCard(rng, pick)
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("card %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// DecodeCard reads a payload as json.Unmarshal does, on its fast path as
// on the other: the payloads the rooms package writes, and damaged copies.
func TestDecodeCardAsJSONUnmarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	bodies := []any{nil, struct{}{}, UserJoined{UserID: 7}, GiftSent{SenderUserID: 1, ReceiverUserID: 2, GiftID: 9, GiftName: "g<1>", Count: 3, Value: 4}}
	viaJSON := func(payload []byte) (Card, error) {
		var p struct {
			Room *Card `json:"room"`
		}
		if err := json.Unmarshal(payload, &p); err != nil {
			return Card{}, err
		}
		if p.Room == nil {
			return Card{}, ErrNoCard
		}
		return *p.Room, nil
	}
	check := func(payload []byte) {
		t.Helper()
		want, wantErr := viaJSON(payload)
		got, err := DecodeCard(payload)
		if (err == nil) != (wantErr == nil) || got != want {
			t.Fatalf("%s:\n DecodeCard %+v, %v\n json       %+v, %v", payload, got, err, want, wantErr)
		}
	}
	fast := 0
	plain := []string{"", "plain", "é中文😀", "bencha_0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}
	for i := range 2000 {
		strs := oddStrings
		if i%2 == 0 {
			strs = plain
		}
		c := randomCard(rng, func() string { return strs[rng.IntN(len(strs))] })
		payload, err := EncodePayload(c.AppendJSON(nil), bodies[rng.IntN(len(bodies))])
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := decodeCardFast(payload); ok {
			fast++
		}
		check(payload)
		check(payload[:rng.IntN(len(payload))])
		d := append([]byte(nil), payload...)
		d[rng.IntN(len(d))] = byte(rng.IntN(256))
		check(d)
	}
	if fast < 900 {
		t.Fatalf("only %d of 2000 payloads took the fast path", fast)
	}
	for _, s := range []string{
		`{"room":{"room_id":"r","status":"active","created_at_ms":5,"room_version":3}}`,
		`{"room":{"room_id":"r","room_short_id":"s","im_group_id":"g","owner_user_id":1,"host_user_id":2,"visible_region_id":3,"title":"t","cover_url":"u","mode":"chat","status":"active","locked":false,"heat":1,"online_count":2,"seat_count":8,"occupied_seat_count":1,"created_at_ms":5,"room_version":3},"user_id":7}`,
		`{"room":{"room_id":"r","room_short_id":"s","im_group_id":"g","owner_user_id":1,"host_user_id":2,"visible_region_id":3,"title":"t","cover_url":"u","mode":"chat","status":"active","locked":false,"heat":1,"online_count":2,"seat_count":8,"occupied_seat_count":1,"created_at_ms":5,"room_version":3},"user_id":7,}`,
		`{"room":{"room_id":"r","room_short_id":"s","im_group_id":"g","owner_user_id":1,"host_user_id":2,"visible_region_id":3,"title":"t","cover_url":"u","mode":"chat","status":"active","locked":false,"heat":1,"online_count":2,"seat_count":8,"occupied_seat_count":1,"created_at_ms":5,"room_version":3}`,
		`{"room":{"room_id":"r","room_short_id":"s","im_group_id":"g","owner_user_id":1,"host_user_id":2,"visible_region_id":3,"title":"t","cover_url":"u","mode":"chat","status":"active","locked":false,"heat":1,"online_count":2,"seat_count":8,"occupied_seat_count":1,"created_at_ms":5,"room_version":3,"extra":1}}`,
		`{"room":{"room_id":"r","room_short_id":"s","im_group_id":"g","owner_user_id":1,"host_user_id":2,"visible_region_id":3,"title":"t","cover_url":"u","mode":"chat","status":"active","locked":false,"heat":1.5,"online_count":2,"seat_count":8,"occupied_seat_count":1,"created_at_ms":5,"room_version":3}}`,
	} {
		check([]byte(s))
	}
}

func BenchmarkDecodeCard(b *testing.B) {
	c := Card{Listing: Listing{RoomID: "bencha_0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", RoomShortID: "48213",
		IMGroupID: "bencha_0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", OwnerUserID: 1001, HostUserID: 1001, VisibleRegionID: 3,
		Title: "Friday night", CoverURL: "https://cdn.example.com/c.png", Mode: "chat", Status: StatusActive, Heat: 1200,
		OnlineCount: 7, SeatCount: 8, OccupiedSeatCount: 3, CreatedAtMs: 1764590400000}, RoomVersion: 42}
	payload, err := EncodePayload(c.AppendJSON(nil), UserJoined{UserID: 2001})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("json.Unmarshal", func(b *testing.B) {
		for b.Loop() {
			var p struct {
				Room *Card `json:"room"`
			}
			if err := json.Unmarshal(payload, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeCard", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeCard(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
