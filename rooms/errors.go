package rooms

import "voiceroom/apperr"

// Errors of the rooms package. Each is an *apperr.Error, so the HTTP edge
// answers it with its kind.
var (
	// errRoomNotFound is an unknown room, or one of another app_code: the
	// two are never told apart.
	errRoomNotFound = apperr.New(apperr.NotFound, "room not found")
	// errOwnerHasRoom is a second CreateRoom by an owner with an active
	// room; the service adds the room's id.
	errOwnerHasRoom = apperr.New(apperr.AlreadyExists, "you already own an active room")
	// errFenced is a command whose version another writer took first: the
	// cell's state was stale (another process owns the room, or the log
	// moved under it). The cell is dropped and reloads on the next command.
	errFenced = apperr.New(apperr.Unavailable, "room state changed elsewhere, try again")
	// errInDoubt is a command whose deadline passed while its write was
	// under way, or whose COMMIT went unanswered: it may or may not have
	// committed. The cell is dropped, so the room reloads from what MySQL
	// holds, and a retry with the same Idempotency-Key finds the answer if
	// the write committed.
	errInDoubt = apperr.New(apperr.Unavailable, "room storage did not answer in time, try again")
	// errInsufficientBalance is a gift the sender cannot pay for.
	errInsufficientBalance = apperr.New(apperr.InsufficientBalance, "not enough coins for this gift")
	// errNoProfile is a user without a profile creating a room.
	errNoProfile = apperr.New(apperr.FailedPrecondition, "set your profile first (PUT /api/v1/users/me)")
	// errRoomClosed is any command on a closed room.
	errRoomClosed = apperr.New(apperr.FailedPrecondition, "room is closed")
	// errRoomBanned is a command a banned room refuses (a join, a seat, a
	// gift...): only an admin's restore, close or region change apply.
	errRoomBanned = apperr.New(apperr.FailedPrecondition, "room is banned")
	// errBannedClose is the owner closing a banned room: only an admin may,
	// so that closing cannot free the owner's one room from a ban.
	errBannedClose = apperr.New(apperr.FailedPrecondition, "room is banned: only an admin may close it")
	// errShuttingDown is a command that arrives after the service stopped.
	errShuttingDown = apperr.New(apperr.Unavailable, "shutting down, try again")
)
