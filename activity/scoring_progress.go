package activity

import "context"

// ScoringProgress says how far the scoring durable has got: settlement
// freezes an activity only once every event committed before its end has
// been scored, so that a relay backlog at the deadline is not cut off.
// bus.DurableProgress is one.
type ScoringProgress interface {
	// Passed reports whether every event of appCode committed (its
	// occurred_at_ms) at or before atMs has been handled by the scoring
	// durable. A false answer is asked again later; an error too.
	Passed(ctx context.Context, appCode string, atMs int64) (bool, error)
}
