package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"voiceroom/apperr"
)

// statusOf is the one table from error kind to HTTP status (the "Errors"
// paragraph of docs/openapi.yaml's description).
var statusOf = map[apperr.Code]int{
	apperr.InvalidArgument:     http.StatusBadRequest,
	apperr.Unauthenticated:     http.StatusUnauthorized,
	apperr.PermissionDenied:    http.StatusForbidden,
	apperr.NotFound:            http.StatusNotFound,
	apperr.AlreadyExists:       http.StatusConflict,
	apperr.FailedPrecondition:  http.StatusConflict,
	apperr.InsufficientBalance: http.StatusPaymentRequired,
	apperr.RateLimited:         http.StatusTooManyRequests,
	apperr.Unavailable:         http.StatusServiceUnavailable,
	apperr.Internal:            http.StatusInternalServerError,
	apperr.RequestTimeout:      http.StatusRequestTimeout,
}

// fromFiber turns Fiber's and fasthttp's own errors (unknown route, body too
// large, header too large...) into kinds, so they too get the envelope.
func fromFiber(err *fiber.Error) *apperr.Error {
	switch err.Code {
	case fiber.StatusNotFound:
		return apperr.New(apperr.NotFound, "route not found")
	case fiber.StatusMethodNotAllowed:
		return apperr.New(apperr.InvalidArgument, "method not allowed")
	case fiber.StatusRequestEntityTooLarge:
		return apperr.New(apperr.InvalidArgument, "request body too large")
	case fiber.StatusRequestHeaderFieldsTooLarge:
		return apperr.New(apperr.InvalidArgument, "request headers too large")
	case fiber.StatusRequestTimeout:
		// fasthttp's read timeout: the client was too slow to send its
		// request, or opened a connection and sent nothing. Not bad input
		// and not the server failing: HTTP's own 408, which browsers and
		// HTTP client libraries recognise on a connection they had not
		// used yet and retry on a new one. (An idle keep-alive connection,
		// past IdleTimeout, is closed without any answer.)
		return apperr.New(apperr.RequestTimeout, "request not received in time")
	case fiber.StatusBadGateway:
		// Fiber's name for a network error while reading the request (a
		// connection reset by the client): the client's side, not a
		// server failure to log and count as a 500.
		return apperr.New(apperr.InvalidArgument, "request could not be read")
	case fiber.StatusUnauthorized:
		return apperr.New(apperr.Unauthenticated, "unauthenticated")
	case fiber.StatusTooManyRequests:
		return apperr.New(apperr.RateLimited, "too many requests")
	}
	if err.Code >= 400 && err.Code < 500 {
		return apperr.New(apperr.InvalidArgument, "bad request")
	}
	return apperr.Wrap(apperr.Internal, "internal error", err)
}

// kindOf returns the *apperr.Error an error handler answers with.
func kindOf(err error) *apperr.Error {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return ae
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return fromFiber(fe)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// The request's deadline passed in code that did not name a kind.
		return apperr.Wrap(apperr.Unavailable, "request timed out, try again", err)
	}
	return apperr.Wrap(apperr.Internal, "internal error", err)
}

// httpStatus returns the status of a kind; an unknown kind is a 500.
func httpStatus(code apperr.Code) int {
	if s, ok := statusOf[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}
