package outboxrelay

import "testing"

// TestRunLength: a statement of in-flight ops takes ops of one kind, at
// most the batch, and does not split a unit (the ops settled together, so
// a command's rows of one room_version) unless the unit alone fills it.
func TestRunLength(t *testing.T) {
	repend := func(start bool) groupOp { return groupOp{unitStart: start} }
	release := func(start bool) groupOp { return groupOp{release: true, unitStart: start} }
	for _, tc := range []struct {
		name  string
		q     []groupOp
		limit int
		want  int
	}{
		{"one op", []groupOp{repend(true)}, 4, 1},
		{"kinds split runs", []groupOp{repend(true), repend(false), release(false), repend(true)}, 4, 2},
		{"units that fit share a run", []groupOp{repend(true), repend(true), repend(false), repend(true)}, 4, 4},
		{"a unit crossing the limit waits for the next run",
			[]groupOp{repend(true), repend(false), repend(true), repend(false), repend(false)}, 4, 2},
		{"a unit that fills the run alone is cut", []groupOp{repend(true), repend(false), repend(false), repend(false), repend(false)}, 4, 4},
		{"the limit at a unit's start", []groupOp{repend(true), repend(false), repend(true), repend(false), repend(true)}, 4, 4},
		{"the limit before a release", []groupOp{repend(true), repend(false), repend(true), repend(false), release(false)}, 4, 4},
	} {
		if got := runLength(tc.q, tc.limit); got != tc.want {
			t.Errorf("%s: runLength = %d, want %d", tc.name, got, tc.want)
		}
	}
}
