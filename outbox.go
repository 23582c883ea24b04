package voiceroom

// OutboxRow is one row of room_outbox: one event of a committed room
// command. The rooms package writes it in the command's own transaction
// (pending, no retries); the outbox fast path and relay (package
// outboxrelay) publish its Envelope to ROOM_EVENTS with Nats-Msg-Id =
// EventID and mark it published. The row and its group are the contract
// between the two sides (the rooms package's FastPath interface speaks of
// them), so they live here; the SQL that writes and reads the rows is
// outboxrelay's (outboxrelay.AddRows, outboxrelay.PendingCond).
type OutboxRow struct {
	// ID is assigned by MySQL on insert; relays claim rows in ID order.
	ID          int64
	AppCode     string
	EventID     string // the envelope's event_id, unique per row
	RoomID      string
	RoomVersion int64
	EventType   string
	// Envelope is the bus.Envelope JSON, published byte for byte. Its
	// event_id, app_code, room_id, event_type and room_version equal the
	// row's columns.
	Envelope []byte
	// Status is OutboxPending or OutboxPublished.
	Status string
	// RetryCount is the number of failed publishes so far.
	RetryCount int
	// CreatedAtMs is the commit time of the command.
	CreatedAtMs int64
}

// The values of room_outbox.status.
const (
	OutboxPending   = "pending"
	OutboxPublished = "published"
)

// OutboxGroup is the id range of one group commit's outbox rows, written
// in flight (outboxrelay.AddRows); the zero OutboxGroup means the rows
// were written pending, one by one.
type OutboxGroup struct {
	FirstID, LastID int64
}

// InFlight reports whether g names an in-flight group.
func (g OutboxGroup) InFlight() bool { return g.FirstID > 0 }

// Rows is the number of rows g covers.
func (g OutboxGroup) Rows() int { return int(g.LastID - g.FirstID + 1) }
