package imbridge

import (
	"testing"

	"voiceroom/bus"
)

// TestSettledEventsLeaveTheLane checks that a lane, which lives on idle
// until forgotten, keeps none of the events it settled: neither in its
// queue's array (each item keeps its envelope and, through done, the
// delivery's message) nor in held.
func TestSettledEventsLeaveTheLane(t *testing.T) {
	b := &Bridge{}
	l := &lane{held: map[string]*item{}}
	for _, id := range []string{"e1", "e2", "e3"} {
		it := &item{env: bus.Envelope{EventID: id}, done: func(error) {}}
		l.queue = append(l.queue, it)
		l.held[id] = it
	}
	queue := l.queue
	if done := b.takeLocked(l, 2); len(done) != 2 || done[0].env.EventID != "e1" || done[1].env.EventID != "e2" {
		t.Fatalf("took %v, want e1 and e2", done)
	}
	if queue[0] != nil || queue[1] != nil {
		t.Errorf("the queue's array still holds the settled events: %v", queue[:2])
	}
	if len(l.queue) != 1 || l.queue[0].env.EventID != "e3" || len(l.held) != 1 {
		t.Errorf("queue %v, held %v: want e3 alone", l.queue, l.held)
	}
	b.takeLocked(l, 1)
	if l.queue != nil || queue[2] != nil || len(l.held) != 0 {
		t.Errorf("queue %v (array %v), held %v: want nothing kept", l.queue, queue, l.held)
	}
}
