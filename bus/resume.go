package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A pull that breaks (the connection to NATS lost and made again, or
// the pull's heartbeats missed) may have lost messages: the server
// counted them delivered, sent them into the dead connection (or to a
// subscription already gone), and offers them again only after the ack
// wait, behind the later events of their rooms fetched meanwhile. Acks
// sent into the dead connection are lost as well, and bring handled
// messages back after the ack wait.
//
// So the consumer keeps a ledger of what it was handed and how it
// settled it, and after a broken pull, before it hands over anything
// newer, it resumes:
//
//  1. It holds back what the broken pull brought after the reconnect
//     (the first message read after the connection's reconnect count
//     changed ends the pull).
//  2. It reads the durable's state: ack floor and last delivered
//     sequence. Every sequence between them that the ledger does not know
//     was handed to this consumer and lost (when one consumer runs on the
//     durable; see below).
//  3. It sends again the acks and terms of the ledger's settled messages
//     above the ack floor (a repeat of an ack that arrived is ignored).
//  4. It reads the lost messages back from the stream by sequence and
//     queues them, and what it held back, in stream order, before the
//     next pull: each room's events reach the handler in order.
//  5. When the durable delivers a copy read back again (after the ack
//     wait), the copy in hand answers for it: the copy's ack, nak or term
//     goes to the redelivery, or, if the copy was settled already, the
//     redelivery is settled the same way without handling it again. A
//     redelivery of a message the ledger saw acked or termed is settled
//     again the same way.
//
// The ledger forgets what lies at or below the durable's ack floor (read
// at each resume, and whenever the ledger has grown by ledgerPruneEvery
// entries) and what lies below the durable's last delivered sequence
// when the consumer started (an earlier instance's). Should the ack
// floor stay behind (a message held for a long time) while the ledger
// grows past ledgerMax, the oldest settled entries go and the ledger's
// floor rises: a message lost below it comes again after the ack wait,
// as it would without the ledger.
//
// Several consumers on one durable share its deliveries, so sequences
// unknown to this consumer may be another's. A broken pull can have lost
// at most the messages it asked for and did not get; when more are
// unknown, the consumer does not read them back (they come again after
// the ack wait) and logs it.
const (
	resumeTimeout    = 10 * time.Second // bound of one resume's calls
	ledgerPruneEvery = 4096             // entries added between two reads of the ack floor
	ledgerMax        = 1 << 18          // entries kept at most above the ack floor
)

// entryState is how a consumer settled a message it was handed.
type entryState uint8

const (
	entryHeld   entryState = iota // handed over (or queued), not settled
	entryAcked                    // acked (a read-back copy: to be acked on redelivery)
	entryTermed                   // terminated after its dead letter was stored
	entryNakked                   // nakked: the next delivery is handled
)

// entry is one stream sequence in the ledger.
type entry struct {
	state entryState
	reply string    // the settled delivery's reply subject, to settle it again
	back  *readBack // the copy read back, until the durable delivers the message again
}

// ledger is what a consumer was handed above the durable's ack floor.
type ledger struct {
	mu     sync.Mutex
	floor  uint64 // sequences at or below it are not kept
	seqs   map[uint64]entry
	pruned int // len(seqs) after the last prune
	peak   int // the most entries seqs held since it was last made
}

// receive records a delivery before it is handed over. It returns true
// when the delivery was settled instead: a redelivery of a message
// already acked or termed (settled again the same way), or of one a copy
// read back answers for.
func (l *ledger) receive(j *job) bool {
	seq := j.meta.Sequence.Stream
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq <= l.floor {
		return false
	}
	e, ok := l.seqs[seq]
	switch {
	case !ok || e.state == entryNakked:
		l.seqs[seq] = entry{state: entryHeld}
		return false
	case e.back != nil && e.state == entryHeld:
		e.back.adopt(j.msg) // settled with the copy
		return true
	case e.state == entryHeld:
		return false // delivered again while held: handed over again, as ever
	case e.state == entryAcked:
		_ = j.msg.Ack()
	case e.state == entryTermed:
		_ = j.msg.TermWithReason("dead-lettered")
	}
	l.seqs[seq] = entry{state: e.state, reply: j.msg.Reply()}
	return true
}

// settle sends op for j (ack, nak or term) and records st. A copy read
// back is settled through the durable's redelivery if it came, else st is
// recorded for it (see receive).
func (l *ledger) settle(j *job, st entryState, op func(jetstream.Msg) error) error {
	if j.meta == nil {
		return op(j.msg)
	}
	seq := j.meta.Sequence.Stream
	if rb, ok := j.msg.(*readBack); ok {
		l.mu.Lock()
		defer l.mu.Unlock()
		e := entry{state: st, back: rb}
		var err error
		if real := rb.adopted(); real != nil {
			err = op(real)
			e = entry{state: st, reply: real.Reply()}
		}
		if err != nil {
			e.state = entryNakked
		}
		if _, ok := l.seqs[seq]; ok {
			l.seqs[seq] = e
		}
		return err
	}
	err := op(j.msg)
	if err != nil {
		st = entryNakked // comes again, to be handled again
	}
	l.mu.Lock()
	if e, ok := l.seqs[seq]; ok && e.back == nil {
		l.seqs[seq] = entry{state: st, reply: j.msg.Reply()}
	}
	l.mu.Unlock()
	return err
}

// needsPrune reports whether the ledger grew enough since the last prune
// to read the ack floor again.
func (l *ledger) needsPrune() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seqs) >= l.pruned+ledgerPruneEvery
}

// prune forgets what lies at or below the ack floor, and the oldest
// settled entries beyond ledgerMax (raising the floor). It returns how
// many settled entries were forgotten early.
func (l *ledger) prune(ackFloor uint64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.floor = max(l.floor, ackFloor)
	l.peak = max(l.peak, len(l.seqs))
	for seq := range l.seqs {
		if seq <= l.floor {
			delete(l.seqs, seq)
		}
	}
	early := 0
	if len(l.seqs) > ledgerMax {
		settled := make([]uint64, 0, len(l.seqs))
		for seq, e := range l.seqs {
			if e.state != entryHeld {
				settled = append(settled, seq)
			}
		}
		slices.Sort(settled)
		for _, seq := range settled[:min(len(settled), len(l.seqs)-ledgerMax/2)] {
			delete(l.seqs, seq)
			l.floor = max(l.floor, seq)
			early++
		}
	}
	if len(l.seqs) < l.peak/4 {
		// A Go map keeps the room of its most entries after deletes: a
		// ledger that once grew large (a backlog, a lagging ack floor)
		// would hold that memory for the process's life.
		seqs := make(map[uint64]entry, len(l.seqs))
		maps.Copy(seqs, l.seqs)
		l.seqs, l.peak = seqs, len(seqs)
	}
	l.pruned = len(l.seqs)
	return early
}

// missing returns the sequences in (floor, delivered] the ledger does
// not know, lowest first, and at most limit+1 of them.
func (l *ledger) missing(delivered uint64, limit int) []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []uint64
	for seq := l.floor + 1; seq <= delivered && len(out) <= limit; seq++ {
		if _, ok := l.seqs[seq]; !ok {
			out = append(out, seq)
		}
	}
	return out
}

// settledAgain calls send for every settled entry with a reply subject.
func (l *ledger) settledAgain(send func(reply string, st entryState)) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.seqs {
		if e.reply != "" && (e.state == entryAcked || e.state == entryTermed) {
			send(e.reply, e.state)
			n++
		}
	}
	return n
}

// hold records copies read back, before they are queued.
func (l *ledger) hold(jobs []*job) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, j := range jobs {
		l.seqs[j.meta.Sequence.Stream] = entry{state: entryHeld, back: j.msg.(*readBack)}
	}
}

// readBack is a message read back from the stream after it was lost on
// its way to the consumer. Until the durable delivers it again it cannot
// be acked, nakked or reported in progress (the server redelivers it
// after the ack wait); then the redelivery is adopted and takes what
// the copy is told.
type readBack struct {
	raw  *jetstream.RawStreamMsg
	meta jetstream.MsgMetadata
	real atomic.Pointer[adoptedMsg]
}

type adoptedMsg struct{ jetstream.Msg }

func newReadBack(raw *jetstream.RawStreamMsg, durable string) *readBack {
	return &readBack{raw: raw, meta: jetstream.MsgMetadata{
		Sequence:     jetstream.SequencePair{Stream: raw.Sequence},
		NumDelivered: 1, // unknown: at least one delivery went astray
		Stream:       StreamName,
		Consumer:     durable,
		Timestamp:    raw.Time,
	}}
}

func (r *readBack) adopt(m jetstream.Msg) { r.real.Store(&adoptedMsg{m}) }

func (r *readBack) adopted() jetstream.Msg {
	if a := r.real.Load(); a != nil {
		return a.Msg
	}
	return nil
}

func (r *readBack) Metadata() (*jetstream.MsgMetadata, error) { m := r.meta; return &m, nil }
func (r *readBack) Data() []byte                              { return r.raw.Data }
func (r *readBack) Headers() nats.Header                      { return r.raw.Header }
func (r *readBack) Subject() string                           { return r.raw.Subject }
func (r *readBack) Reply() string                             { return "" }

func (r *readBack) Ack() error { return r.forward(func(m jetstream.Msg) error { return m.Ack() }) }
func (r *readBack) DoubleAck(ctx context.Context) error {
	return r.forward(func(m jetstream.Msg) error { return m.DoubleAck(ctx) })
}
func (r *readBack) Nak() error { return r.forward(func(m jetstream.Msg) error { return m.Nak() }) }
func (r *readBack) NakWithDelay(d time.Duration) error {
	return r.forward(func(m jetstream.Msg) error { return m.NakWithDelay(d) })
}
func (r *readBack) InProgress() error {
	return r.forward(func(m jetstream.Msg) error { return m.InProgress() })
}
func (r *readBack) Term() error { return r.forward(func(m jetstream.Msg) error { return m.Term() }) }
func (r *readBack) TermWithReason(reason string) error {
	return r.forward(func(m jetstream.Msg) error { return m.TermWithReason(reason) })
}

// forward sends op to the adopted redelivery; before it came there is
// nothing to send to (the ledger keeps the outcome).
func (r *readBack) forward(op func(jetstream.Msg) error) error {
	if m := r.adopted(); m != nil {
		return op(m)
	}
	return nil
}

// resumption is what the fetch loop carries from a broken pull to the
// resume before its next pull.
type resumption struct {
	pending  bool
	reserved int    // slots of messages the broken pulls asked for and did not get
	back     []*job // messages received after the reconnect, not yet queued
}

// reconnects is the connection's reconnect count.
func (c *Consumer) reconnects() uint64 {
	if nc := c.js.Conn(); nc != nil {
		return nc.Stats().Reconnects
	}
	return 0
}

// broke records a broken pull: reserved slots for what it may have lost,
// and the messages it held back.
func (c *Consumer) broke(reserved int, back []*job) {
	c.resume.pending = true
	c.resume.reserved += reserved
	c.resume.back = append(c.resume.back, back...)
}

// resumeAfterBreak settles what broken pulls may have lost (see the
// comment at the top of this file) and queues, in stream order, the
// messages read back and those held back. On an error nothing is queued
// and the fetch loop tries again.
func (c *Consumer) resumeAfterBreak(ctx context.Context, cons jetstream.Consumer, queues []chan *job) error {
	ctx, cancel := context.WithTimeout(ctx, resumeTimeout)
	defer cancel()
	if nc := c.js.Conn(); nc != nil {
		if !nc.IsConnected() {
			// Not while reconnecting: a flush would wait for the whole
			// outage; the fetch loop tries again after its backoff.
			return errors.New("not connected to NATS")
		}
		// The broken pull's subscription is gone before the state is read,
		// so the server sends it nothing more that the state would miss.
		if err := nc.FlushWithContext(ctx); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("consumer info: %w", err)
	}
	if early := c.ledger.prune(info.AckFloor.Stream); early > 0 {
		c.log.Warn("ledger full: forgot settled messages above the ack floor", "forgotten", early, "ack_floor", info.AckFloor.Stream)
	}
	r := &c.resume
	missing := c.ledger.missing(info.Delivered.Stream, r.reserved)
	var backs []*job
	if len(missing) > r.reserved {
		level := slog.LevelWarn
		if r.reserved == 0 {
			level = slog.LevelDebug // the pull got all it asked for: nothing of it was lost
		}
		c.log.Log(ctx, level, "after a broken pull: more messages unsettled than this consumer can have lost (another instance on the durable?); they come again after the ack wait",
			"could_have_lost", r.reserved, "ack_floor", info.AckFloor.Stream, "delivered", info.Delivered.Stream)
		missing = nil
	}
	for _, seq := range missing {
		raw, err := c.stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // gone from the stream (its limits): nothing to hand over
		}
		if err != nil {
			return fmt.Errorf("read back sequence %d: %w", seq, err)
		}
		backs = append(backs, newJob(newReadBack(raw, c.cfg.Durable)))
	}
	again := 0
	if nc := c.js.Conn(); nc != nil {
		again = c.ledger.settledAgain(func(reply string, st entryState) {
			body := "+ACK"
			if st == entryTermed {
				body = "+TERM dead-lettered"
			}
			_ = nc.Publish(reply, []byte(body))
		})
	}
	c.ledger.hold(backs)
	held := r.back
	jobs := append(backs, held...)
	slices.SortStableFunc(jobs, func(a, b *job) int { return cmp.Compare(seqOf(a), seqOf(b)) })
	for _, j := range jobs {
		c.noteQueued(j, 1)
		queues[j.shard(len(queues))] <- j
	}
	for range r.reserved - len(backs) {
		c.free()
	}
	c.metrics.readBackN(len(backs))
	c.log.Info("resumed after a broken pull", "read_back", len(backs), "held_back", len(held), "settled_again", again,
		"ack_floor", info.AckFloor.Stream, "delivered", info.Delivered.Stream)
	c.resume = resumption{}
	return nil
}

// giveUpResume queues what broken pulls held back (shutdown naks it) and
// frees the slots reserved for what they lost.
func (c *Consumer) giveUpResume(queues []chan *job) {
	for _, j := range c.resume.back {
		c.noteQueued(j, 1)
		queues[j.shard(len(queues))] <- j
	}
	for range c.resume.reserved {
		c.free()
	}
	c.resume = resumption{}
}

// pruneLedger reads the ack floor and prunes the ledger when it has grown
// enough since the last time.
func (c *Consumer) pruneLedger(ctx context.Context, cons jetstream.Consumer) {
	if !c.ledger.needsPrune() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, resumeTimeout)
	defer cancel()
	info, err := cons.Info(ctx)
	if err != nil {
		c.log.Debug("consumer info for the ledger", "error", err)
		return
	}
	if early := c.ledger.prune(info.AckFloor.Stream); early > 0 {
		c.log.Warn("ledger full: forgot settled messages above the ack floor", "forgotten", early, "ack_floor", info.AckFloor.Stream)
	}
}

func seqOf(j *job) uint64 {
	if j.meta == nil {
		return 0
	}
	return j.meta.Sequence.Stream
}
