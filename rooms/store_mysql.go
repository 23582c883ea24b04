package rooms

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/mysqldb"
	"voiceroom/outboxrelay"
	"voiceroom/roomevent"
	"voiceroom/wallet"
)

// store reads rooms back from MySQL: the latest snapshot plus the command
// log after it. Writes go through the committer.
type store struct {
	db *sql.DB
}

// storedRoom is what recovery finds of a room.
type storedRoom struct {
	snapshot *State
	log      []loggedCommand
}

type loggedCommand struct {
	version int64
	cmd     Command
}

// load reads a room's snapshot and the commands after it. A room that does
// not exist is errRoomNotFound.
func (st *store) load(ctx context.Context, appCode, roomID string) (*storedRoom, error) {
	var raw []byte
	err := st.db.QueryRowContext(ctx, `SELECT state FROM room_snapshots WHERE app_code = ? AND room_id = ?`,
		appCode, roomID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errRoomNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read snapshot of %s: %w", roomID, err)
	}
	var snap State
	if err := json.Unmarshal(raw, &snap); err != nil {
		return nil, fmt.Errorf("decode snapshot of %s: %w", roomID, err)
	}
	rows, err := st.db.QueryContext(ctx, `SELECT room_version, command_id, command FROM room_command_log
		WHERE app_code = ? AND room_id = ? AND room_version > ? ORDER BY room_version`, appCode, roomID, snap.Version)
	if err != nil {
		return nil, fmt.Errorf("read command log of %s: %w", roomID, err)
	}
	defer rows.Close()
	sr := &storedRoom{snapshot: &snap}
	for rows.Next() {
		var lc loggedCommand
		var body []byte
		if err := rows.Scan(&lc.version, &lc.cmd.CommandID, &body); err != nil {
			return nil, fmt.Errorf("read command log of %s: %w", roomID, err)
		}
		if err := json.Unmarshal(body, &lc.cmd); err != nil {
			return nil, fmt.Errorf("decode command %d of %s: %w", lc.version, roomID, err)
		}
		lc.cmd.AppCode, lc.cmd.RoomID = appCode, roomID
		sr.log = append(sr.log, lc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read command log of %s: %w", roomID, err)
	}
	return sr, nil
}

// storedSnapshot returns the stored snapshot of a room when it is current
// (no command committed after it), so a read needs no cell. ok is false when
// the room must be loaded to be read.
func (st *store) storedSnapshot(ctx context.Context, appCode, roomID string) (s *State, ok bool, err error) {
	var raw []byte
	var current int64
	// The rooms row is not rewritten by every command (see mutation.room):
	// the command log's newest version is the room's.
	err = st.db.QueryRowContext(ctx, `SELECT s.state, (SELECT COALESCE(MAX(l.room_version), 0) FROM room_command_log l
		WHERE l.app_code = s.app_code AND l.room_id = s.room_id) FROM room_snapshots s
		WHERE s.app_code = ? AND s.room_id = ?`, appCode, roomID).Scan(&raw, &current)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, errRoomNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("read snapshot of %s: %w", roomID, err)
	}
	var snap State
	if err := json.Unmarshal(raw, &snap); err != nil {
		return nil, false, fmt.Errorf("decode snapshot of %s: %w", roomID, err)
	}
	return &snap, snap.Version == current, nil
}

// lookupCommand looks up a command already applied to a room: found is
// false when the log has no such command; result is the answer stored with
// it, nil for a command logged without one (it was sent without an
// Idempotency-Key, so only a router's retry can ask again: see
// mutation.result).
func (st *store) lookupCommand(ctx context.Context, appCode, roomID, commandID string) (result []byte, found bool, err error) {
	err = st.db.QueryRowContext(ctx, `SELECT result FROM room_command_log WHERE app_code = ? AND room_id = ? AND command_id = ?`,
		appCode, roomID, commandID).Scan(&result)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up command %s: %w", commandID, err)
	}
	return result, true, nil
}

// activeRoomOf returns the id of the owner's active room, or "".
func (st *store) activeRoomOf(ctx context.Context, appCode string, ownerUserID int64) (string, error) {
	var roomID string
	err := st.db.QueryRowContext(ctx, `SELECT room_id FROM rooms WHERE app_code = ? AND active_owner_user_id = ?`,
		appCode, ownerUserID).Scan(&roomID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return roomID, err
}

// roomsWithUsers lists the active rooms whose last committed state still
// lists present users: after a restart they are loaded so the presence
// sweeper can clear users whose heartbeats stopped while the process was down.
func (st *store) roomsWithUsers(ctx context.Context, limit int) ([][2]string, error) {
	return st.roomKeys(ctx, `SELECT app_code, room_id FROM rooms WHERE status = 'active' AND online_count > 0 LIMIT ?`, limit)
}

// roomKeys runs query, which selects app_code and room_id.
func (st *store) roomKeys(ctx context.Context, query string, args ...any) ([][2]string, error) {
	rows, err := st.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// groupHash is the rooms row's group_hash: the hash of the room's IM
// GroupId whose remainder modulo P is the room's partition among P
// (roomcluster.Partition), so a takeover lists a partition's rooms with
// users from an index (roomsOfPartitions).
func groupHash(appCode, roomID string) uint32 {
	return voiceroom.Hash(roomevent.IMGroupID(appCode, roomID))
}

// roomsOfPartitions lists the active rooms with users (as roomsWithUsers)
// of the partitions ps among n, from the index on (status, online_count,
// group_hash) alone. Rows an older release wrote (group_hash 0) come too:
// the caller matches every key.
func (st *store) roomsOfPartitions(ctx context.Context, n int, ps []int, limit int) ([][2]string, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	q := make([]byte, 0, 160+3*len(ps))
	q = append(q, `SELECT app_code, room_id FROM rooms WHERE status = 'active' AND online_count > 0 AND (group_hash = 0 OR group_hash % ? IN (`...)
	args := make([]any, 0, len(ps)+2)
	args = append(args, n)
	for i, p := range ps {
		if i > 0 {
			q = append(q, ',')
		}
		q = append(q, '?')
		args = append(args, p)
	}
	q = append(q, `)) LIMIT ?`...)
	args = append(args, limit)
	return st.roomKeys(ctx, string(q), args...)
}

// mutation is everything one accepted command writes, in one transaction
// (possibly shared with other rooms' commands: see committer).
type mutation struct {
	appCode, roomID string
	version         int64
	nowMs           int64
	commandID       string
	kind            Kind
	actorUserID     int64
	requestID       string
	command         []byte // Command JSON, replayed at recovery
	// result is the View answered, returned to a repeated command_id; nil
	// (stored NULL) for a command without an Idempotency-Key, which no
	// client can repeat.
	result []byte
	outbox []voiceroom.OutboxRow
	msgs   []bus.Message // outbox's envelopes, for the fast path
	// room is the rooms row; writeRoom says whether this command writes it.
	// The row holds what other queries read (status, visible region,
	// owner and short id, whether anyone is online), so it is written
	// when one of those changes and with each snapshot, not by every
	// command: its room_version and online_count are those of its last
	// write, and the command log holds the room's current version.
	room      roomRow
	writeRoom bool
	create    bool   // insert the rooms row (CreateRoom) instead of updating it
	snapshot  []byte // State JSON when this command writes a snapshot, else nil
	debit     *wallet.Debit
	audit     *regionAudit
	roomAudit *AuditEntry // the room_audit row of an operator's command, else nil
}

// roomRow is the rooms table's view of a room.
type roomRow struct {
	shortID         string
	ownerUserID     int64
	status          string
	visibleRegionID int64
	mode            string
	onlineCount     int
	createdAtMs     int64
}

type regionAudit struct {
	oldRegionID, newRegionID int64
	operator, reason         string
}

// writeGroup writes the mutations in one transaction and returns its
// outcome as mysqldb.UpdateBatch does. Gift debits go first: a mutation
// whose payer lacks coins is left out of everything else and reported in
// short[i]. With inFlight the outbox rows are written in flight and group
// covers them (see voiceroom.OutboxGroup); else they are pending and group
// is zero.
//
// A group without gifts is one round trip: its rooms rows, command log,
// snapshots, audit rows and outbox rows with their in-flight row (which
// must come last, outboxrelay.AddRows) go in one query with the
// transaction's begin and commit. A group with gifts first reads and
// locks the payers' wallets (one more round trip, and one to begin); the
// debits and ledger rows then go with the rest.
func writeGroup(ctx context.Context, db *sql.DB, ms []*mutation, nowMs int64, inFlight bool) (short []bool, group voiceroom.OutboxGroup, err error) {
	var rows int
	ids, err := mysqldb.UpdateBatch(ctx, db, func(q mysqldb.Querier, b *mysqldb.Batch) error {
		var err error
		short, rows, inFlight, err = prepareGroup(ctx, q, b, ms, nowMs, inFlight)
		return err
	})
	if err != nil || !inFlight {
		return short, group, err
	}
	group, err = outboxrelay.GroupOf(ids[len(ids)-1], rows)
	if err != nil {
		// Committed, yet the group is unknown: the fast path cannot take
		// it, and the relay would only after the in-flight row expires.
		return short, group, fmt.Errorf("%w: %w", mysqldb.ErrOutcomeUnknown, err)
	}
	return short, group, nil
}

// prepareGroup is writeGroup's transaction: it locks the payers' wallets
// through q and adds every write to b. It returns the outbox rows it
// wrote and whether they are in flight, in which case their in-flight
// row is b's last statement.
func prepareGroup(ctx context.Context, q mysqldb.Querier, b *mysqldb.Batch, ms []*mutation, nowMs int64, inFlight bool) (short []bool, outboxRows int, _ bool, err error) {
	short = make([]bool, len(ms))
	var debits []wallet.Debit
	var debitOf []int
	for i, m := range ms {
		if m.debit != nil {
			debits = append(debits, *m.debit)
			debitOf = append(debitOf, i)
		}
	}
	if len(debits) > 0 {
		paid, err := wallet.DebitTx(ctx, q, debits, nowMs, b)
		if err != nil {
			return nil, 0, false, err
		}
		for j, ok := range paid {
			short[debitOf[j]] = !ok
		}
	}
	var creates, updates, logs, snaps, audits, roomAudits mysqldb.Rows
	var outbox []voiceroom.OutboxRow
	for i, m := range ms {
		if short[i] {
			continue
		}
		r := m.room
		switch {
		case !m.writeRoom:
		case m.create:
			creates.Add("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", m.appCode, m.roomID, r.shortID, r.ownerUserID, r.status,
				r.visibleRegionID, r.mode, m.version, r.onlineCount, r.createdAtMs, m.nowMs, groupHash(m.appCode, m.roomID))
		default:
			updates.Add("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", m.appCode, m.roomID, r.shortID, r.ownerUserID, r.status,
				r.visibleRegionID, r.mode, m.version, r.onlineCount, r.createdAtMs, m.nowMs, groupHash(m.appCode, m.roomID))
		}
		logs.Add("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", m.appCode, m.roomID, m.version, m.commandID, string(m.kind),
			m.actorUserID, m.requestID, m.command, m.result, m.nowMs)
		outbox = append(outbox, m.outbox...)
		if m.snapshot != nil {
			snaps.Add("(?, ?, ?, ?, ?)", m.appCode, m.roomID, m.version, m.snapshot, m.nowMs)
		}
		if a := m.audit; a != nil {
			audits.Add("(?, ?, ?, ?, ?, ?, ?, ?)", m.appCode, m.roomID, m.version, a.oldRegionID, a.newRegionID, a.operator, a.reason, m.nowMs)
		}
		if e := m.roomAudit; e != nil {
			roomAudits.Add(auditTuple, e.values()...)
		}
	}
	const roomCols = `(app_code, room_id, room_short_id, owner_user_id, status, visible_region_id, mode, room_version, online_count, created_at_ms, updated_at_ms, group_hash)`
	// A plain insert: a second active room of one owner hits uk_rooms_active_owner.
	b.AddRows(`INSERT INTO rooms `+roomCols+` VALUES `, &creates, ``)
	// The rows exist (primary key): this only updates them, in one statement.
	b.AddRows(`INSERT INTO rooms `+roomCols+` VALUES `, &updates, ` ON DUPLICATE KEY UPDATE status = VALUES(status),
			visible_region_id = VALUES(visible_region_id), room_version = VALUES(room_version),
			online_count = VALUES(online_count), updated_at_ms = VALUES(updated_at_ms), group_hash = VALUES(group_hash)`)
	// The primary key (app_code, room_id, room_version) fences a second
	// writer of the same room: its insert of a taken version fails.
	b.AddRows(`INSERT INTO room_command_log (app_code, room_id, room_version, command_id, command_type, actor_user_id,
			request_id, command, result, created_at_ms) VALUES `, &logs, ``)
	b.AddRows(`INSERT INTO room_snapshots (app_code, room_id, room_version, state, updated_at_ms) VALUES `, &snaps,
		` ON DUPLICATE KEY UPDATE room_version = VALUES(room_version), state = VALUES(state), updated_at_ms = VALUES(updated_at_ms)`)
	b.AddRows(`INSERT INTO room_region_audit (app_code, room_id, room_version, old_region_id, new_region_id, operator,
			reason, created_at_ms) VALUES `, &audits, ``)
	b.AddRows(auditInsertHead, &roomAudits, ``)
	inFlight = outboxrelay.AddRows(b, outbox, inFlight, nowMs)
	return short, len(outbox), inFlight, nil
}

// classifyWriteError turns a failed single-mutation transaction into the
// command's error.
func classifyWriteError(m *mutation, err error) error {
	if mysqldb.IsDuplicate(err) {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "uk_rooms_active_owner"):
			return errOwnerHasRoom
		case strings.Contains(msg, "uk_rooms_active_short_id"):
			return apperr.New(apperr.AlreadyExists, "an active room already uses short id %q", m.room.shortID)
		case strings.Contains(msg, "uk_command_log_command") || strings.Contains(msg, "PRIMARY"):
			return errFenced
		}
	}
	return apperr.Wrap(apperr.Unavailable, "room storage unavailable, try again", err)
}

// writeSnapshot stores st as the room's snapshot unless a newer one is there.
func (st *store) writeSnapshot(ctx context.Context, s *State, nowMs int64) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = st.db.ExecContext(ctx, `INSERT INTO room_snapshots (app_code, room_id, room_version, state, updated_at_ms)
		VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE
		state = IF(VALUES(room_version) > room_version, VALUES(state), state),
		updated_at_ms = IF(VALUES(room_version) > room_version, VALUES(updated_at_ms), updated_at_ms),
		room_version = GREATEST(room_version, VALUES(room_version))`,
		s.AppCode, s.RoomID, s.Version, raw, nowMs)
	return err
}

// rependInFlight sets the room's outbox rows with a room_version above
// after that lie in in-flight groups back to pending: the fast path that
// wrote them is another process's, perhaps a dead one's, and this node's
// next events of the room go to the relay behind them (FastPath.Behind),
// which publishes pending rows in id order. Left in flight, they would
// wait for the relay's in-flight grace while the later ones went out.
func (st *store) rependInFlight(ctx context.Context, appCode, roomID string, after int64) error {
	_, err := st.db.ExecContext(ctx, `UPDATE room_outbox o SET o.status = 'pending'
		WHERE o.app_code = ? AND o.room_id = ? AND o.room_version > ? AND o.status = 'published' AND o.published_at_ms IS NULL
		AND `+outboxrelay.InFlightCovers("o.id"), appCode, roomID, after)
	return err
}

// newestPending returns the event_id of the room's newest outbox row still
// pending (marked so, or in an in-flight group) with a room_version above
// after, or "".
func (st *store) newestPending(ctx context.Context, appCode, roomID string, after int64) (string, error) {
	var id string
	err := st.db.QueryRowContext(ctx, `SELECT o.event_id FROM room_outbox o
		WHERE o.app_code = ? AND o.room_id = ? AND o.room_version > ? AND `+outboxrelay.PendingCond+`
		ORDER BY o.room_version DESC, o.id DESC LIMIT 1`, appCode, roomID, after).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}
