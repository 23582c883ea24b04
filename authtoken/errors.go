package authtoken

import "errors"

var (
	// ErrExpired reports a token whose exp, plus Leeway, has passed.
	ErrExpired = errors.New("token expired")

	// ErrInvalid reports a token that is malformed, not signed with the
	// secret, signed with another algorithm than HS256, without exp, or
	// not yet valid (nbf).
	ErrInvalid = errors.New("invalid token")

	// ErrNoAppCode reports a genuine token whose app_code is missing or
	// breaks the app_code rule.
	ErrNoAppCode = errors.New("token has no valid app_code")

	// ErrBadSubject reports a genuine token whose sub is not a positive
	// decimal user id.
	ErrBadSubject = errors.New("token sub is not a user id")
)
