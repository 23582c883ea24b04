package testenv

// The room outbox for tests: rows written exactly as the rooms package
// writes them (voiceroom.OutboxRow, and broken ones), their state read
// back, and what ROOM_EVENTS holds. A JetStream that a test can stop and
// start again, to make "JetStream is down" real, is RunJetStream:
//
//	js := testenv.RunJetStream(t)              // a server the test controls
//	db := testenv.NewDB(t)
//	fp := newFastPath(db, js.Conn())           // outboxrelay.NewFastPath, Connected: js.Conn().NATS().IsConnected
//	js.Stop()
//	... run the command; it succeeds ...
//	st := testenv.OutboxState(t, db, eventID)  // pending, retry_count 0
//	js.Start()
//	... run an outboxrelay.Relay pass ...
//	testenv.StreamCount(t, js.Conn().JetStream(), eventID) == 1

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom"
	"voiceroom/bus"
	"voiceroom/outboxrelay"
)

// NewEnvelope returns a valid envelope with a fresh event_id and
// command_id.
func NewEnvelope(appCode, roomID string, version int64, eventType string) bus.Envelope {
	return bus.Envelope{
		EventID:      uuid.NewString(),
		AppCode:      appCode,
		RoomID:       roomID,
		RoomVersion:  version,
		EventType:    eventType,
		CommandID:    uuid.NewString(),
		RequestID:    "req-" + uuid.NewString()[:8],
		OccurredAtMs: time.Now().UnixMilli(),
		Payload:      json.RawMessage(`{"user_id":1001,"seat_index":2}`),
	}
}

// RoomEnvelopes returns n envelopes of one room, versions from..from+n-1.
func RoomEnvelopes(appCode, roomID string, from int64, n int) []bus.Envelope {
	envs := make([]bus.Envelope, n)
	for i := range envs {
		envs[i] = NewEnvelope(appCode, roomID, from+int64(i), "seat_changed")
	}
	return envs
}

// InsertOutbox writes one outbox row per envelope in one transaction, in the
// given order, exactly as a room command does (envelope = the bytes of
// Envelope.Marshal, created_at_ms = now), and returns the messages the
// rooms package would hand to the fast path after the commit.
func InsertOutbox(tb testing.TB, db *sql.DB, envs ...bus.Envelope) []bus.Message {
	tb.Helper()
	msgs, err := InsertOutboxTx(context.Background(), db, time.Now(), envs...)
	if err != nil {
		tb.Fatalf("insert outbox rows: %v", err)
	}
	return msgs
}

// InsertOutboxTx is InsertOutbox without a testing.TB, for benchmarks' loops: one
// transaction, multi-row INSERTs of up to 1000 rows, created_at_ms from
// createdAt.
func InsertOutboxTx(ctx context.Context, db *sql.DB, createdAt time.Time, envs ...bus.Envelope) ([]bus.Message, error) {
	msgs, _, err := insertOutbox(ctx, db, createdAt, false, envs)
	return msgs, err
}

// InsertOutboxInFlight writes the envelopes' rows in flight, as a group
// commit whose events the fast path takes does (one multi-row INSERT of at
// most 1000 rows, written 'published', and the room_outbox_inflight row
// covering them), created createdAt; it returns the messages and the
// group to hand to FastPath.Committed.
func InsertOutboxInFlight(tb testing.TB, db *sql.DB, createdAt time.Time, envs ...bus.Envelope) ([]bus.Message, voiceroom.OutboxGroup) {
	tb.Helper()
	if len(envs) > 1000 {
		tb.Fatalf("in-flight group of %d rows: at most 1000", len(envs))
	}
	msgs, g, err := insertOutbox(context.Background(), db, createdAt, true, envs)
	if err != nil {
		tb.Fatalf("insert in-flight outbox rows: %v", err)
	}
	return msgs, g
}

func insertOutbox(ctx context.Context, db *sql.DB, createdAt time.Time, inFlight bool, envs []bus.Envelope) ([]bus.Message, voiceroom.OutboxGroup, error) {
	var group voiceroom.OutboxGroup
	msgs := make([]bus.Message, len(envs))
	rows := make([]voiceroom.OutboxRow, len(envs))
	for i, env := range envs {
		data, err := env.Marshal()
		if err != nil {
			return nil, group, err
		}
		subject, err := bus.Subject(env.AppCode, env.RoomID, env.EventType)
		if err != nil {
			return nil, group, err
		}
		msgs[i] = bus.Message{Subject: subject, ID: env.EventID, Data: data}
		rows[i] = outboxRow(env, data, createdAt)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, group, err
	}
	defer tx.Rollback()
	for lo := 0; lo < len(rows); lo += 1000 {
		if group, err = outboxrelay.InsertRows(ctx, tx, rows[lo:min(lo+1000, len(rows))], inFlight, createdAt.UnixMilli()); err != nil {
			return nil, group, err
		}
	}
	return msgs, group, tx.Commit()
}

// outboxRow is the row a room command writes for env.
func outboxRow(env bus.Envelope, data []byte, createdAt time.Time) voiceroom.OutboxRow {
	return voiceroom.OutboxRow{AppCode: env.AppCode, EventID: env.EventID, RoomID: env.RoomID, RoomVersion: env.RoomVersion,
		EventType: env.EventType, Envelope: data, CreatedAtMs: createdAt.UnixMilli()}
}

// InsertOutboxRaw writes a pending row with the given columns and envelope
// bytes, which need not decode (a broken row), and returns its id.
func InsertOutboxRaw(tb testing.TB, db *sql.DB, appCode, eventID, roomID string, version int64, eventType string, envelope []byte) int64 {
	tb.Helper()
	row := voiceroom.OutboxRow{AppCode: appCode, EventID: eventID, RoomID: roomID, RoomVersion: version,
		EventType: eventType, Envelope: envelope, CreatedAtMs: time.Now().UnixMilli()}
	if _, err := outboxrelay.InsertRows(context.Background(), db, []voiceroom.OutboxRow{row}, false, row.CreatedAtMs); err != nil {
		tb.Fatalf("insert raw outbox row: %v", err)
	}
	var id int64
	if err := db.QueryRow(`SELECT id FROM room_outbox WHERE event_id = ?`, eventID).Scan(&id); err != nil {
		tb.Fatalf("insert raw outbox row: read its id: %v", err)
	}
	return id
}

// OutboxRowState is the relay-visible state of one outbox row.
type OutboxRowState struct {
	ID            int64
	Status        string
	RetryCount    int
	LastError     string // "" when NULL
	PublishedAtMs int64  // 0 when NULL
}

// OutboxState reads the row of eventID, failing the test if there is none.
func OutboxState(tb testing.TB, db *sql.DB, eventID string) OutboxRowState {
	tb.Helper()
	var s OutboxRowState
	var lastErr sql.NullString
	var pub sql.NullInt64
	err := db.QueryRow(`SELECT id, status, retry_count, last_error, published_at_ms FROM room_outbox WHERE event_id = ?`, eventID).
		Scan(&s.ID, &s.Status, &s.RetryCount, &lastErr, &pub)
	if err != nil {
		tb.Fatalf("outbox row %s: %v", eventID, err)
	}
	s.LastError, s.PublishedAtMs = lastErr.String, pub.Int64
	return s
}

// OutboxCount returns the number of outbox rows with status ("" counts all rows).
func OutboxCount(tb testing.TB, db *sql.DB, status string) int {
	tb.Helper()
	switch status {
	case "":
		return Scalar[int](tb, db, `SELECT COUNT(*) FROM room_outbox`)
	case voiceroom.OutboxPending: // marked so, or in an in-flight group
		return Scalar[int](tb, db, `SELECT (SELECT COUNT(*) FROM room_outbox WHERE status = 'pending') + (SELECT COUNT(*) FROM `+
			outboxrelay.InFlightJoin+`)`)
	case voiceroom.OutboxPublished:
		return Scalar[int](tb, db, `SELECT (SELECT COUNT(*) FROM room_outbox WHERE status = 'published') - (SELECT COUNT(*) FROM `+
			outboxrelay.InFlightJoin+` WHERE o.status = 'published')`)
	}
	return Scalar[int](tb, db, `SELECT COUNT(*) FROM room_outbox WHERE status = ?`, status)
}

// StreamMsg is one message stored in ROOM_EVENTS.
type StreamMsg struct {
	Seq      uint64
	Subject  string
	MsgID    string // the Nats-Msg-Id header
	Envelope bus.Envelope
}

// StreamMessages returns every message in ROOM_EVENTS, in stream order.
func StreamMessages(tb testing.TB, js jetstream.JetStream) []StreamMsg {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := roomEvents(ctx, tb, js)
	info := s.CachedInfo()
	var out []StreamMsg
	if info.State.Msgs == 0 {
		return out
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		if err != nil {
			tb.Fatalf("stream message %d: %v", seq, err)
		}
		env, err := bus.DecodeEnvelope(raw.Data)
		if err != nil {
			tb.Fatalf("stream message %d: %v", seq, err)
		}
		out = append(out, StreamMsg{Seq: seq, Subject: raw.Subject, MsgID: raw.Header.Get(jetstream.MsgIDHeader), Envelope: env})
	}
	return out
}

// StreamCount returns how many messages in ROOM_EVENTS carry eventID as
// their Nats-Msg-Id.
func StreamCount(tb testing.TB, js jetstream.JetStream, eventID string) int {
	tb.Helper()
	n := 0
	for _, m := range StreamMessages(tb, js) {
		if m.MsgID == eventID {
			n++
		}
	}
	return n
}

// StreamLen returns the number of messages in ROOM_EVENTS.
func StreamLen(tb testing.TB, js jetstream.JetStream) uint64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return roomEvents(ctx, tb, js).CachedInfo().State.Msgs
}

// roomEvents looks ROOM_EVENTS up (its info as of now).
func roomEvents(ctx context.Context, tb testing.TB, js jetstream.JetStream) jetstream.Stream {
	tb.Helper()
	s, err := js.Stream(ctx, bus.StreamName)
	if err != nil {
		tb.Fatalf("stream %s: %v", bus.StreamName, err)
	}
	return s
}

// WaitDeadLetters polls until ROOM_EVENTS_DLQ holds want letters and
// returns them, oldest first.
func WaitDeadLetters(tb testing.TB, js jetstream.JetStream, want int) []bus.DeadLetter {
	tb.Helper()
	var got []bus.DeadLetter
	Eventually(tb, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		if got, err = bus.ReadDeadLetters(ctx, js, max(100, want+1)); err != nil {
			return err
		}
		if len(got) != want {
			return fmt.Errorf("%d dead letters, want %d", len(got), want)
		}
		return nil
	})
	return got
}
