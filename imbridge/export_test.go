package imbridge

import (
	"context"
	"errors"
	"time"

	"voiceroom/bus"
)

// Holds reports whether b holds e in its room's lane, waiting to be sent
// (tests).
func Holds(b *Bridge, e bus.Envelope) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.lanes[e.AppCode+"/"+e.RoomID]
	return l != nil && l.held[e.EventID] != nil
}

// Handle hands b one delivery as its consumer does and waits until it is
// settled (tests).
func Handle(b *Bridge, d bus.Delivery) error {
	settled := make(chan error, 1)
	b.handle(context.Background(), d, func(err error) { settled <- err })
	select {
	case err := <-settled:
		return err
	case <-time.After(30 * time.Second):
		return errors.New("not settled within 30s")
	}
}
