package roomlist

import (
	"errors"

	"voiceroom/apperr"
)

// ErrInvalidConfig wraps every Config and constructor error.
var ErrInvalidConfig = errors.New("roomlist: invalid config")

// Errors the list query and the pin and hide routes answer; each is an
// *apperr.Error, so the HTTP edge answers it with its kind.
var (
	// errBadCursor is a cursor that is not ours, was edited, or belongs to
	// another app, region, tab or query. It never says which.
	errBadCursor = apperr.Invalid("cursor", "invalid cursor")
	// errPinNotFound is an unknown pin, or one of another app.
	errPinNotFound = apperr.New(apperr.NotFound, "pin not found")
	// errHideNotFound is an unknown hide, or one of another app.
	errHideNotFound = apperr.New(apperr.NotFound, "hide not found")
)

// errNotReady is a region whose Redis sets have not been filled from
// MySQL: the list reads MySQL and repairs them.
var errNotReady = errors.New("region not cached")

// errStorage is the message of a MySQL failure of the list query or the
// pin and hide routes (UNAVAILABLE).
const errStorage = "room list storage unavailable, try again"
