package bus

import (
	"context"
	"errors"
)

var (
	// ErrInvalidSubjectToken reports a subject token (app_code, room_id,
	// event_type, durable name) that is empty, longer than 128 bytes, not
	// valid UTF-8, or contains '.', '*', '>', whitespace or a control
	// character. Errors wrapping it name the field.
	ErrInvalidSubjectToken = errors.New("invalid subject token")

	// ErrInvalidEnvelope reports an envelope that fails Validate or cannot
	// be decoded.
	ErrInvalidEnvelope = errors.New("invalid envelope")

	// ErrInvalidMessage reports a Message that cannot be published: a
	// subject outside room.events, an empty ID or empty data.
	ErrInvalidMessage = errors.New("invalid message")

	// ErrInvalidConfig reports a configuration value that Validate rejects.
	ErrInvalidConfig = errors.New("invalid config")

	// ErrAddrInUse reports that the embedded server's listen address is
	// already taken by another process.
	ErrAddrInUse = errors.New("address already in use")

	// ErrNotReady reports that the embedded server did not become ready
	// for connections within its ReadyTimeout.
	ErrNotReady = errors.New("nats server not ready")

	// ErrNotConnected reports a connection that is currently down (it keeps
	// reconnecting in the background).
	ErrNotConnected = errors.New("nats not connected")

	// ErrUnknownSink reports a sink name that is not one of the DLQ's
	// durables.
	ErrUnknownSink = errors.New("unknown sink")

	// ErrInvalidQuery reports a dead-letter query or replay the DLQ
	// refuses: a negative limit, a bad app code, too many sequences.
	ErrInvalidQuery = errors.New("invalid dead-letter query")

	// ErrAlreadyRunning reports a second call to Consumer.Run.
	ErrAlreadyRunning = errors.New("consumer already running")
)

// errorsIsContext reports whether err comes from a context ending.
func errorsIsContext(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
