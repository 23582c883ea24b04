package imbridge

import (
	"fmt"
	"testing"
	"time"
)

// TestAcceptedRecord: ids are remembered for the window, at most max of
// them, the oldest forgotten first.
func TestAcceptedRecord(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	type step struct {
		add   string        // add this id...
		at    time.Duration // ...or look up, at t0+at
		check string
		want  bool
	}
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
	}{
		{"remembered within the window", 10, []step{
			{add: "a"}, {at: 4*time.Minute + 59*time.Second, check: "a", want: true}, {check: "b"},
		}},
		{"forgotten at the window's end", 10, []step{
			{add: "a"}, {at: 5 * time.Minute, check: "a"},
		}},
		{"the oldest forgotten at the bound", 2, []step{
			{add: "a"}, {add: "b", at: time.Second}, {add: "c", at: 2 * time.Second},
			{at: 3 * time.Second, check: "a"}, {at: 3 * time.Second, check: "b", want: true}, {at: 3 * time.Second, check: "c", want: true},
		}},
		{"added again: the later entry counts", 10, []step{
			{add: "a"}, {add: "a", at: 4 * time.Minute}, {at: 6 * time.Minute, check: "a", want: true},
			{at: 9 * time.Minute, check: "a"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAccepted(5*time.Minute, tc.max)
			for i, s := range tc.steps {
				if s.add != "" {
					a.add(s.add, t0.Add(s.at))
					continue
				}
				if got := a.has(s.check, t0.Add(s.at)); got != s.want {
					t.Fatalf("step %d: has(%q) = %v, want %v", i, s.check, got, s.want)
				}
			}
		})
	}
}

// TestAcceptedRecordStaysBounded: many ids keep the record, and its
// queue, within the bound.
func TestAcceptedRecordStaysBounded(t *testing.T) {
	a := newAccepted(5*time.Minute, 1000)
	now := time.Unix(1700000000, 0)
	for i := range 100000 {
		a.add(fmt.Sprint(i), now)
		if i%7 == 0 {
			a.add(fmt.Sprint(i), now) // the same id twice
		}
	}
	// An id added twice takes two entries: fewer ids then.
	if a.len() > 1000 || a.len() < 800 || len(a.fifo)-a.head != 1000 || len(a.fifo) > 3000 {
		t.Fatalf("%d ids, %d queued of %d", a.len(), len(a.fifo)-a.head, len(a.fifo))
	}
	if !a.has("99999", now) || a.has("98999", now) {
		t.Fatal("not the newest ids")
	}
	if a.has("99999", now.Add(5*time.Minute)) || a.len() != 0 {
		t.Fatalf("%d ids after the window", a.len())
	}
}
