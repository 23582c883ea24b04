package roomcluster

import (
	"errors"

	"voiceroom/apperr"
)

var (
	// ErrInvalidConfig is a Config that fails Validate.
	ErrInvalidConfig = errors.New("roomcluster: invalid config")
	// ErrPartitionsChanged is a node started with another P than the one
	// recorded for the deployment.
	ErrPartitionsChanged = errors.New("roomcluster: VOICEROOM_ROOMS_PARTITIONS differs from the deployment's")
	// ErrLeaseTTLChanged is a process started with another lease TTL than
	// the one recorded for the deployment.
	ErrLeaseTTLChanged = errors.New("roomcluster: VOICEROOM_ROOMS_LEASE_TTL differs from the deployment's")
	// errNoOwner is a routed request that found no node serving the
	// room's partition within its deadline (a hand-over in progress).
	errNoOwner = apperr.New(apperr.Unavailable, "the room's node is changing hands, try again")
	// errOwnerSlow is a routed request whose owner did not answer within
	// its deadline.
	errOwnerSlow = apperr.New(apperr.Unavailable, "the room's node did not answer in time, try again")
	// errOverloaded is a routed request past a node's MaxInFlight.
	errOverloaded = apperr.New(apperr.Unavailable, "rooms node overloaded, try again")
)
