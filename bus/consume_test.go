package bus_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

func TestConsumeMissingDurable(t *testing.T) {
	conn := testenv.NewJetStream(t)
	c, err := bus.NewConsumer(conn.JetStream(), bus.ConsumerRunConfig{Durable: "nobody"},
		func(context.Context, bus.Delivery) error { return nil }, testenv.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Run(ctx); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("run err %v, want consumer not found", err)
	}
	if err := c.Run(ctx); !errors.Is(err, bus.ErrAlreadyRunning) {
		t.Fatalf("second run err %v", err)
	}
}

func TestConsumerRunConfigValidate(t *testing.T) {
	h := func(context.Context, bus.Delivery) error { return nil }
	for name, cfg := range map[string]bus.ConsumerRunConfig{
		"no durable":        {},
		"bad durable":       {Durable: "a b"},
		"negative workers":  {Durable: "d", Concurrency: -1},
		"negative batch":    {Durable: "d", FetchBatch: -1},
		"negative delay":    {Durable: "d", NakDelays: []time.Duration{-time.Second}},
		"negative shutdown": {Durable: "d", ShutdownTimeout: -time.Second},
		"negative held":     {Durable: "d", Held: -1},
	} {
		if _, err := bus.NewConsumer(nil, cfg, h, nil, nil); !errors.Is(err, bus.ErrInvalidConfig) {
			t.Errorf("%s: err %v", name, err)
		}
		if err := cfg.Validate(); !errors.Is(err, bus.ErrInvalidConfig) {
			t.Errorf("%s: validate err %v", name, err)
		}
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("bad")
	if bus.Permanent(nil) != nil {
		t.Fatal("Permanent(nil) != nil")
	}
	err := fmt.Errorf("wrapped: %w", bus.Permanent(base))
	if !bus.IsPermanent(err) || !errors.Is(err, base) || err.Error() != "wrapped: bad" {
		t.Fatalf("permanent error %v", err)
	}
	if bus.IsPermanent(base) {
		t.Fatal("plain error is permanent")
	}
}

func TestMetricsNilSafe(t *testing.T) {
	var m *bus.Metrics
	conn := testenv.NewJetStream(t)
	if _, err := bus.NewConsumer(conn.JetStream(), bus.ConsumerRunConfig{Durable: "x"},
		func(context.Context, bus.Delivery) error { return nil }, nil, m); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	a, b := newTestMetrics(t, reg), newTestMetrics(t, reg) // shared registry is fine
	if a == nil || b == nil {
		t.Fatal("nil metrics")
	}
	if newTestMetrics(t, nil) == nil {
		t.Fatal("nil metrics without registry")
	}
}
