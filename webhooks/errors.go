package webhooks

import "errors"

var (
	// ErrInvalidConfig wraps every Config and constructor error.
	ErrInvalidConfig = errors.New("webhooks: invalid config")

	// ErrAddressNotAllowed reports a URL whose host is, or resolves to, a
	// loopback, private, link-local or otherwise internal address while
	// Policy.AllowPrivate is off, at creation or when a delivery dials it.
	ErrAddressNotAllowed = errors.New("address not allowed")

	// ErrSealedSecret reports a stored signing secret that does not open
	// with the configured key (another key, or a damaged row).
	ErrSealedSecret = errors.New("sealed webhook secret does not open")

	// errShutdown settles what the sink still holds when it stops: the
	// events are redelivered to the next holder of the lease.
	errShutdown = errors.New("webhooks: shutting down")

	// errReconnected ends a tenure whose connection to NATS was lost and
	// made again (see worker.reconnected).
	errReconnected = errors.New("webhooks: the connection to NATS was lost and made again; a new tenure starts")
)
