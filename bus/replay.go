package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/apperr"
)

// HeaderReplayOf marks a replayed copy in ROOM_EVENTS: the sequence, in
// ROOM_EVENTS_DLQ, of the dead letter it replays. The consumer removes
// that letter once the copy is handled, or once the copy has its own
// dead letter.
const HeaderReplayOf = "Voiceroom-Replay-Of"

// DLQConfig configures a DLQ. Zero fields take their defaults (see
// WithDefaults).
type DLQConfig struct {
	// Sinks are the durables whose dead letters may be listed and
	// replayed; any other name is ErrUnknownSink. Default imbridge,
	// listprojector, roomranks and webhooks.
	Sinks []string
	// DefaultLimit is the page size of List when the caller gives none.
	// Default 50.
	DefaultLimit int
	// MaxLimit is the largest page List returns. Default 200.
	MaxLimit int
	// MaxReplay is the most letters one Replay of all a sink's letters
	// re-delivers; the result says when more are left. Default 10,000.
	MaxReplay int
	// MaxReplaySeqs is the most sequences one Replay may name. Default
	// 1,000.
	MaxReplaySeqs int
	// ReplayInFlight bounds replayed copies sent and not yet acknowledged
	// by the stream. Default 1,024.
	ReplayInFlight int
}

// WithDefaults returns c with zero fields set to their defaults.
func (c DLQConfig) WithDefaults() DLQConfig {
	if len(c.Sinks) == 0 {
		c.Sinks = []string{DurableIMBridge, DurableListProjector, DurableRoomRanks, DurableWebhooks, DurableActivity}
	}
	if c.DefaultLimit == 0 {
		c.DefaultLimit = 50
	}
	if c.MaxLimit == 0 {
		c.MaxLimit = 200
	}
	if c.MaxReplay == 0 {
		c.MaxReplay = 10_000
	}
	if c.MaxReplaySeqs == 0 {
		c.MaxReplaySeqs = 1_000
	}
	if c.ReplayInFlight == 0 {
		c.ReplayInFlight = 1_024
	}
	return c
}

// MaxMaxReplay bounds DLQConfig.MaxReplay.
const MaxMaxReplay = 100_000

// Validate checks c after defaults are applied; it never changes c.
// Errors are *apperr.ConfigError naming the field and wrap
// ErrInvalidConfig.
func (c DLQConfig) Validate() error {
	c = c.WithDefaults()
	for _, s := range c.Sinks {
		if err := checkToken("sink", s); err != nil {
			return apperr.BadConfig("Sinks", "%w: dlq: %w", ErrInvalidConfig, err)
		}
	}
	switch {
	case c.DefaultLimit < 1:
		return apperr.BadConfig("DefaultLimit", "%w: dlq: default limit %d: must be at least 1", ErrInvalidConfig, c.DefaultLimit)
	case c.MaxLimit < c.DefaultLimit:
		return apperr.BadConfig("MaxLimit", "%w: dlq: max limit %d: must be at least the default limit %d", ErrInvalidConfig, c.MaxLimit, c.DefaultLimit)
	case c.MaxReplay < 1 || c.MaxReplay > MaxMaxReplay:
		return apperr.BadConfig("MaxReplay", "%w: dlq: max replay %d: want 1..%d", ErrInvalidConfig, c.MaxReplay, MaxMaxReplay)
	case c.MaxReplaySeqs < 1:
		return apperr.BadConfig("MaxReplaySeqs", "%w: dlq: max replay seqs %d: must be at least 1", ErrInvalidConfig, c.MaxReplaySeqs)
	case c.ReplayInFlight < 1:
		return apperr.BadConfig("ReplayInFlight", "%w: dlq: replay in flight %d: must be at least 1", ErrInvalidConfig, c.ReplayInFlight)
	}
	return nil
}

// DLQ lists and replays the dead letters of ROOM_EVENTS_DLQ, one sink and
// one app at a time. It reads only the subjects of that sink and app
// (dlq.<sink>.room.events.<app_code>.>), never the whole stream.
type DLQ struct {
	js      jetstream.JetStream
	cfg     DLQConfig
	log     *slog.Logger
	metrics *DLQMetrics
}

// NewDLQ returns a DLQ over js. log may be nil (discard), m may be nil
// (no metrics).
func NewDLQ(js jetstream.JetStream, cfg DLQConfig, log *slog.Logger, m *DLQMetrics) (*DLQ, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: dlq: nil jetstream", ErrInvalidConfig)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &DLQ{js: js, cfg: cfg, log: log.With("component", "dlq"), metrics: m}, nil
}

// Sinks returns the sinks the DLQ serves.
func (q *DLQ) Sinks() []string { return slices.Clone(q.cfg.Sinks) }

// LetterPage is one page of a sink's dead letters.
type LetterPage struct {
	// Letters are oldest first.
	Letters []DeadLetter
	// Next is the sequence to pass as after for the next page; 0 when
	// there is none.
	Next uint64
}

func (q *DLQ) checkSink(sink, appCode string) error {
	if !slices.Contains(q.cfg.Sinks, sink) {
		return fmt.Errorf("%w: %s", ErrUnknownSink, quoteShort(sink))
	}
	if err := checkToken("app_code", appCode); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidQuery, err)
	}
	return nil
}

// List returns up to limit dead letters of sink in app appCode with a
// sequence above after, oldest first. limit 0 means DefaultLimit; a larger
// one than MaxLimit is cut to it. Errors: ErrUnknownSink, ErrInvalidQuery
// (negative limit, bad app code), or the server's.
func (q *DLQ) List(ctx context.Context, sink, appCode string, after uint64, limit int) (LetterPage, error) {
	if err := q.checkSink(sink, appCode); err != nil {
		return LetterPage{}, err
	}
	switch {
	case limit < 0:
		return LetterPage{}, fmt.Errorf("%w: limit %d: must not be negative", ErrInvalidQuery, limit)
	case limit == 0:
		limit = q.cfg.DefaultLimit
	case limit > q.cfg.MaxLimit:
		limit = q.cfg.MaxLimit
	}
	var page LetterPage
	more, err := q.scan(ctx, dlqSinkFilter(sink, appCode), after, limit, func(l DeadLetter) error {
		page.Letters = append(page.Letters, l)
		return nil
	})
	if err != nil {
		return LetterPage{}, err
	}
	if more && len(page.Letters) > 0 {
		page.Next = page.Letters[len(page.Letters)-1].Sequence
	}
	return page, nil
}

// Depth returns how many dead letters sink has, all apps together.
func (q *DLQ) Depth(ctx context.Context, sink string) (uint64, error) {
	stream, err := q.js.Stream(ctx, DLQStreamName)
	if err != nil {
		return 0, fmt.Errorf("dlq depth of %s: %w", sink, err)
	}
	cons, err := q.reader(ctx, stream, dlqSinkFilter(sink, ""), 0)
	if err != nil {
		return 0, fmt.Errorf("dlq depth of %s: %w", sink, err)
	}
	defer q.dropReader(stream, cons)
	return cons.CachedInfo().NumPending, nil
}

// Backlog is the state of a sink's durable consumer on ROOM_EVENTS, all
// apps together (the durable is shared).
type Backlog struct {
	// Pending are the messages not delivered to the sink yet.
	Pending uint64
	// AckPending are the messages delivered and not acknowledged yet.
	AckPending uint64
}

// Backlog returns the state of durable's consumer. Errors: the server's
// (jetstream.ErrConsumerNotFound when the durable does not exist).
func (q *DLQ) Backlog(ctx context.Context, durable string) (Backlog, error) {
	cons, err := q.js.Consumer(ctx, StreamName, durable)
	if err != nil {
		return Backlog{}, fmt.Errorf("consumer %s: %w", durable, err)
	}
	info := cons.CachedInfo()
	return Backlog{Pending: info.NumPending, AckPending: uint64(info.NumAckPending)}, nil
}

// reader creates an ephemeral consumer over ROOM_EVENTS_DLQ that reads
// filter from sequence after+1 without acks. The server removes it after
// a minute of disuse if dropReader cannot.
func (q *DLQ) reader(ctx context.Context, stream jetstream.Stream, filter string, after uint64) (jetstream.Consumer, error) {
	return stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Description:       "voiceroom dlq reader",
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       after + 1,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
		Replicas:          1,
	})
}

func (q *DLQ) dropReader(stream jetstream.Stream, cons jetstream.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), dlqPublishTimeout)
	defer cancel()
	if err := stream.DeleteConsumer(ctx, cons.CachedInfo().Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		q.log.Debug("drop dlq reader", "error", err)
	}
}

// scanBatch is the most letters one pull of a scan asks for.
const scanBatch = 256

// scan calls fn for up to max letters on filter after sequence after,
// oldest first, and reports whether more are left.
func (q *DLQ) scan(ctx context.Context, filter string, after uint64, max int, fn func(DeadLetter) error) (more bool, err error) {
	stream, err := q.js.Stream(ctx, DLQStreamName)
	if err != nil {
		return false, fmt.Errorf("read dead letters: stream %s: %w", DLQStreamName, err)
	}
	cons, err := q.reader(ctx, stream, filter, after)
	if err != nil {
		return false, fmt.Errorf("read dead letters on %s: %w", filter, err)
	}
	defer q.dropReader(stream, cons)
	pending := cons.CachedInfo().NumPending
	got := 0
	for pending > 0 && got < max {
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("read dead letters on %s: %w", filter, err)
		}
		n := min(uint64(max-got), pending, scanBatch)
		// No wait: the letters are stored, so the server answers at once;
		// letters deleted since the count (handled replays) just come
		// short instead of holding the pull open.
		batch, err := cons.FetchNoWait(int(n))
		if err != nil {
			return false, fmt.Errorf("read dead letters on %s: %w", filter, err)
		}
		fetched := 0
		for msg := range batch.Messages() {
			fetched++
			meta, err := msg.Metadata()
			if err != nil {
				return false, fmt.Errorf("read dead letters on %s: %w", filter, err)
			}
			pending = meta.NumPending
			got++
			if err := fn(deadLetterOf(meta.Sequence.Stream, msg.Subject(), meta.Timestamp, msg.Headers(), msg.Data())); err != nil {
				return false, err
			}
		}
		if err := batch.Error(); err != nil {
			return false, fmt.Errorf("read dead letters on %s: %w", filter, err)
		}
		if fetched == 0 {
			break // letters deleted under us: what is left is read next time
		}
	}
	return pending > 0, nil
}

// ReplayResult is what a Replay did.
type ReplayResult struct {
	// Replayed counts letters whose copy the stream stored.
	Replayed int
	// Skipped counts named sequences that are not a letter of this sink
	// and app (or no longer exist), and letters replayed moments ago whose
	// copy the stream dropped as a duplicate.
	Skipped int
	// More reports that MaxReplay letters were replayed and more are left.
	More bool
}

// Replay re-delivers dead letters of sink in app appCode to that sink
// alone: each becomes a copy in ROOM_EVENTS on
// room.replay.<sink>.<app_code>.<room_id>.<event_type> that only sink's
// durable reads, with the original data (event_id included) and headers.
// With no seqs it replays the app's letters of sink, oldest first, up to
// MaxReplay; otherwise the named ones that belong to sink and app.
//
// A copy's Nats-Msg-Id is replay:<sink>:<letter seq>, so replaying the
// same letter again within the duplicate window stores nothing. Errors:
// ErrUnknownSink, ErrInvalidQuery (too many seqs), or the server's; after
// an error some letters may have been replayed, and calling again is safe.
func (q *DLQ) Replay(ctx context.Context, sink, appCode string, seqs []uint64) (ReplayResult, error) {
	if err := q.checkSink(sink, appCode); err != nil {
		return ReplayResult{}, err
	}
	if len(seqs) > q.cfg.MaxReplaySeqs {
		return ReplayResult{}, fmt.Errorf("%w: %d seqs: at most %d per replay", ErrInvalidQuery, len(seqs), q.cfg.MaxReplaySeqs)
	}
	pub := q.newReplayer(ctx, sink)
	var res ReplayResult
	var err error
	if len(seqs) == 0 {
		res.More, err = q.scan(ctx, dlqSinkFilter(sink, appCode), 0, q.cfg.MaxReplay, pub.send)
	} else {
		err = q.replaySeqs(ctx, sink, appCode, seqs, pub, &res)
	}
	replayed, skipped, perr := pub.wait()
	q.metrics.replay(sink, replayed)
	res.Replayed = replayed
	res.Skipped += skipped
	if err == nil {
		err = perr
	}
	if err != nil {
		return res, fmt.Errorf("replay dead letters of %s: %w", sink, err)
	}
	q.log.Info("dead letters replayed", "sink", sink, "app_code", appCode, "replayed", res.Replayed, "skipped", res.Skipped, "more", res.More)
	return res, nil
}

// replaySeqs replays the named letters that belong to sink and appCode.
func (q *DLQ) replaySeqs(ctx context.Context, sink, appCode string, seqs []uint64, pub *replayer, res *ReplayResult) error {
	stream, err := q.js.Stream(ctx, DLQStreamName)
	if err != nil {
		return fmt.Errorf("stream %s: %w", DLQStreamName, err)
	}
	prefix := strings.TrimSuffix(dlqSinkFilter(sink, appCode), ">")
	seqs = slices.Clone(seqs)
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	for _, seq := range seqs {
		if seq == 0 {
			res.Skipped++
			continue
		}
		raw, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			res.Skipped++
			continue
		}
		if err != nil {
			return fmt.Errorf("get dead letter %d: %w", seq, err)
		}
		if !strings.HasPrefix(raw.Subject, prefix) {
			res.Skipped++ // another sink's or another app's: not a letter of this query
			continue
		}
		if err := pub.send(deadLetterFrom(raw)); err != nil {
			return err
		}
	}
	return nil
}

// replayer publishes replayed copies asynchronously with a bound on those
// in flight, and counts their acks.
type replayer struct {
	ctx      context.Context
	js       jetstream.JetStream
	sink     string
	inflight chan struct{}
	acks     chan jetstream.PubAckFuture
	done     chan struct{}
	skipped  int // by the sender
	// Set by the collector, read after done is closed.
	replayed, duplicates int
	err                  error
}

func (q *DLQ) newReplayer(ctx context.Context, sink string) *replayer {
	r := &replayer{
		ctx:      ctx,
		js:       q.js,
		sink:     sink,
		inflight: make(chan struct{}, q.cfg.ReplayInFlight),
		acks:     make(chan jetstream.PubAckFuture, q.cfg.ReplayInFlight),
		done:     make(chan struct{}),
	}
	go r.collect()
	return r
}

// collect waits for each copy's ack in send order.
func (r *replayer) collect() {
	defer close(r.done)
	for paf := range r.acks {
		select {
		case ack := <-paf.Ok():
			if ack.Duplicate {
				r.duplicates++
			} else {
				r.replayed++
			}
		case err := <-paf.Err():
			if r.err == nil {
				r.err = fmt.Errorf("replay %s: %w", paf.Msg().Header.Get(jetstream.MsgIDHeader), err)
			}
		case <-r.ctx.Done():
			if r.err == nil {
				r.err = r.ctx.Err()
			}
		}
		<-r.inflight
	}
}

// send publishes the replayed copy of l.
func (r *replayer) send(l DeadLetter) error {
	msg, err := replayMsg(r.sink, l)
	if err != nil {
		r.skipped++ // not a room event's letter (written by hand): nothing to replay
		return nil
	}
	select {
	case r.inflight <- struct{}{}:
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	paf, err := r.js.PublishMsgAsync(msg)
	if err != nil {
		<-r.inflight
		return fmt.Errorf("replay dead letter %d: %w", l.Sequence, err)
	}
	r.acks <- paf
	return nil
}

// wait returns once every sent copy is acknowledged or ctx ended.
func (r *replayer) wait() (replayed, skipped int, err error) {
	close(r.acks)
	<-r.done
	return r.replayed, r.skipped + r.duplicates, r.err
}

// replayMsg builds the copy of letter l that re-delivers it to sink.
func replayMsg(sink string, l DeadLetter) (*nats.Msg, error) {
	original := l.OriginalSubject
	if original == "" {
		original = strings.TrimPrefix(l.Subject, dlqPrefix+"."+sink+".")
	}
	subject, err := replaySubject(sink, original)
	if err != nil {
		return nil, err
	}
	h := nats.Header{}
	for k, v := range l.Header {
		if strings.HasPrefix(k, "Nats-") || strings.HasPrefix(k, "Voiceroom-Dlq-") || k == HeaderReplayOf {
			continue
		}
		h[k] = v
	}
	seq := strconv.FormatUint(l.Sequence, 10)
	h.Set(jetstream.MsgIDHeader, "replay:"+sink+":"+seq)
	h.Set(HeaderReplayOf, seq)
	return &nats.Msg{Subject: subject, Header: h, Data: l.Data}, nil
}

// Event returns what a letter says about its event: app, room and type
// from the original subject, and the event_id from the data when it
// decodes (empty otherwise).
func (l DeadLetter) Event() (appCode, roomID, eventType, eventID string) {
	appCode, roomID, eventType, _ = splitSubject(l.OriginalSubject)
	var probe struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(l.Data, &probe) == nil {
		eventID = probe.EventID
	}
	return appCode, roomID, eventType, eventID
}

func deadLetterOf(seq uint64, subject string, at time.Time, h nats.Header, data []byte) DeadLetter {
	deliveries, _ := strconv.ParseUint(h.Get(HeaderDLQDeliveries), 10, 64)
	streamSeq, _ := strconv.ParseUint(h.Get(HeaderDLQStreamSeq), 10, 64)
	return DeadLetter{
		Sequence:          seq,
		Subject:           subject,
		Time:              at,
		Consumer:          h.Get(HeaderDLQConsumer),
		Reason:            h.Get(HeaderDLQReason),
		Deliveries:        deliveries,
		OriginalSubject:   h.Get(HeaderDLQSubject),
		OriginalStreamSeq: streamSeq,
		Header:            h,
		Data:              data,
	}
}
