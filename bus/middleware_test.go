package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// fakeMsg is a jetstream.Msg that records how it was settled.
type fakeMsg struct {
	meta jetstream.MsgMetadata

	mu         sync.Mutex
	acks, naks int
	nakDelays  []time.Duration
	inProgress int
	terms      int
}

var _ jetstream.Msg = (*fakeMsg)(nil)

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) { return &m.meta, nil }
func (m *fakeMsg) Data() []byte                              { return nil }
func (m *fakeMsg) Headers() nats.Header                      { return nats.Header{} }
func (m *fakeMsg) Subject() string                           { return "room.events.app1.r1.seat_changed" }
func (m *fakeMsg) Reply() string                             { return "" }
func (m *fakeMsg) Ack() error                                { return m.count(&m.acks) }
func (m *fakeMsg) DoubleAck(context.Context) error           { return m.count(&m.acks) }
func (m *fakeMsg) Nak() error                                { return m.NakWithDelay(0) }
func (m *fakeMsg) InProgress() error                         { return m.count(&m.inProgress) }
func (m *fakeMsg) Term() error                               { return m.count(&m.terms) }
func (m *fakeMsg) TermWithReason(string) error               { return m.count(&m.terms) }

func (m *fakeMsg) NakWithDelay(d time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.naks++
	m.nakDelays = append(m.nakDelays, d)
	return nil
}

func (m *fakeMsg) count(n *int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	*n++
	return nil
}

func (m *fakeMsg) inProgressCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inProgress
}

// newTestJob is a job of stream sequence seq on its delivery nd.
func newTestJob(seq, nd uint64) *job {
	m := &fakeMsg{meta: jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: seq}, NumDelivered: nd}}
	return &job{msg: m, meta: &m.meta, subject: m.Subject()}
}

// result is one settled delivery.
type result struct {
	seq uint64
	err error
}

func (r result) String() string { return fmt.Sprintf("%d:%v", r.seq, r.err) }

// newTestTurn is a turn of n jobs whose settled results go to the
// returned func's answer, in settle order.
func newTestTurn(n int) (*turn, func() []result) {
	var (
		mu  sync.Mutex
		got []result
	)
	jobs := make([]*job, n)
	ds := make([]Delivery, n)
	for i := range jobs {
		jobs[i] = newTestJob(uint64(i+1), 1)
		ds[i] = Delivery{StreamSeq: uint64(i + 1), NumDelivered: 1}
	}
	t := newTurn(jobs, ds, func(j *job, err error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, result{j.meta.Sequence.Stream, err})
	})
	return t, func() []result {
		mu.Lock()
		defer mu.Unlock()
		return append([]result(nil), got...)
	}
}

func TestTurnSettlesEachDeliveryOnce(t *testing.T) {
	tr, results := newTestTurn(2)
	done := 0
	tr.whenDone(func() { done++ })
	errA := errors.New("a")
	tr.settle(1, errA)
	tr.settle(1, nil) // a second result for a delivery is ignored
	if got := tr.unsettled(); len(got) != 1 || got[0] != tr.jobs[0] {
		t.Fatalf("unsettled %v", got)
	}
	if done != 0 {
		t.Fatal("done before every delivery was settled")
	}
	tr.settleRest(nil)
	if got := fmt.Sprint(results()); got != "[2:a 1:<nil>]" {
		t.Fatalf("results %s", got)
	}
	if done != 1 || len(tr.unsettled()) != 0 {
		t.Fatalf("done hooks ran %d times, %d unsettled", done, len(tr.unsettled()))
	}
	late := false
	tr.whenDone(func() { late = true })
	if !late {
		t.Fatal("a hook added after the turn ended did not run")
	}
}

func TestRecovererSettlesWhatThePanicLeft(t *testing.T) {
	tr, results := newTestTurn(3)
	h := recoverer(slog.New(slog.DiscardHandler))(func(_ context.Context, t *turn) {
		t.settle(0, nil)
		panic("boom")
	})
	h(context.Background(), tr) // must not panic
	got := results()
	if len(got) != 3 || got[0].err != nil {
		t.Fatalf("results %v", got)
	}
	for _, r := range got[1:] {
		if r.err == nil || r.err.Error() != "handler panic: boom" || IsPermanent(r.err) {
			t.Fatalf("delivery %d: %v, want a retryable panic error", r.seq, r.err)
		}
	}

	calm, calmResults := newTestTurn(1)
	recoverer(slog.New(slog.DiscardHandler))(func(_ context.Context, t *turn) {})(context.Background(), calm)
	if got := calmResults(); len(got) != 0 {
		t.Fatalf("recoverer settled %v without a panic", got)
	}
}

func TestInProgressWhileUnsettled(t *testing.T) {
	const period = 5 * time.Millisecond
	tr, _ := newTestTurn(2)
	held := make(chan struct{})
	b := newBeats(slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	var beating sync.WaitGroup
	beating.Go(func() { b.run(ctx, period/2) })
	defer func() { cancel(); beating.Wait() }()
	h := inProgress(func(*turn) time.Duration { return period }, b)(func(_ context.Context, t *turn) {
		t.settle(0, nil) // at once
		close(held)      // 1 stays with the handler (an async one)
	})
	h(context.Background(), tr)
	<-held
	first, second := tr.jobs[0].msg.(*fakeMsg), tr.jobs[1].msg.(*fakeMsg)
	deadline := time.Now().Add(10 * time.Second)
	for second.inProgressCount() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d in-progress signals in 10s", second.inProgressCount())
		}
		time.Sleep(period)
	}
	if n := first.inProgressCount(); n != 0 {
		t.Fatalf("a settled message was reported in progress %d times", n)
	}
	tr.settle(1, nil)
	n := second.inProgressCount()
	// Only time shows that nothing more comes: wait several periods.
	time.Sleep(10 * period)
	if got := second.inProgressCount(); got != n {
		t.Fatalf("in progress sent %d times after the turn ended", got-n)
	}
	b.mu.Lock()
	open := len(b.turns)
	b.mu.Unlock()
	if open != 0 {
		t.Fatalf("%d turns still held after they ended", open)
	}

	never, _ := newTestTurn(1)
	inProgress(func(*turn) time.Duration { return 0 }, b)(func(context.Context, *turn) {})(context.Background(), never)
	time.Sleep(10 * period) // as above: an absence
	if n := never.jobs[0].msg.(*fakeMsg).inProgressCount(); n != 0 {
		t.Fatalf("period 0 sent %d signals", n)
	}
}

func TestPoisonQueue(t *testing.T) {
	errBad := errors.New("bad")
	sort := func(_ *job, err error) failure {
		if errors.Is(err, errBad) {
			return failure{permanent: true, reason: "why: " + err.Error()}
		}
		return failure{retryIn: time.Second}
	}
	var letters []string
	var passed []error
	settle := poisonQueue(sort, func(_ *job, reason string) { letters = append(letters, reason) })(func(_ *job, err error) {
		passed = append(passed, err)
	})
	j := newTestJob(1, 1)
	settle(j, fmt.Errorf("wrapped: %w", errBad))
	settle(j, errRetryable)
	settle(j, nil)
	if fmt.Sprint(letters) != "[why: wrapped: bad]" || fmt.Sprint(passed) != "[retry me <nil>]" {
		t.Fatalf("dead letters %q, passed on %v", letters, passed)
	}
}

var errRetryable = errors.New("retry me")

func TestRetry(t *testing.T) {
	sort := func(j *job, _ error) failure {
		return failure{retryIn: time.Duration(j.meta.NumDelivered) * time.Second}
	}
	type nak struct {
		delay time.Duration
		cause error
	}
	var naks []nak
	passed := 0
	settle := retry(sort, func(_ *job, d time.Duration, cause error) { naks = append(naks, nak{d, cause}) })(func(_ *job, err error) {
		if err != nil {
			t.Errorf("retry passed on %v", err)
		}
		passed++
	})
	settle(newTestJob(1, 3), errRetryable)
	settle(newTestJob(2, 1), nil)
	if len(naks) != 1 || naks[0].delay != 3*time.Second || naks[0].cause != errRetryable || passed != 1 {
		t.Fatalf("naks %v, passed %d", naks, passed)
	}
}

// TestSortFailure is the table of the one function that sorts failures.
func TestSortFailure(t *testing.T) {
	errBad := errors.New("400")
	running := context.Background()
	ended, end := context.WithCancel(context.Background())
	end()
	tests := []struct {
		name         string
		runCtx, hctx context.Context
		delivery     uint64
		err          error
		permanent    bool
		reason       string
		retryIn      time.Duration
	}{
		{"retryable", running, running, 1, errRetryable, false, "", time.Second},
		{"retryable, later delivery", running, running, 2, errRetryable, false, "", 5 * time.Second},
		{"classified permanent", running, running, 1, fmt.Errorf("send: %w", errBad), true, "send: 400", 0},
		{"retryable on the last delivery", running, running, 3, errRetryable, true, "retryable error at delivery 3 of 3: retry me", 0},
		{"undecodable, whatever Classify says", running, running, 1, &undecodableError{ErrInvalidEnvelope}, true, "invalid envelope", 0},
		{"retryable at shutdown: after the shutdown delay", ended, running, 3, errRetryable, false, "", shutdownNakDelay},
		{"permanent at shutdown: still permanent", ended, running, 1, errBad, true, "400", 0},
		{"handlers cancelled: after the shutdown delay, even permanent", ended, ended, 1, errBad, false, "", shutdownNakDelay},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Consumer{
				cfg:        ConsumerRunConfig{Classify: func(err error) bool { return errors.Is(err, errBad) }},
				maxDeliver: 3,
				nakDelays:  []time.Duration{time.Second, 5 * time.Second},
				runCtx:     tt.runCtx,
				hctx:       tt.hctx,
			}
			f := c.sortFailure(newTestJob(1, tt.delivery), tt.err)
			if f.permanent != tt.permanent || f.reason != tt.reason || f.retryIn != tt.retryIn {
				t.Fatalf("%+v, want permanent %v %q, retry in %s", f, tt.permanent, tt.reason, tt.retryIn)
			}
		})
	}
}

func TestGather(t *testing.T) {
	q := make(chan *job, 10)
	for i := range 5 {
		q <- newTestJob(uint64(i+1), 1)
	}
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	seqs := func(jobs []*job) string {
		var s []string
		for _, j := range jobs {
			s = append(s, fmt.Sprint(j.meta.Sequence.Stream))
		}
		return strings.Join(s, ",")
	}
	if got := seqs(gather(q, 1, wait)); got != "1" {
		t.Fatalf("turn of one: %s", got)
	}
	if got := seqs(gather(q, 3, wait)); got != "2,3,4" {
		t.Fatalf("batch of at most 3: %s", got)
	}
	close(q)
	if got := seqs(gather(q, 3, wait)); got != "5" {
		t.Fatalf("what the closed queue held: %s", got)
	}
	if got := gather(q, 3, wait); got != nil {
		t.Fatalf("after the end: %v", got)
	}
}

func TestBatchedAdapter(t *testing.T) {
	tr, results := newTestTurn(2)
	batched(func(context.Context, []Delivery) []error { return []error{nil} })(context.Background(), tr)
	for _, r := range results() {
		if r.err == nil || !strings.Contains(r.err.Error(), "1 results for 2 deliveries") {
			t.Fatalf("short result: %v", results())
		}
	}
	tr, results = newTestTurn(2)
	batched(func(context.Context, []Delivery) []error { return nil })(context.Background(), tr)
	if got := fmt.Sprint(results()); got != "[1:<nil> 2:<nil>]" {
		t.Fatalf("nil slice: %s", got)
	}
}

func TestAsyncAdapterTakesOneDone(t *testing.T) {
	tr, results := newTestTurn(1)
	var done func(error)
	async(func(_ context.Context, _ Delivery, d func(error)) { done = d })(context.Background(), tr)
	if len(results()) != 0 {
		t.Fatal("settled before done")
	}
	done(errRetryable)
	done(nil) // ignored
	if got := fmt.Sprint(results()); got != "[1:retry me]" {
		t.Fatalf("results %s", got)
	}
}

// BenchmarkInProgressTurn is the heartbeat's cost for a turn its handler
// settles at once, as most are: held and let go.
func BenchmarkInProgressTurn(b *testing.B) {
	beats := newBeats(slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	var beating sync.WaitGroup
	beating.Go(func() { beats.run(ctx, time.Second) })
	defer func() { cancel(); beating.Wait() }()
	h := inProgress(func(*turn) time.Duration { return 10 * time.Second }, beats)(func(_ context.Context, t *turn) { t.settle(0, nil) })
	jobs := []*job{newTestJob(1, 1)}
	ds := []Delivery{{StreamSeq: 1, NumDelivered: 1}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h(ctx, newTurn(jobs, ds, func(*job, error) {}))
		}
	})
}
