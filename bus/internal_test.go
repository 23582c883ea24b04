package bus

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom"
)

func TestServerNakDelay(t *testing.T) {
	c := &Consumer{ackWait: time.Second, backOff: []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}}
	tests := []struct {
		delivery   uint64
		want, send time.Duration
	}{
		{1, 2 * time.Second, 2 * time.Second}, // BackOff[0] == AckWait: no excess
		{2, 5 * time.Second, time.Second},     // server adds 5s-1s
		{3, 30 * time.Second, time.Second},    // server adds 30s-1s
		{5, 30 * time.Second, time.Second},    // last BackOff value repeats
		{2, time.Second, time.Millisecond},    // excess alone is longer: shortest possible
		{3, time.Minute, time.Minute - 29*time.Second},
	}
	for _, tt := range tests {
		got := c.serverNakDelay(&jetstream.MsgMetadata{NumDelivered: tt.delivery}, tt.want)
		if got != tt.send {
			t.Errorf("delivery %d, want %s: send %s, expected %s", tt.delivery, tt.want, got, tt.send)
		}
	}
	plain := &Consumer{ackWait: time.Second}
	if got := plain.serverNakDelay(&jetstream.MsgMetadata{NumDelivered: 4}, 3*time.Second); got != 3*time.Second {
		t.Errorf("without backoff: %s", got)
	}
}

func TestNakDelayByDelivery(t *testing.T) {
	c := &Consumer{nakDelays: []time.Duration{time.Second, 2 * time.Second}}
	for nd, want := range map[uint64]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 9: 2 * time.Second} {
		if got := c.nakDelay(nd); got != want {
			t.Errorf("delivery %d: %s, want %s", nd, got, want)
		}
	}
}

func TestCleanReason(t *testing.T) {
	if got := cleanReason("a\r\nb\tc\x00d"); got != "a  b c d" {
		t.Errorf("control characters: %q", got)
	}
	long := strings.Repeat("é", 300) // 600 bytes
	got := cleanReason(long)
	if len(got) > maxReasonLen || !strings.HasSuffix(got, "...") || !strings.HasPrefix(got, "é") {
		t.Errorf("long reason cut to %d bytes: %q", len(got), got)
	}
	if strings.ContainsRune(got, '\uFFFD') {
		t.Error("cut inside a rune")
	}
}

func TestShardIsStable(t *testing.T) {
	seen := map[int]bool{}
	for i := range 100 {
		room := strings.Repeat("r", i%7) + string(rune('a'+i%26))
		j := &job{env: Envelope{AppCode: "app1", RoomID: room}}
		s := j.shard(4)
		// The room's worker is FNV-1a of "<app>.<room>", as before.
		if want := int(voiceroom.Hash("app1."+room) % 4); s != want || s != j.shard(4) {
			t.Fatalf("shard of %s = %d, want %d", room, s, want)
		}
		seen[s] = true
	}
	if len(seen) < 3 {
		t.Errorf("keys spread over %d of 4 shards", len(seen))
	}
	bad := &job{subject: "room.events.a.b.c", decodeErr: errors.New("bad")}
	if got, want := bad.shard(4), int(voiceroom.Hash("room.events.a.b.c")%4); got != want {
		t.Errorf("undecodable job's shard = %d, want its subject's %d", got, want)
	}
}
