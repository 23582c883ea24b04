package docs_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/internal/testenv"
)

// docs:begin consumer
// consumeGifts hands every RoomGiftSent of every app to handle, in order
// per room, from a durable consumer of its own: after a restart it goes on
// where it stopped. A message handle fails on is delivered again later.
func consumeGifts(ctx context.Context, js jetstream.JetStream, handle func(ev map[string]any) error) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, "ROOM_EVENTS", jetstream.ConsumerConfig{
		Durable:       "my-gifts",
		FilterSubject: "room.events.*.*.RoomGiftSent",
		AckPolicy:     jetstream.AckExplicitPolicy,
		MaxAckPending: 1, // one at a time: keeps each room's order through redeliveries
	})
	if err != nil {
		return err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var ev map[string]any // or decode into your own struct
		if err := json.Unmarshal(m.Data(), &ev); err == nil && handle(ev) == nil {
			m.Ack()
			return
		}
		m.NakWithDelay(time.Second)
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	cc.Stop()
	return nil
}

// docs:end consumer

// TestConsumerExample runs the events page's consumer example (events.md) against a
// real JetStream with voiceroom's streams: it receives the gift event and
// not the join, and takes a failed one again. The page must show the
// example exactly as it is here.
func TestConsumerExample(t *testing.T) {
	js := testenv.RunJetStream(t).Conn().JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, typ := range []string{"RoomUserJoined", "RoomGiftSent"} {
		raw, err := os.ReadFile(filepath.Join("..", "roomevent", "testdata", typ+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			EventID string `json:"event_id"`
			AppCode string `json:"app_code"`
			RoomID  string `json:"room_id"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			t.Fatal(err)
		}
		msg := &nats.Msg{Subject: "room.events." + head.AppCode + "." + head.RoomID + "." + typ, Data: raw,
			Header: nats.Header{jetstream.MsgIDHeader: []string{head.EventID + "-" + typ}}} // the goldens share an id
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan map[string]any, 4)
	failed := false
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- consumeGifts(cctx, js, func(ev map[string]any) error {
			if !failed {
				failed = true
				return context.DeadlineExceeded // any error: the message comes again
			}
			got <- ev
			return nil
		})
	}()
	select {
	case ev := <-got:
		if ev["event_type"] != "RoomGiftSent" {
			t.Fatalf("got %v, want the RoomGiftSent", ev["event_type"])
		}
		if !failed {
			t.Fatal("the first delivery was not the failed one")
		}
	case <-ctx.Done():
		t.Fatal("the example consumer received nothing")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-got:
		t.Fatalf("received a second event: %v", ev["event_type"])
	default:
	}

	src, err := os.ReadFile("consumer_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(src), "// docs:begin consumer\n")
	example, _, _ := strings.Cut(rest, "\n// docs:end consumer")
	readme, err := os.ReadFile("events.md")
	if err != nil {
		t.Fatal(err)
	}
	if example == "" || !strings.Contains(string(readme), "```go\n"+example+"```") {
		t.Errorf("events.md does not show the consumer example as docs/consumer_example_test.go has it:\n%s", example)
	}
}
