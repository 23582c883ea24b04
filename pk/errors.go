package pk

import "voiceroom/apperr"

var (
	// errNotFound is a battle unknown in the caller's app.
	errNotFound = apperr.New(apperr.NotFound, "battle not found")
	// errExpired is an answer to an invitation past its 30 s.
	errExpired = apperr.New(apperr.FailedPrecondition, "the invitation expired")
	// errNoPowers is a member without the host's powers in the room.
	errNoPowers = apperr.New(apperr.PermissionDenied, "only the room's owner, host or a room admin may do this")
)
