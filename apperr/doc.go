// Package apperr defines the error kinds every layer of voiceroom speaks: a
// domain package returns an *Error with a Code, and the HTTP edge (gateway)
// maps that Code to the envelope code and status in one table. Domain code
// never imports the HTTP layer; it only needs this package.
//
// Any error that is not an *Error (a driver error, a timeout) is INTERNAL at
// the edge unless a package wraps it with a kind first, for example
// apperr.Wrap(apperr.Unavailable, "database unavailable", err).
//
// ConfigError is the other error every layer shares: what a component's
// Config.Validate returns, naming the Go field at fault, so that
// cmd/voiceroom reports it under the environment variable that set it.
package apperr
