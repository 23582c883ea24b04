package outboxrelay

import "time"

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
