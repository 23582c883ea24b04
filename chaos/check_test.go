//go:build chaos

package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
	"voiceroom/outboxrelay"
	"voiceroom/roomevent"
)

// account is the zero-loss accounting after one scenario, cumulative over
// the whole run (MySQL's record of what committed against what every sink
// holds).
type account struct {
	okAnswers      int // 200s of the scenario
	okNotLogged    []string
	rejectedLogged []string
	halfApplied    []string
	versionGaps    []string // rooms whose logged versions are not 1..max, each once

	committed   int // outbox rows (events) of the app, all scenarios
	pending     int
	inStream    int // distinct event ids in ROOM_EVENTS
	lost        int // committed, not in the stream
	dupInStream int // stream messages beyond the first of an event id
	outOfOrder  int // stream messages with a room_version below one before it, same room
	dlq         int // dead letters of the app (none is poisoned on purpose)

	walletBad   []string
	doubleDebit int

	imSkip, listSkip string
}

// problems lists what breaks a promise.
func (a account) problems() []string {
	var p []string
	add := func(cond bool, format string, args ...any) {
		if cond {
			p = append(p, fmt.Sprintf(format, args...))
		}
	}
	add(len(a.okNotLogged) > 0, "%d commands answered 200 are not in the command log: %v", len(a.okNotLogged), first(a.okNotLogged))
	add(len(a.rejectedLogged) > 0, "%d commands answered with a rejection are in the command log: %v", len(a.rejectedLogged), first(a.rejectedLogged))
	add(len(a.halfApplied) > 0, "%d half-applied: %v", len(a.halfApplied), first(a.halfApplied))
	add(len(a.versionGaps) > 0, "%d rooms whose logged versions are not 1..max without a gap: %v", len(a.versionGaps), first(a.versionGaps))
	add(a.pending > 0, "%d outbox rows still pending", a.pending)
	add(a.lost > 0, "%d committed events are not in ROOM_EVENTS", a.lost)
	add(a.dupInStream > 0, "%d duplicate messages in ROOM_EVENTS", a.dupInStream)
	add(a.dlq > 0, "%d dead letters, none poisoned on purpose", a.dlq)
	add(len(a.walletBad) > 0, "%d wallets differ from their ledger: %v", len(a.walletBad), first(a.walletBad))
	add(a.doubleDebit > 0, "%d gifts debited more than once", a.doubleDebit)
	return p
}

func first(s []string) []string { return s[:min(len(s), 5)] }

// durable are the commands whose 200 always means a command-log row (a
// join or leave may be a no-op, a heartbeat writes nothing).
var durable = map[string]bool{"mic_up": true, "mic_change": true, "mic_down": true, "gift": true}

// check runs every accounting check; outs are the scenario's outcomes, all
// every outcome so far.
func (c *cluster) check(ctx context.Context, outs, all []outcome) (account, error) {
	var a account
	logged := map[string]bool{}
	rows, err := c.db.QueryContext(ctx, "SELECT room_id, command_id FROM room_command_log WHERE app_code = ?", app)
	if err != nil {
		return a, fmt.Errorf("read command log: %w", err)
	}
	for rows.Next() {
		var room, id string
		if err := rows.Scan(&room, &id); err != nil {
			rows.Close()
			return a, fmt.Errorf("read command log: %w", err)
		}
		logged[room+"/"+id] = true
	}
	if err := closeRows(rows); err != nil {
		return a, fmt.Errorf("read command log: %w", err)
	}
	for _, o := range outs {
		if o.status == http.StatusOK {
			a.okAnswers++
		}
	}
	for _, o := range all {
		k := o.room + "/" + o.key
		switch {
		case o.status == http.StatusOK && durable[o.op] && !logged[k]:
			a.okNotLogged = append(a.okNotLogged, o.op+" "+k)
		case o.status != http.StatusOK && o.definite() && logged[k]:
			a.rejectedLogged = append(a.rejectedLogged, o.op+" "+k+" "+o.code)
		}
	}

	// Every logged version has its events; every event its logged version;
	// no room row is ahead of its log, and each agrees with its latest card.
	for _, q := range []struct{ what, sql string }{
		{"logged version without outbox events", `SELECT CONCAT(l.room_id, ' v', l.room_version, ' ', l.command_type) FROM room_command_log l
			LEFT JOIN room_outbox o ON o.app_code = l.app_code AND o.room_id = l.room_id AND o.room_version = l.room_version
			WHERE l.app_code = ? AND o.id IS NULL`},
		{"outbox events without a logged version", `SELECT CONCAT(o.room_id, ' v', o.room_version, ' ', o.event_type) FROM room_outbox o
			LEFT JOIN room_command_log l ON o.app_code = l.app_code AND o.room_id = l.room_id AND o.room_version = l.room_version
			WHERE o.app_code = ? AND l.room_id IS NULL AND o.room_id NOT LIKE '` + roomevent.ActivityRoomIDPrefix + `%'
			AND o.room_id NOT LIKE '` + roomevent.PKRoomIDPrefix + `%'`},
		// The rooms row is written when a column others read changes, not
		// by every command: never ahead of the log, and its status and
		// whether anyone is online agree with the room's latest card.
		{"room row ahead of its log", `SELECT CONCAT(r.room_id, ' row v', r.room_version, ' log v', MAX(l.room_version)) FROM rooms r
			JOIN room_command_log l ON l.app_code = r.app_code AND l.room_id = r.room_id
			WHERE r.app_code = ? GROUP BY r.room_id, r.room_version HAVING MAX(l.room_version) < r.room_version`},
		// The latest card is the one in the room's newest outbox row, as
		// committed (the list's copy may still hold a counts change back).
		{"room row disagrees with its latest card", `SELECT CONCAT(x.room_id, ' row ', x.status, '/', x.online_count, ' card v', x.card_version, ' ', x.card_status, '/', x.card_online)
			FROM (SELECT r.room_id, r.status, r.online_count, r.visible_region_id, o.room_version AS card_version,
					JSON_VALUE(o.envelope, '$.payload.room.status') AS card_status,
					JSON_VALUE(o.envelope, '$.payload.room.online_count') AS card_online,
					JSON_VALUE(o.envelope, '$.payload.room.visible_region_id') AS card_region
				FROM rooms r JOIN room_outbox o ON o.id = (SELECT o2.id FROM room_outbox o2
					WHERE o2.app_code = r.app_code AND o2.room_id = r.room_id AND JSON_EXISTS(o2.envelope, '$.payload.room')
					ORDER BY o2.room_version DESC, o2.id DESC LIMIT 1)
				WHERE r.app_code = ?) x
			WHERE x.status <> x.card_status OR x.visible_region_id <> x.card_region OR (x.online_count > 0) <> (x.card_online > 0)`},
	} {
		bad, err := strings1(ctx, c, q.sql)
		if err != nil {
			return a, fmt.Errorf("%s: %w", q.what, err)
		}
		for _, b := range bad {
			a.halfApplied = append(a.halfApplied, q.what+": "+b)
		}
	}

	// Each room's versions are 1..max, each once: the log's primary key
	// refuses a second write of a version (an old owner resumed after a
	// pause, say), and the count shows none was skipped.
	gaps, err := strings1(ctx, c, `SELECT CONCAT(room_id, ' versions ', MIN(room_version), '..', MAX(room_version), ', ', COUNT(*), ' rows')
		FROM room_command_log WHERE app_code = ? GROUP BY room_id HAVING MIN(room_version) <> 1 OR COUNT(*) <> MAX(room_version)`)
	if err != nil {
		return a, fmt.Errorf("room versions: %w", err)
	}
	a.versionGaps = gaps

	// Wallets: balance = ledger; a gift command debits once.
	bad, err := strings1(ctx, c, `SELECT CONCAT(w.user_id, ' balance ', w.balance, ' ledger ', COALESCE(SUM(g.delta), 0)) FROM wallets w
		LEFT JOIN wallet_ledger g ON g.app_code = w.app_code AND g.user_id = w.user_id
		WHERE w.app_code = ? GROUP BY w.user_id, w.balance HAVING COALESCE(SUM(g.delta), 0) <> w.balance`)
	if err != nil {
		return a, fmt.Errorf("wallets: %w", err)
	}
	a.walletBad = bad
	var gifts, debits int
	if err := c.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM room_command_log WHERE app_code = ? AND command_type = 'SendGift'", app).Scan(&gifts); err != nil {
		return a, err
	}
	if err := c.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM wallet_ledger WHERE app_code = ? AND kind = 'gift' AND delta < 0", app).Scan(&debits); err != nil {
		return a, err
	}
	a.doubleDebit = max(0, debits-gifts)

	// The stream against the outbox.
	committed := map[string]bool{}
	// Pending: marked so, or in an in-flight group (the second query, from
	// the small in-flight table: a per-row check over the outbox is slow).
	for _, q := range []string{
		"SELECT event_id, status = 'pending' FROM room_outbox WHERE app_code = ?",
		"SELECT o.event_id, TRUE FROM " + outboxrelay.InFlightJoin + " WHERE o.app_code = ?",
	} {
		rows, err = c.db.QueryContext(ctx, q, app)
		if err != nil {
			return a, fmt.Errorf("read outbox: %w", err)
		}
		for rows.Next() {
			var id string
			var pending bool
			if err := rows.Scan(&id, &pending); err != nil {
				rows.Close()
				return a, fmt.Errorf("read outbox: %w", err)
			}
			committed[id] = true
			if pending {
				a.pending++
			}
		}
		if err := closeRows(rows); err != nil {
			return a, fmt.Errorf("read outbox: %w", err)
		}
	}
	a.committed = len(committed)
	seen, dups, ooo, err := c.readStream(ctx, bus.StreamName, bus.SubjectPrefix+"."+app+".>")
	if err != nil {
		return a, err
	}
	a.dupInStream, a.outOfOrder = dups, ooo
	for id := range committed {
		if seen[id] > 0 {
			a.inStream++
		} else {
			a.lost++
		}
	}
	dlq, _, _, err := c.readStream(ctx, bus.DLQStreamName, "")
	if err != nil {
		return a, err
	}
	for id := range dlq {
		if committed[id] {
			a.dlq++
		}
	}
	return a, nil
}

// closeRows closes rows and returns the error that ended their iteration,
// if any: rows cut short would pass for fewer rows.
func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

func strings1(ctx context.Context, c *cluster, q string) ([]string, error) {
	rows, err := c.db.QueryContext(ctx, q, app)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// readStream reads a stream (optionally one subject filter) from the start
// and returns the event ids it holds (Nats-Msg-Id, else the dead letter's
// original id header) with the stream sequence of each one's first copy,
// the duplicates, and the messages that came after a higher room_version
// of the same room.
func (c *cluster) readStream(ctx context.Context, name, filter string) (map[string]uint64, int, int, error) {
	stream, err := c.js.Stream(ctx, name)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("stream %s: %w", name, err)
	}
	cfg := jetstream.OrderedConsumerConfig{}
	if filter != "" {
		cfg.FilterSubjects = []string{filter}
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	seen := map[string]uint64{}
	if info.State.Msgs == 0 {
		return seen, 0, 0, nil
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, 0, 0, err
	}
	dups, ooo := 0, 0
	last := map[string]int64{}
	for {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, 0, 0, err
		}
		n, pending := 0, uint64(1)
		for m := range batch.Messages() {
			n++
			if meta, err := m.Metadata(); err == nil {
				pending = meta.NumPending
			}
			id := m.Headers().Get(jetstream.MsgIDHeader)
			if env, err := bus.DecodeEnvelope(m.Data()); err == nil {
				if id == "" {
					id = env.EventID
				}
				if env.RoomVersion < last[env.RoomID] {
					ooo++
				}
				last[env.RoomID] = max(last[env.RoomID], env.RoomVersion)
			}
			if seen[id] > 0 {
				dups++
			} else if meta, err := m.Metadata(); err == nil {
				seen[id] = meta.Sequence.Stream
			} else {
				seen[id] = math.MaxUint64 // stored, sequence unknown
			}
		}
		if err := batch.Error(); err != nil && n == 0 && !strings.Contains(err.Error(), "timeout") {
			return nil, 0, 0, err
		}
		if n == 0 || pending == 0 {
			return seen, dups, ooo, nil
		}
	}
}
