package outboxrelay

import (
	"errors"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

var (
	// ErrUnknownRetryStrategy reports a RetryStrategy other than ""
	// or "fixed_interval". It stops start-up: a typo must not silently
	// change delivery semantics.
	ErrUnknownRetryStrategy = errors.New("unknown retry strategy")

	// ErrInvalidConfig reports a configuration value Validate rejects.
	ErrInvalidConfig = errors.New("invalid outbox config")

	// ErrAlreadyRunning reports a second call to Run on the same Relay or
	// FastPath.
	ErrAlreadyRunning = errors.New("already running")

	// ErrUndecodable reports an outbox row whose envelope cannot be decoded
	// or does not match its row. Such a row is never published nor
	// deleted; it stays pending with last_error starting with
	// "undecodable envelope".
	ErrUndecodable = errors.New("undecodable envelope")
)

// maxLastError bounds last_error (VARCHAR(255)) with room to spare.
const maxLastError = 200

// credentials matches the user:password part of a URL.
var credentials = regexp.MustCompile(`://[^/@\s]*@`)

// sanitizeError turns a publish or decode error into a short last_error:
// the row already names the event, so the event_id and subject are cut
// (which also lets the rows of a batch that failed alike share one
// UPDATE); URL credentials are hidden; control characters become spaces;
// the result is at most maxLastError bytes of valid UTF-8.
func sanitizeError(err error, eventID, subject string) string {
	msg := err.Error()
	if subject != "" {
		msg = strings.ReplaceAll(msg, " to "+subject, "")
	}
	if eventID != "" {
		msg = strings.ReplaceAll(msg, " "+eventID, "")
	}
	msg = credentials.ReplaceAllString(msg, "://***@")
	msg = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, msg)
	msg = strings.ToValidUTF8(msg, "?")
	if len(msg) > maxLastError {
		cut := maxLastError
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	return msg
}
