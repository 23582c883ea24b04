package outboxrelay

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// drainLock lets one relay of several drain the outbox at a time: a MySQL
// named lock (GET_LOCK), held by one session of the relay that drains.
// The others stand by and take it, at their next pass, once that session
// ends: its relay stopped, its process died, or its connection was cut.
//
// Two relays draining one backlog side by side would mostly hold each
// other's rooms back (a room's row waits while an earlier one is another
// relay's: see Relay.unsentBefore), and MySQL is what bounds a drain, so
// the second one adds availability, not speed.
type drainLock struct {
	db      *sql.DB
	log     *slog.Logger
	timeout time.Duration

	name string    // the lock's name, once known: one per database
	conn *sql.Conn // the session holding the lock; nil when not held
}

// hold reports whether this relay holds the lock, taking it if it is
// free. It checks a held lock with one round trip.
func (l *drainLock) hold(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if l.conn != nil {
		var mine sql.NullBool
		err := l.conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", l.name).Scan(&mine)
		if err == nil && mine.Valid && mine.Bool {
			return true, nil
		}
		l.log.Warn("outbox relay lost its drain lock (its MySQL session ended); taking it again if free", "error", err)
		l.release()
	}
	if l.name == "" {
		var db string
		if err := l.db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&db); err != nil {
			return false, fmt.Errorf("drain lock: %w", err)
		}
		sum := sha256.Sum256([]byte(db))
		l.name = "voiceroom_outbox_relay_" + hex.EncodeToString(sum[:12]) // named locks are server-wide
	}
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("drain lock: %w", err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", l.name).Scan(&got); err != nil {
		conn.Close()
		return false, fmt.Errorf("drain lock: %w", err)
	}
	if got.Int64 != 1 {
		conn.Close()
		return false, nil
	}
	l.conn = conn
	return true, nil
}

// release gives the lock up (best effort: a session that ended holds
// nothing) and returns its connection to the pool.
func (l *drainLock) release() {
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	if _, err := l.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", l.name); err != nil && !errors.Is(err, sql.ErrConnDone) {
		l.log.Debug("outbox relay drain lock not released; its session ends with the connection", "error", err)
		// Never back to the pool holding the lock: the pool closes a
		// connection whose use reports driver.ErrBadConn.
		_ = l.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	l.conn.Close()
	l.conn = nil
}
