package bus

import (
	"runtime"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// ackMsg is a delivery whose settling costs nothing.
type ackMsg struct {
	jetstream.Msg
	reply string
}

func (m ackMsg) Reply() string { return m.reply }
func (m ackMsg) Ack() error    { return nil }

// BenchmarkLedger is what the ledger adds per message: recorded when
// fetched, recorded again when acked, and pruned behind an ack floor that
// follows 64 messages behind (a prune every ledgerPruneEvery entries, as
// the consume loop does after reading the floor).
func BenchmarkLedger(b *testing.B) {
	l := ledger{seqs: map[uint64]entry{}}
	msg := ackMsg{reply: "$JS.ACK.ROOM_EVENTS.imbridge.1.123456.123456.1700000000000000000.0"}
	jobs := make([]job, 1)
	b.ReportAllocs()
	for i := range b.N {
		seq := uint64(i + 1)
		j := &jobs[0]
		*j = job{msg: msg, meta: &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: seq}}}
		if l.receive(j) {
			b.Fatal("a new delivery settled as a repeat")
		}
		if err := l.settle(j, entryAcked, jetstream.Msg.Ack); err != nil {
			b.Fatal(err)
		}
		if l.needsPrune() {
			l.prune(seq - min(seq, 64))
		}
	}
}

// TestLedgerSettlesRepeats: a redelivery of an acked or termed message is
// settled again and not handed over; a nakked one is handed over; a copy
// read back adopts the redelivery, or settles it as the copy was settled.
func TestLedgerSettlesRepeats(t *testing.T) {
	l := ledger{seqs: map[uint64]entry{}}
	deliver := func(seq uint64) *job {
		return &job{msg: &countingMsg{}, meta: &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: seq}}}
	}
	acked, termed, nakked := deliver(1), deliver(2), deliver(3)
	for _, j := range []*job{acked, termed, nakked} {
		if l.receive(j) {
			t.Fatalf("seq %d: first delivery not handed over", j.meta.Sequence.Stream)
		}
	}
	_ = l.settle(acked, entryAcked, jetstream.Msg.Ack)
	_ = l.settle(termed, entryTermed, func(m jetstream.Msg) error { return m.TermWithReason("x") })
	_ = l.settle(nakked, entryNakked, jetstream.Msg.Nak)
	again := deliver(1)
	if !l.receive(again) || again.msg.(*countingMsg).acks != 1 {
		t.Fatalf("redelivered acked message: want acked again without a hand-over")
	}
	again = deliver(2)
	if !l.receive(again) || again.msg.(*countingMsg).terms != 1 {
		t.Fatalf("redelivered termed message: want termed again without a hand-over")
	}
	if l.receive(deliver(3)) {
		t.Fatalf("redelivered nakked message: want it handed over")
	}

	// Copies read back: 4 is still held when its redelivery comes, 5 was
	// acked before.
	held := &job{msg: &readBack{}, meta: &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: 4}}}
	done := &job{msg: &readBack{}, meta: &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: 5}}}
	l.hold([]*job{held, done})
	_ = l.settle(done, entryAcked, jetstream.Msg.Ack)
	redelivered := deliver(4)
	if !l.receive(redelivered) {
		t.Fatal("redelivery of a copy in hand: want it adopted, not handed over")
	}
	_ = l.settle(held, entryAcked, jetstream.Msg.Ack)
	if redelivered.msg.(*countingMsg).acks != 1 {
		t.Fatal("the copy's ack did not reach the adopted redelivery")
	}
	redelivered = deliver(5)
	if !l.receive(redelivered) || redelivered.msg.(*countingMsg).acks != 1 {
		t.Fatal("redelivery of a copy acked before: want it acked without a hand-over")
	}
}

// countingMsg counts how it was settled.
type countingMsg struct {
	jetstream.Msg
	acks, terms int
}

func (m *countingMsg) Reply() string               { return "reply" }
func (m *countingMsg) Ack() error                  { m.acks++; return nil }
func (m *countingMsg) Nak() error                  { return nil }
func (m *countingMsg) TermWithReason(string) error { m.terms++; return nil }

// TestLedgerGivesBackItsRoom: once a prune leaves a ledger far smaller
// than it grew (a backlog settled, the ack floor caught up), the memory
// of its largest size is given back.
func TestLedgerGivesBackItsRoom(t *testing.T) {
	l := &ledger{seqs: map[uint64]entry{}}
	msg := ackMsg{reply: "$JS.ACK.ROOM_EVENTS.imbridge.1.123456.123456.1700000000000000000.0"}
	const n = 200_000
	for seq := uint64(1); seq <= n; seq++ {
		j := &job{msg: msg, meta: &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: seq}}}
		l.receive(j)
		if err := l.settle(j, entryAcked, jetstream.Msg.Ack); err != nil {
			t.Fatal(err)
		}
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	grown := heap()
	l.prune(n - 10)
	if len(l.seqs) != 10 {
		t.Fatalf("%d entries left, want 10", len(l.seqs))
	}
	pruned := heap()
	runtime.KeepAlive(l)
	// 200,000 entries take several MiB; 10 take nothing to speak of.
	if grown < pruned || grown-pruned < 2<<20 {
		t.Errorf("heap %d B with %d entries, %d B with 10: the map kept its room", grown, n, pruned)
	}
}
