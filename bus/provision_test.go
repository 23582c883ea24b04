package bus_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

func TestProvisionIdempotent(t *testing.T) {
	conn := testenv.NewJetStream(t) // provisioned once with defaults
	js := conn.JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Again with the same settings: nothing changes, no error.
	if err := bus.Provision(ctx, js, bus.StreamConfig{}, bus.DefaultConsumers()...); err != nil {
		t.Fatalf("second provision: %v", err)
	}
	s, err := js.Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.MaxAge != 7*24*time.Hour || cfg.Duplicates != 2*time.Minute || !slices.Equal(cfg.Subjects, []string{"room.events.>", "room.replay.>"}) {
		t.Fatalf("stream config %+v", cfg)
	}
	dlq, err := js.Stream(ctx, bus.DLQStreamName)
	if err != nil {
		t.Fatal(err)
	}
	if c := dlq.CachedInfo().Config; c.MaxAge != 30*24*time.Hour || !slices.Equal(c.Subjects, []string{"dlq.>"}) {
		t.Fatalf("dlq config %+v", c)
	}
	for _, d := range []string{bus.DurableIMBridge, bus.DurableListProjector, bus.DurableRoomRanks} {
		c := mustConsumerInfo(t, js, d).Config
		if c.AckWait != 30*time.Second || c.MaxDeliver != 10 || c.MaxAckPending != 1000 ||
			c.FilterSubject != "" || len(c.FilterSubjects) != 0 { // the whole stream, replays included
			t.Fatalf("consumer %s config %+v", d, c)
		}
	}

	// Changed settings are applied.
	changed := bus.ConsumerConfig{
		Durable:       bus.DurableIMBridge,
		BackOff:       []time.Duration{time.Second, 5 * time.Second},
		MaxDeliver:    5,
		MaxAckPending: 200,
	}
	if err := bus.Provision(ctx, js, bus.StreamConfig{MaxAge: 24 * time.Hour}, changed); err != nil {
		t.Fatalf("provision changed: %v", err)
	}
	s, err = js.Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.MaxAge; got != 24*time.Hour {
		t.Errorf("max age %s after update", got)
	}
	c := mustConsumerInfo(t, js, bus.DurableIMBridge).Config
	if c.MaxDeliver != 5 || c.MaxAckPending != 200 || c.AckWait != time.Second || len(c.BackOff) != 2 {
		t.Errorf("consumer after update %+v", c)
	}
}

func TestConsumerConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  bus.ConsumerConfig
		ok   bool
	}{
		{"defaults", bus.ConsumerConfig{Durable: "imbridge"}, true},
		{"backoff sets ack wait", bus.ConsumerConfig{Durable: "d", BackOff: []time.Duration{time.Second}, MaxDeliver: 2}, true},
		{"ack wait equals backoff[0]", bus.ConsumerConfig{Durable: "d", AckWait: time.Second, BackOff: []time.Duration{time.Second}, MaxDeliver: 2}, true},
		{"narrow filter", bus.ConsumerConfig{Durable: "d", FilterSubject: "room.events.app1.>"}, true},
		{"no durable", bus.ConsumerConfig{}, false},
		{"dotted durable", bus.ConsumerConfig{Durable: "a.b"}, false},
		{"filter outside stream", bus.ConsumerConfig{Durable: "d", FilterSubject: "dlq.>"}, false},
		{"max deliver equals backoff", bus.ConsumerConfig{Durable: "d", BackOff: []time.Duration{time.Second, time.Second}, MaxDeliver: 2}, false},
		{"ack wait differs from backoff[0]", bus.ConsumerConfig{Durable: "d", AckWait: 2 * time.Second, BackOff: []time.Duration{time.Second}, MaxDeliver: 3}, false},
		{"zero backoff", bus.ConsumerConfig{Durable: "d", BackOff: []time.Duration{0}, MaxDeliver: 3}, false},
		{"negative max deliver", bus.ConsumerConfig{Durable: "d", MaxDeliver: -2}, false},
		{"unlimited max deliver", bus.ConsumerConfig{Durable: "d", MaxDeliver: -1, BackOff: []time.Duration{time.Second}}, true},
		{"negative max ack pending", bus.ConsumerConfig{Durable: "d", MaxAckPending: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.ok && err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if !tt.ok && !errors.Is(err, bus.ErrInvalidConfig) {
				t.Fatalf("err %v, want ErrInvalidConfig", err)
			}
		})
	}
	if got := (bus.ConsumerConfig{Durable: "d", BackOff: []time.Duration{3 * time.Second}}).WithDefaults().AckWait; got != 3*time.Second {
		t.Errorf("ack wait default with backoff = %s, want backoff[0]", got)
	}
}

func TestStreamConfigValidate(t *testing.T) {
	for name, cfg := range map[string]bus.StreamConfig{
		"window beyond max age": {DuplicateWindow: time.Hour, MaxAge: time.Minute},
		"negative max age":      {MaxAge: -time.Hour},
		"too many replicas":     {Replicas: 7},
	} {
		if err := cfg.Validate(); !errors.Is(err, bus.ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", name, err)
		}
	}
	if err := (bus.StreamConfig{}).Validate(); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}

func TestProvisionRejectsBeforeSending(t *testing.T) {
	conn := testenv.NewJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := bus.Provision(ctx, conn.JetStream(), bus.StreamConfig{MaxAge: time.Hour},
		bus.ConsumerConfig{Durable: "ok"}, bus.ConsumerConfig{Durable: "ok"})
	if !errors.Is(err, bus.ErrInvalidConfig) {
		t.Fatalf("duplicate durable: err %v", err)
	}
	s, err := conn.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if s.CachedInfo().Config.MaxAge != 7*24*time.Hour {
		t.Fatal("stream changed although the consumer list was invalid")
	}
}
