package outboxrelay

import (
	"database/sql"
	"testing"
	"time"
)

// Hooks and internals for the tests of package outboxrelay_test.

const (
	ClaimSQL           = claimSQL
	PublishedWindowSQL = publishedWindowSQL
	PendingStatsSQL    = pendingStatsSQL
)

var UnsentRowsSQL = unsentRowsSQL

func SetTestHookBeforeMark(r *Relay, f func() error) { r.testHookBeforeMark = f }

func SetOnAck(m *Metrics, f func(path, eventID string, at time.Time)) { m.onAck = f }

func SanitizeError(err error, eventID, subject string) string {
	return sanitizeError(err, eventID, subject)
}

// EndSession ends the MySQL session holding r's drain lock, as its
// process's death would.
func EndSession(r *Relay) { r.lock.release() }

// DrainLockSession returns the MySQL connection id that holds the drain
// lock r takes, or 0 when no session does.
func DrainLockSession(tb testing.TB, r *Relay) int64 {
	tb.Helper()
	var id sql.NullInt64
	if err := r.db.QueryRow("SELECT IS_USED_LOCK(?)", r.lock.name).Scan(&id); err != nil {
		tb.Fatal(err)
	}
	return id.Int64
}
