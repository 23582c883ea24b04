package listprojector

import (
	"errors"

	"voiceroom/apperr"
)

// ErrInvalidConfig wraps every Config and constructor error.
var ErrInvalidConfig = errors.New("listprojector: invalid config")

// Errors the list query and the pin routes answer; each is an
// *apperr.Error, so the HTTP edge answers it with its kind.
var (
	// errBadCursor is a cursor that is not ours, was edited, or belongs to
	// another app, region, tab or query. It never says which.
	errBadCursor = apperr.Invalid("cursor", "invalid cursor")
	// errRoomNotFound is a pin of a room the app does not have.
	errRoomNotFound = apperr.New(apperr.NotFound, "room not found")
	// errPinNotFound is an unknown pin, or one of another app.
	errPinNotFound = apperr.New(apperr.NotFound, "pin not found")
	// errHideNotFound is an unknown hide, or one of another app.
	errHideNotFound = apperr.New(apperr.NotFound, "hide not found")
)

// errStorage is the message of a MySQL failure of the list query or the
// pin routes (UNAVAILABLE).
const errStorage = "room list storage unavailable, try again"
