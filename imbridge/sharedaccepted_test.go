package imbridge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"voiceroom/internal/testenv"
)

// TestSharedAcceptedWrites: what one process records reaches the bucket
// by the time its writer stops, and a process that opens the bucket
// afterwards finds those events and no others.
func TestSharedAcceptedWrites(t *testing.T) {
	js := testenv.NewJetStream(t).JetStream()
	ctx := context.Background()
	a, err := openSharedAccepted(ctx, js, time.Hour, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.run(actx, 5*time.Second) }()
	var ids []string
	for i := range 500 {
		ids = append(ids, fmt.Sprintf("evt-%d", i))
	}
	a.record(1400000001, ids[:250])
	a.record(1400000001, ids[250:])
	stop()
	<-done

	b, err := openSharedAccepted(ctx, js, time.Hour, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !b.has(ctx, 1400000001, id) {
			t.Fatalf("event %s recorded before the stop is not in the bucket", id)
		}
	}
	if b.has(ctx, 1400000001, "evt-never") {
		t.Fatal("an event never recorded is in the bucket")
	}
	if b.has(ctx, 1400000002, ids[0]) {
		t.Fatal("an event recorded under one SDKAppID is found under another")
	}
}

// BenchmarkSharedAcceptedWrite: the cost of recording one accepted event
// in the bucket, as the bridge writes it (a plain publish on the key's
// subject) next to a key-value put that waits for its ack (how it was
// written before), on one embedded JetStream.
func BenchmarkSharedAcceptedWrite(b *testing.B) {
	js := testenv.NewJetStream(b).JetStream()
	ctx := context.Background()
	s, err := openSharedAccepted(ctx, js, time.Hour, testenv.Logger(b))
	if err != nil {
		b.Fatal(err)
	}
	values := func() uint64 {
		st, err := s.kv.Status(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return st.Values()
	}
	b.Run("publish", func(b *testing.B) {
		b.ReportAllocs()
		run, before := time.Now().UnixNano(), values() // new keys each run
		cpu := testenv.ProcessCPU(b)
		for i := 0; b.Loop(); i++ {
			if err := s.nc.Publish(sharedPutSubject(sharedKey(1, fmt.Sprintf("p-%d-%d", run, i))), sharedValue); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.nc.FlushTimeout(10 * time.Second); err != nil {
			b.Fatal(err)
		}
		// Until the bucket's stream has stored them all: that work is
		// the server's share of the writes.
		deadline := time.Now().Add(30 * time.Second)
		for n := values(); n < before+uint64(b.N); n = values() {
			if time.Now().After(deadline) {
				b.Fatalf("the bucket stored %d of %d writes", n-before, b.N)
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportMetric(float64((testenv.ProcessCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
	b.Run("kv.Put", func(b *testing.B) {
		b.ReportAllocs()
		run := time.Now().UnixNano()
		cpu := testenv.ProcessCPU(b)
		for i := 0; b.Loop(); i++ {
			if _, err := s.kv.Put(ctx, sharedKey(1, fmt.Sprintf("k-%d-%d", run, i)), sharedValue); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((testenv.ProcessCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}
