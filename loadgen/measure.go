package loadgen

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom"
	"voiceroom/bus"
	"voiceroom/mysqldb"
	"voiceroom/outboxrelay"
)

// ceilingHTTP runs GET /healthz, the plainest route of the same Fiber stack
// (request id, metrics and recover middleware; no auth), at the run's
// concurrency.
func (b *Bench) ceilingHTTP(ctx context.Context) OpStats {
	rec := newRecorder()
	elapsed := b.concurrently(ctx, b.cfg.Clients, b.cfg.CeilingDuration, func(ctx context.Context, _ int) {
		start := time.Now()
		a := b.http.do(ctx, http.MethodGet, "/healthz", "", nil)
		if ctx.Err() == nil {
			rec.add("hello", time.Since(start), a.code, a.server())
		}
	})
	return rec.stats(elapsed, false)["hello"]
}

// ceilingTwoInsert runs one transaction of two inserts (a command-log row
// and an outbox row of the pipeline's sizes) at the run's concurrency, into
// copies of the two tables that are dropped afterwards.
func (b *Bench) ceilingTwoInsert(ctx context.Context) (OpStats, error) {
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS bench_ceiling_log LIKE room_command_log",
		"CREATE TABLE IF NOT EXISTS bench_ceiling_outbox LIKE room_outbox",
	} {
		if _, err := b.db.ExecContext(ctx, q); err != nil {
			return OpStats{}, fmt.Errorf("ceiling tables: %w", err)
		}
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		b.db.ExecContext(dctx, "DROP TABLE IF EXISTS bench_ceiling_log, bench_ceiling_outbox")
	}()
	command := []byte(`{"kind":"JoinRoom","actor":{"user_id":100001},"now_ms":1800000000000,"args":{}}`)
	result := []byte(strings.Repeat("r", 900))
	envelope := []byte(strings.Repeat("e", 700))
	var version atomic.Int64
	rec := newRecorder()
	elapsed := b.concurrently(ctx, b.cfg.Clients, b.cfg.CeilingDuration, func(ctx context.Context, worker int) {
		v := version.Add(1)
		room := fmt.Sprintf("bench_room_%d", worker)
		start := time.Now()
		err := mysqldb.Update(ctx, b.db, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO bench_ceiling_log (app_code, room_id, room_version, command_id, command_type,
				actor_user_id, request_id, command, result, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				"bench", room, v, uuid.NewString(), "JoinRoom", 1, "", command, result, v); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO bench_ceiling_outbox (app_code, event_id, room_id, room_version, event_type, envelope,
				status, retry_count, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?)`,
				"bench", uuid.NewString(), room, v, "RoomUserJoined", envelope, v)
			return err
		})
		if ctx.Err() != nil {
			return
		}
		code := ""
		if err != nil {
			code = "mysql"
		}
		rec.add("two_insert", time.Since(start), code, err != nil)
	})
	return rec.stats(elapsed, false)["two_insert"], nil
}

// ceilingPublish publishes asynchronously into a stream of its own
// (file-backed like ROOM_EVENTS, deleted afterwards), up to 4,096 acks
// outstanding, and returns acked messages per second.
func (b *Bench) ceilingPublish(ctx context.Context) (float64, error) {
	if b.js == nil {
		return 0, errors.New("no JetStream connection")
	}
	const name = "BENCH_CEILING"
	if _, err := b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"bench.ceiling.>"},
		Storage: jetstream.FileStorage, MaxAge: time.Hour}); err != nil {
		return 0, fmt.Errorf("ceiling stream: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		b.js.DeleteStream(dctx, name)
	}()
	payload := []byte(strings.Repeat("e", 700))
	end := time.Now().Add(b.cfg.CeilingDuration)
	start := time.Now()
	var acked int64
	var futures []jetstream.PubAckFuture
	settle := func(all bool) {
		keep := futures[:0]
		for i, f := range futures {
			if !all && len(futures)-i <= 2048 {
				keep = append(keep, futures[i:]...)
				break
			}
			select {
			case <-f.Ok():
				acked++
			case <-f.Err():
			case <-ctx.Done():
				return
			}
		}
		futures = keep
	}
	for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
		f, err := b.js.PublishAsync(fmt.Sprintf("bench.ceiling.%d", i%64), payload, jetstream.WithMsgID(uuid.NewString()))
		if err != nil {
			settle(false)
			continue
		}
		futures = append(futures, f)
		if len(futures) >= 4096 {
			settle(false)
		}
	}
	settle(true)
	return float64(acked) / time.Since(start).Seconds(), nil
}

// concurrently runs fn in n loops for d (or until ctx ends) and returns
// the time taken.
func (b *Bench) concurrently(ctx context.Context, n int, d time.Duration, fn func(ctx context.Context, worker int)) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fn(ctx, w)
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// pending counts the outbox rows of the apps still waiting for the stream
// (marked pending, or in a fast path's in-flight group).
func (b *Bench) pending(ctx context.Context, apps []string) (int64, error) {
	in := "(" + mysqldb.Placeholders(len(apps)) + ")"
	q := "SELECT (SELECT COUNT(*) FROM room_outbox WHERE status = 'pending' AND app_code IN " + in + ") + (SELECT COUNT(*) FROM " +
		outboxrelay.InFlightJoin + " WHERE o.app_code IN " + in + ")"
	args := make([]any, 0, 2*len(apps))
	for range 2 {
		for _, a := range apps {
			args = append(args, a)
		}
	}
	var n int64
	err := b.db.QueryRowContext(ctx, q, args...).Scan(&n)
	return n, err
}

// waitQuiet waits until no outbox row of the apps is pending.
func (b *Bench) waitQuiet(ctx context.Context, apps []string) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(b.cfg.QuietTimeout)
	for {
		n, err := b.pending(ctx, apps)
		if err == nil && n == 0 {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return time.Since(start), fmt.Errorf("outbox still holds %d pending rows after %s (err %v)", n, b.cfg.QuietTimeout, err)
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// committed are the outbox rows (event id → commit time) of the apps
// created in [from, to].
func (b *Bench) committed(ctx context.Context, apps []string, from, to time.Time) (map[string]int64, error) {
	q := "SELECT event_id, created_at_ms FROM room_outbox WHERE app_code IN (" + mysqldb.Placeholders(len(apps)) +
		") AND created_at_ms BETWEEN ? AND ?"
	args := make([]any, 0, len(apps)+2)
	for _, a := range apps {
		args = append(args, a)
	}
	args = append(args, from.UnixMilli(), to.UnixMilli())
	rows, err := b.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var ms int64
		if err := rows.Scan(&id, &ms); err != nil {
			return nil, fmt.Errorf("read outbox: %w", err)
		}
		out[id] = ms
	}
	return out, rows.Err()
}

// StreamAck is commit → stream ack over the load's events.
type StreamAck struct {
	Latency   *Latency `json:"latency,omitempty"`
	Committed int64    `json:"events_committed"`
	InStream  int64    `json:"events_in_stream"`
	Missing   int64    `json:"events_missing"`
}

// streamAck reads ROOM_EVENTS' stored timestamps of the messages since
// from and joins them to the outbox's commit times (commits, by event id).
func (b *Bench) streamAck(ctx context.Context, commits map[string]int64, from time.Time) (StreamAck, error) {
	res := StreamAck{Committed: int64(len(commits))}
	if b.js == nil {
		return res, errors.New("no JetStream connection")
	}
	stream, err := b.js.Stream(ctx, bus.StreamName)
	if err != nil {
		return res, fmt.Errorf("stream %s: %w", bus.StreamName, err)
	}
	// Every message since the load began, unfiltered: commits names the
	// apps' events and anything else is skipped here. A consumer filtered
	// to the apps' subjects (one filter per app) costs the server far
	// more: with several filters it intersects each message block's
	// subjects with them for every message it looks up, which held a core
	// for over a minute after a 60 s load.
	start := from.Add(-time.Second)
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start})
	if err != nil {
		return res, fmt.Errorf("ordered consumer: %w", err)
	}
	var lat []time.Duration
	seen := map[string]bool{}
	for ctx.Err() == nil {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return res, fmt.Errorf("fetch: %w", err)
		}
		n := 0
		var last uint64 = 1
		for m := range batch.Messages() {
			n++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			last = meta.NumPending
			id := m.Headers().Get(jetstream.MsgIDHeader)
			ms, ok := commits[id]
			if !ok || seen[id] {
				continue
			}
			seen[id] = true
			lat = append(lat, max(0, meta.Timestamp.Sub(time.UnixMilli(ms))))
		}
		if n == 0 || last == 0 {
			break
		}
	}
	res.InStream = int64(len(seen))
	res.Missing = res.Committed - res.InStream
	res.Latency = latencyOf(lat)
	return res, nil
}

// IMReceipt is commit → IM emulator receipt over a sample of the load's
// events.
type IMReceipt struct {
	Latency  *Latency `json:"latency,omitempty"`
	Sampled  int64    `json:"sampled"`
	Received int64    `json:"received"`
	Shown    int64    `json:"shown_more_than_once"`
}

// imReceipt asks the emulator about up to 1,000 events. Events the bridge
// does not send to IM (not client-visible) count as not received.
func (b *Bench) imReceipt(ctx context.Context, commits map[string]int64) (IMReceipt, error) {
	var res IMReceipt
	base := strings.TrimRight(b.cfg.EmulatorURL, "/")
	var stats map[string]any
	if st, err := b.http.getJSON(ctx, base+"/_emu/stats", &stats); err != nil || st != http.StatusOK {
		return res, fmt.Errorf("emulator %s/_emu/stats answers %d: %v", base, st, err)
	}
	var lat []time.Duration
	for id, ms := range commits {
		if res.Sampled >= 1000 || ctx.Err() != nil {
			break
		}
		res.Sampled++
		var ev struct {
			Shown             int64 `json:"shown"`
			FirstReceivedAtMs int64 `json:"first_received_at_ms"`
		}
		st, err := b.http.getJSON(ctx, base+"/_emu/events/"+id, &ev)
		if err != nil || st != http.StatusOK {
			continue
		}
		res.Received++
		if ev.Shown > 1 {
			res.Shown++
		}
		lat = append(lat, max(0, time.UnixMilli(ev.FirstReceivedAtMs).Sub(time.UnixMilli(ms))))
	}
	res.Latency = latencyOf(lat)
	return res, nil
}

// Drain is the relay's drain rate on a backlog.
type Drain struct {
	Rows       int64   `json:"rows"`
	RowsPerSec float64 `json:"rows_per_sec"` // over first to last publish
	WallSec    float64 `json:"wall_sec"`     // insert commit to no row pending (includes the poll interval)
}

// drain commits DrainRows pending outbox rows of DrainApp in one
// transaction, waits for the relay to publish them all, and deletes them.
// Their events (type BenchDrain) reach ROOM_EVENTS under DrainApp's subject.
func (b *Bench) drain(ctx context.Context) (Drain, error) {
	app := b.cfg.DrainApp
	res := Drain{Rows: int64(b.cfg.DrainRows)}
	if _, err := b.db.ExecContext(ctx, "DELETE FROM room_outbox WHERE app_code = ?", app); err != nil {
		return res, fmt.Errorf("clear backlog: %w", err)
	}
	now := time.Now()
	err := mysqldb.Update(ctx, b.db, func(tx *sql.Tx) error {
		const per = 500
		for done := 0; done < b.cfg.DrainRows; done += per {
			n := min(per, b.cfg.DrainRows-done)
			rows := make([]voiceroom.OutboxRow, 0, n)
			for i := range n {
				k := done + i
				env := bus.Envelope{EventID: uuid.NewString(), AppCode: app, RoomID: fmt.Sprintf("%s_drain%d", app, k%100),
					RoomVersion: int64(k/100 + 1), EventType: "BenchDrain", CommandID: uuid.NewString(), OccurredAtMs: now.UnixMilli()}
				raw, err := env.Marshal()
				if err != nil {
					return err
				}
				rows = append(rows, voiceroom.OutboxRow{AppCode: app, EventID: env.EventID, RoomID: env.RoomID,
					RoomVersion: env.RoomVersion, EventType: env.EventType, Envelope: raw, CreatedAtMs: now.UnixMilli()})
			}
			if _, err := outboxrelay.InsertRows(ctx, tx, rows, false, now.UnixMilli()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("insert backlog: %w", err)
	}
	committed := time.Now()
	if _, err := b.waitQuiet(ctx, []string{app}); err != nil {
		return res, err
	}
	res.WallSec = time.Since(committed).Seconds()
	var first, last sql.NullInt64
	if err := b.db.QueryRowContext(ctx, "SELECT MIN(published_at_ms), MAX(published_at_ms) FROM room_outbox WHERE app_code = ?", app).Scan(&first, &last); err != nil {
		return res, fmt.Errorf("read backlog: %w", err)
	}
	if span := last.Int64 - first.Int64; span > 0 {
		res.RowsPerSec = float64(res.Rows) / (float64(span) / 1000)
	}
	if _, err := b.db.ExecContext(ctx, "DELETE FROM room_outbox WHERE app_code = ?", app); err != nil {
		return res, fmt.Errorf("clear backlog: %w", err)
	}
	return res, nil
}
