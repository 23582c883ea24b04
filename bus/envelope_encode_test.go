package bus

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// Message's hand-made encoding must be what json.Marshal makes of the
// envelope, for every string a producer could put in it.
func TestMessageEncodesAsJSONMarshal(t *testing.T) {
	odd := []string{"", "plain", `q"uote\back`, "<tag>&amp;", "tab\tnl\nret\rbs\bff\f", "\x00\x01\x1f\x7f",
		"é中文😀", "\u2028\u2029", "bad\xffutf8\xc3", "trailing\xe2\x82", strings.Repeat("x", 300)}
	payloads := []string{"", `{}`, `{"room":{"title":"\u003cb\u003e","n":1},"user_id":7}`, `[1,2,3]`, `"s"`}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		pick := func() string {
			if i < len(odd) {
				return odd[i]
			}
			s := odd[rng.IntN(len(odd))]
			b := []byte(s)
			for range rng.IntN(4) {
				b = append(b, byte(rng.IntN(256)))
			}
			return string(b)
		}
		e := Envelope{EventID: "e", AppCode: "a", RoomID: "r", RoomVersion: rng.Int64(), EventType: "t",
			CommandID: pick(), RequestID: pick(), OccurredAtMs: rng.Int64N(1<<50) - 1<<49,
			Payload: json.RawMessage(payloads[rng.IntN(len(payloads))])}
		if i%3 == 0 {
			e.RequestID = ""
		}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got := e.appendJSON(nil)
		if string(got) != string(want) {
			t.Fatalf("envelope %d:\n got %s\nwant %s", i, got, want)
		}
		if len(e.Payload) > 0 && len(got) > e.encodedSize()+64 && !strings.ContainsAny(e.CommandID+e.RequestID, "<>&\"\\\x00\xff") {
			t.Fatalf("encodedSize %d far below %d", e.encodedSize(), len(got))
		}
	}
}

func BenchmarkEnvelopeEncode(b *testing.B) {
	e := Envelope{EventID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", AppCode: "bencha", RoomID: "bencha_0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
		RoomVersion: 42, EventType: "RoomUserJoined", CommandID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c", RequestID: "req-1",
		OccurredAtMs: 1764620000000, Payload: json.RawMessage(`{"room":{"room_id":"bencha_x","title":"Room 1","online_count":5,"heat":1200},"user_id":7}`)}
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Message", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.Message(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkEnvelopeAppendJSON(b *testing.B) {
	e := Envelope{EventID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", AppCode: "bencha", RoomID: "bencha_0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
		RoomVersion: 42, EventType: "RoomUserJoined", CommandID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c", RequestID: "req-1",
		OccurredAtMs: 1764620000000, Payload: json.RawMessage(`{"room":{"room_id":"bencha_x","title":"Room 1","online_count":5,"heat":1200},"user_id":7}`)}
	for b.Loop() {
		_ = e.appendJSON(make([]byte, 0, e.encodedSize()))
	}
}

// DecodeEnvelope reads what Message writes, and any other JSON of an
// envelope, as json.Unmarshal does; the one difference allowed is a
// payload that is not JSON, which the sink decoding it refuses.
func TestDecodeEnvelopeAsJSONUnmarshal(t *testing.T) {
	odd := []string{"plain", `q"uote\back`, "<tag>&amp;", "tab\tnl", "é中文😀", "\u2028", "bad\xffutf8", ""}
	payloads := []string{"", `{}`, `{"room":{"title":"\u003cb\u003e","n":1},"user_id":7}`, `[1,2]`}
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(data []byte) {
		t.Helper()
		var want Envelope
		wantErr := json.Unmarshal(data, &want)
		// On delivery the subject's tokens are known: the same result,
		// whether they match the envelope's or not.
		full, fullErr := DecodeEnvelope(data)
		for _, subject := range []string{"room.events.a.r.t", "room.events.x.r2.t", "other"} {
			if d, err := decodeDelivered(subject, data); (err == nil) != (fullErr == nil) || !sameEnvelope(d, full) {
				t.Fatalf("%s on %s: decodeDelivered %+v, %v; DecodeEnvelope %+v, %v", data, subject, d, err, full, fullErr)
			}
		}
		got, ok := decodeEnvelopeFast(data, eventTokens{})
		if !ok {
			return // DecodeEnvelope uses json.Unmarshal
		}
		if wantErr != nil {
			// Only a damaged payload may pass: the sink decoding it refuses it.
			if json.Valid(got.Payload) {
				t.Fatalf("%s: fast path accepted what json.Unmarshal refuses (%v)", data, wantErr)
			}
			return
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if string(gj) != string(wj) {
			t.Fatalf("%s:\n fast %s\n json %s", data, gj, wj)
		}
	}
	fast := 0
	for i := range 2000 {
		e := Envelope{EventID: "e" + strconv.Itoa(i), AppCode: "a", RoomID: "r", RoomVersion: rng.Int64() - 1<<62, EventType: "t",
			CommandID: odd[rng.IntN(len(odd))], RequestID: odd[rng.IntN(len(odd))], OccurredAtMs: rng.Int64N(1 << 50),
			Payload: json.RawMessage(payloads[rng.IntN(len(payloads))])}
		data := e.appendJSON(nil)
		if _, ok := decodeEnvelopeFast(data, eventTokens{}); ok {
			fast++
		}
		check(data)
		// Damaged copies: cut, a byte changed.
		check(data[:rng.IntN(len(data))])
		d := append([]byte(nil), data...)
		d[rng.IntN(len(d))] = byte(rng.IntN(256))
		check(d)
	}
	if fast < 150 {
		t.Fatalf("only %d of 2000 envelopes took the fast path", fast)
	}
	for _, s := range []string{
		`{ "event_id":"e","app_code":"a","room_id":"r","room_version":1,"event_type":"t","command_id":"c","occurred_at_ms":2}`,
		`{"app_code":"a","event_id":"e","room_id":"r","room_version":1,"event_type":"t","command_id":"c","occurred_at_ms":2}`,
		`{"event_id":"e","app_code":"a","room_id":"r","room_version":1.5,"event_type":"t","command_id":"c","occurred_at_ms":2}`,
		`{"event_id":"e","app_code":"a","room_id":"r","room_version":01,"event_type":"t","command_id":"c","occurred_at_ms":2}`,
		`{"event_id":"e","app_code":"a","room_id":"r","room_version":99999999999999999999,"event_type":"t","command_id":"c","occurred_at_ms":2}`,
		`{"event_id":"e","app_code":"a","room_id":"r","room_version":1,"event_type":"t","command_id":"c","occurred_at_ms":2,"payload":{"x":1}}`,
	} {
		check([]byte(s))
	}
}

func sameEnvelope(a, b Envelope) bool {
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	return string(aj) == string(bj)
}

func BenchmarkDecodeDelivered(b *testing.B) {
	e := Envelope{EventID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", AppCode: "bencha", RoomID: "bencha_0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
		RoomVersion: 42, EventType: "RoomUserJoined", CommandID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c", RequestID: "req-1",
		OccurredAtMs: 1764620000000, Payload: json.RawMessage(`{"room":{"room_id":"bencha_x","title":"Room 1","online_count":5,"heat":1200},"user_id":7}`)}
	m, err := e.Message()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeDelivered(m.Subject, m.Data); err != nil {
			b.Fatal(err)
		}
	}
}
