package apperr

import (
	"errors"
	"fmt"
)

// Code is an error kind. Its string is the envelope code clients see.
type Code string

// The error kinds of the HTTP contract (docs/openapi.yaml, schema Envelope's
// code).
const (
	InvalidArgument     Code = "INVALID_ARGUMENT"
	Unauthenticated     Code = "UNAUTHENTICATED"
	PermissionDenied    Code = "PERMISSION_DENIED"
	NotFound            Code = "NOT_FOUND"
	AlreadyExists       Code = "ALREADY_EXISTS"
	FailedPrecondition  Code = "FAILED_PRECONDITION"
	InsufficientBalance Code = "INSUFFICIENT_BALANCE"
	RateLimited         Code = "RATE_LIMITED"
	Unavailable         Code = "UNAVAILABLE"
	Internal            Code = "INTERNAL"
	// RequestTimeout is answered by the HTTP server itself, never by a
	// handler: the client did not send a complete request within the
	// server's read timeout (HTTP 408, after which the server closes the
	// connection). Clients retry on a new connection.
	RequestTimeout Code = "REQUEST_TIMEOUT"
)

// Error is an error with a kind and a message that is safe to show a client.
// Field names the offending input field, when there is one. Details, when
// set, is shown to the client as the envelope's data (for example the room a
// user already owns). Err, when set, is the underlying cause: it is logged,
// never shown.
type Error struct {
	Code    Code
	Message string
	Field   string
	Details any
	Err     error
}

// Error implements error. The cause is included so logs carry it; clients are
// shown only Message (see MessageOf).
func (e *Error) Error() string {
	msg := string(e.Code) + ": " + e.Message
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error of kind code with a formatted client-safe message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an INVALID_ARGUMENT error naming field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: InvalidArgument, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error of kind code whose cause is err. The message is shown
// to clients; err is not.
func Wrap(code Code, message string, err error) *Error {
	return &Error{Code: code, Message: message, Err: err}
}

// WithDetails returns a copy of e that shows details to the client.
func (e *Error) WithDetails(details any) *Error {
	c := *e
	c.Details = details
	return &c
}

// CodeOf returns the kind of err: the Code of the first *Error in its chain,
// INTERNAL for any other non-nil error, and "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// MessageOf returns the client-safe message of err. Errors that are not an
// *Error get a generic message so that no internal detail leaks.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// FieldOf returns the field an *Error names, or "".
func FieldOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

// Is reports whether err is of kind code.
func Is(err error, code Code) bool { return err != nil && CodeOf(err) == code }
