package regions

import (
	"errors"
	"fmt"

	"voiceroom/apperr"
)

// The sentinels below are returned as they are, so callers may test them with
// errors.Is as well as by kind with apperr.Is.
var (
	// ErrUserNotFound is returned for a user of the app without a profile
	// (who never called PUT /api/v1/users/me). Kind NotFound.
	ErrUserNotFound = apperr.New(apperr.NotFound, "user has no profile")
	// ErrRegionNotFound is returned for a region id the app does not have,
	// another app's included. Kind NotFound.
	ErrRegionNotFound = apperr.New(apperr.NotFound, "region not found")
	// ErrCountryNotFound is returned for a country code the app has not
	// configured. Kind NotFound.
	ErrCountryNotFound = apperr.New(apperr.NotFound, "country not found")
)

// errNoProfile and errRegisteredMeanwhile steer PutProfile between its update
// and registration transactions (putProfileTx); they never leave it.
var (
	// errNoProfile is returned by an update attempt for a user without a
	// profile: PutProfile retries it as a registration.
	errNoProfile = errors.New("no profile yet")
	// errRegisteredMeanwhile is returned by a registration attempt whose user
	// id was inserted by a concurrent request: PutProfile retries it as an
	// update.
	errRegisteredMeanwhile = errors.New("registered concurrently")
)

// unavailable wraps a store failure: the client sees "database unavailable"
// (UNAVAILABLE, 503), the log sees op and the cause. Callers fail closed on it.
func unavailable(op string, err error) error {
	return apperr.Wrap(apperr.Unavailable, "database unavailable", fmt.Errorf("%s: %w", op, err))
}

// alreadyExists is ALREADY_EXISTS naming the field, worded like
// apperr.Invalid ("field: message").
func alreadyExists(field, msg string) error {
	return &apperr.Error{Code: apperr.AlreadyExists, Field: field, Message: field + ": " + msg}
}
