package rooms

import "context"

// Rooms is the room surface, declared once: the room commands, all run by
// Execute, and the live reads of a room. *Service implements it where the
// rooms are held; roomcluster.Router implements it by handing each call to
// the rooms node that owns the room (in process when that is its own);
// the HTTP edge (gateway) and the IM callback's guard call one or the
// other. A new command is a Kind, its rules (rules.go), what prepare
// resolves for it (service.go) and the route that builds it: nothing of
// this surface or of the router changes.
type Rooms interface {
	// Execute runs one command (Command has its fields), a CreateRoom
	// included, and answers the room after it. A command's kind is set
	// by its caller; kinds that only the service issues itself
	// (SweepStale) are refused.
	Execute(ctx context.Context, cmd *Command) (Result, error)
	// Get is a room's view.
	Get(ctx context.Context, appCode, roomID string) (View, error)
	// MicRequests is a room's queue of requests to speak, for actor when
	// they hold the host's powers (else PERMISSION_DENIED).
	MicRequests(ctx context.Context, appCode, roomID string, actor Actor) ([]MicRequest, error)
	// IMGroupMember is the IM join-group callback's check: whether userID
	// is present in the room with IM GroupId groupID, and that room's app.
	IMGroupMember(groupID string, userID int64) (appCode string, found, present bool)
}

// RecordKeeper is the room data any process serves without a room's cell
// (*Records, *Service): the gift catalog's writes and the audit trail.
type RecordKeeper interface {
	UpsertGift(ctx context.Context, appCode string, g Gift) error
	Audit(ctx context.Context, appCode, roomID string, limit int, cursor string) (AuditPage, error)
}

var (
	_ Rooms        = (*Service)(nil)
	_ RecordKeeper = (*Service)(nil)
	_ RecordKeeper = (*Records)(nil)
)
