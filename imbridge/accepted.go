package imbridge

import "time"

// accepted remembers the event ids one Tencent application accepted in
// its last window (Tencent's duplicate window, 5 minutes), so that an
// event the consumer delivers again (its ack was lost, say when the
// server restarted) is acked without being shown again: a redelivered
// event would otherwise be grouped into a message of another Random,
// which Tencent's duplicate check does not drop.
//
// It holds at most max ids. At the bound the oldest id is forgotten before
// its window ends; should that event come again it is sent again, and
// shown twice if it lands in a message of another Random (clients
// de-duplicate by event_id). Callers serialise access (Bridge.mu).
type accepted struct {
	window time.Duration
	max    int
	seq    map[string]uint64 // event id -> its entry's seq
	fifo   []acceptedEntry   // oldest first, from head
	head   int
	next   uint64
}

type acceptedEntry struct {
	id  string
	at  int64 // unix nanoseconds
	seq uint64
}

func newAccepted(window time.Duration, max int) *accepted {
	return &accepted{window: window, max: max, seq: map[string]uint64{}}
}

// has reports whether id was accepted within the window before now.
func (a *accepted) has(id string, now time.Time) bool {
	a.expire(now)
	_, ok := a.seq[id]
	return ok
}

// add records that Tencent accepted id at now.
func (a *accepted) add(id string, now time.Time) {
	a.expire(now)
	a.next++
	a.seq[id] = a.next
	a.fifo = append(a.fifo, acceptedEntry{id: id, at: now.UnixNano(), seq: a.next})
	for len(a.fifo)-a.head > a.max {
		a.pop()
	}
}

// len is how many ids are remembered.
func (a *accepted) len() int { return len(a.seq) }

// expire forgets the ids accepted a window or more before now.
func (a *accepted) expire(now time.Time) {
	cut := now.Add(-a.window).UnixNano()
	for a.head < len(a.fifo) && a.fifo[a.head].at <= cut {
		a.pop()
	}
}

// pop forgets the oldest entry, and compacts the fifo once half of it is
// spent.
func (a *accepted) pop() {
	e := a.fifo[a.head]
	a.fifo[a.head] = acceptedEntry{}
	a.head++
	if a.seq[e.id] == e.seq {
		delete(a.seq, e.id)
	}
	if a.head >= 1024 && a.head*2 >= len(a.fifo) {
		a.fifo = append([]acceptedEntry(nil), a.fifo[a.head:]...)
		a.head = 0
	}
}
