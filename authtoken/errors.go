package authtoken

import "errors"

var (
	// ErrExpired reports a genuine token whose exp, plus Leeway, has
	// passed.
	ErrExpired = errors.New("token expired")

	// ErrInvalid reports a token that is malformed, not signed with a key
	// that verifies it (see ErrNoKey), signed with an algorithm the key
	// does not take, without exp, or not yet valid (nbf).
	ErrInvalid = errors.New("invalid token")

	// ErrNoKey is wrapped in ErrInvalid when no usable key verifies the
	// token: its kid is missing, unknown, of another app, past its grace
	// period, or its app is disabled. Clients are never told which.
	ErrNoKey = errors.New("no usable key")

	// ErrNoAppCode reports a genuine token whose app_code is missing or
	// breaks the app_code rule.
	ErrNoAppCode = errors.New("token has no valid app_code")

	// ErrBadSubject reports a genuine token whose sub is not a positive
	// decimal user id.
	ErrBadSubject = errors.New("token sub is not a user id")
)
