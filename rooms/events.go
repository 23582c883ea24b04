package rooms

// Event is one event a command emits. Its payload on the bus is Body's
// fields plus "room": the room's Card after the command.
type Event struct {
	Type string
	Body any
}

// empty is the body of events with nothing beyond the card.
type empty struct{}
