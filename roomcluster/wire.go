package roomcluster

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"voiceroom/apperr"
	"voiceroom/rooms"
)

// Operations a router asks of a room's owner; each is one endpoint of the
// node's micro service.
const (
	opCommand = "command" // every room command (its kind in the request)
	opView    = "view"    // the room's view (GET /api/v1/rooms/{id})
	opGuard   = "guard"   // the IM join-group callback's membership check
	// opMicRequests is the room's queue of requests to speak (GET
	// /api/v1/rooms/{id}/mic/requests), for the host's powers.
	opMicRequests = "mic_requests"
)

// ops are every endpoint of a node's micro service.
var ops = []string{opCommand, opView, opGuard, opMicRequests}

// Live reads other than the view: a request's Read.
const readMicRequests = "mic_requests"

// Command variants carried by opCommand: which Rooms method runs it.
const (
	callCreate       = "create"
	callExecute      = "execute"
	callJoin         = "join"
	callSetPassword  = "set_password"
	callSendGift     = "send_gift"
	callChangeRegion = "change_region"
	callClose        = "close"
	callBan          = "ban"
	callRestore      = "restore"
)

// request is a routed call as it travels over NATS: JSON, one per
// request message. The cluster's NATS is trusted (a join's password
// travels in it to the owner, who checks it against the room's hash):
// run it with TLS between machines.
type request struct {
	Call      string               `json:"call,omitempty"`
	AppCode   string               `json:"app"`
	RoomID    string               `json:"room,omitempty"`
	CommandID string               `json:"cid,omitempty"`
	ClientKey bool                 `json:"ck,omitempty"`
	RequestID string               `json:"rid,omitempty"`
	Kind      rooms.Kind           `json:"kind,omitempty"`
	Actor     rooms.Actor          `json:"actor"`
	Args      rooms.Args           `json:"args"`
	Password  string               `json:"pw,omitempty"`
	GiftID    int64                `json:"gift,omitempty"`
	RegionID  int64                `json:"region,omitempty"`
	Reason    string               `json:"reason,omitempty"`
	Create    *rooms.CreateRequest `json:"create,omitempty"`
	GroupID   string               `json:"group,omitempty"`
	// Read names a live read other than the view (readMicRequests), by
	// Actor; "" with no Call is the view.
	Read   string `json:"read,omitempty"`
	UserID int64  `json:"user,omitempty"`
	// TimeoutMs is what is left of the caller's deadline.
	TimeoutMs int64 `json:"t"`
}

// reply is the owner's answer.
type reply struct {
	View     *rooms.View `json:"view,omitempty"`
	Replayed bool        `json:"replayed,omitempty"`
	Epoch    uint64      `json:"epoch,omitempty"`
	Node     string      `json:"node"`
	Err      *wireError  `json:"err,omitempty"`
	// Requests answers readMicRequests (never nil then).
	Requests []rooms.MicRequest `json:"requests,omitempty"`
	// The guard's answer.
	GuardApp string `json:"gapp,omitempty"`
	Found    bool   `json:"found,omitempty"`
	Present  bool   `json:"present,omitempty"`
}

// wireError is an *apperr.Error in transit; NotServing marks
// rooms.ErrNotServing, which the router answers by asking again.
type wireError struct {
	Code       apperr.Code     `json:"code"`
	Message    string          `json:"message"`
	Field      string          `json:"field,omitempty"`
	Details    json.RawMessage `json:"details,omitempty"`
	NotServing bool            `json:"not_serving,omitempty"`
}

func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	if rooms.IsNotServing(err) {
		return &wireError{Code: apperr.Unavailable, Message: err.Error(), NotServing: true}
	}
	var ae *apperr.Error
	if !errors.As(err, &ae) {
		return &wireError{Code: apperr.Internal, Message: "internal error"}
	}
	w := &wireError{Code: ae.Code, Message: ae.Message, Field: ae.Field}
	if ae.Details != nil {
		w.Details, _ = json.Marshal(ae.Details) // details are JSON-ready by contract
	}
	return w
}

func (w *wireError) err() error {
	if w.NotServing {
		return rooms.ErrNotServing
	}
	e := &apperr.Error{Code: w.Code, Message: w.Message, Field: w.Field}
	if len(w.Details) > 0 {
		e.Details = w.Details
	}
	return e
}

// run executes r on svc: what a node does with a routed request, and what
// a router does in process when its own node owns the room.
func (r *request) run(ctx context.Context, svc Rooms) (reply, error) {
	switch r.opOf() {
	case opView:
		v, err := svc.Get(ctx, r.AppCode, r.RoomID)
		if err != nil {
			return reply{}, err
		}
		return reply{View: &v}, nil
	case opGuard:
		app, found, present := svc.IMGroupMember(r.GroupID, r.UserID)
		return reply{GuardApp: app, Found: found, Present: present}, nil
	case opMicRequests:
		reqs, err := svc.MicRequests(ctx, r.AppCode, r.RoomID, r.Actor)
		if err != nil {
			return reply{}, err
		}
		return reply{Requests: reqs}, nil
	}
	cmd := &rooms.Command{Kind: r.Kind, AppCode: r.AppCode, RoomID: r.RoomID, CommandID: r.CommandID, ClientKey: r.ClientKey,
		RequestID: r.RequestID, Actor: r.Actor, Args: r.Args}
	var res rooms.Result
	var err error
	switch r.Call {
	case callCreate:
		if r.Create == nil {
			return reply{}, apperr.New(apperr.InvalidArgument, "create request missing")
		}
		res, err = svc.Create(ctx, r.AppCode, r.Actor, r.CommandID, r.ClientKey, r.RequestID, *r.Create)
	case callExecute:
		res, err = svc.Execute(ctx, cmd)
	case callJoin:
		res, err = svc.Join(ctx, cmd, r.Password)
	case callSetPassword:
		res, err = svc.SetPassword(ctx, cmd, r.Password)
	case callSendGift:
		res, err = svc.SendGift(ctx, cmd, r.GiftID)
	case callChangeRegion:
		res, err = svc.ChangeVisibleRegion(ctx, cmd, r.RegionID, r.Reason)
	case callClose:
		res, err = svc.CloseRoom(ctx, cmd, r.Reason)
	case callBan:
		res, err = svc.Ban(ctx, cmd, r.Reason)
	case callRestore:
		res, err = svc.Restore(ctx, cmd, r.Reason)
	default:
		return reply{}, apperr.New(apperr.InvalidArgument, "unknown call %q", r.Call)
	}
	if err != nil {
		return reply{}, err
	}
	return reply{View: &res.View, Replayed: res.Replayed, Epoch: res.Epoch}, nil
}

// opOf is the endpoint r goes to.
func (r *request) opOf() string {
	switch {
	case r.GroupID != "":
		return opGuard
	case r.Call == "" && r.Read == readMicRequests:
		return opMicRequests
	case r.Call == "":
		return opView
	}
	return opCommand
}

// partition is the partition r's room belongs to among n.
func (r *request) partition(n int) int {
	if r.GroupID != "" {
		return PartitionOfGroup(r.GroupID, n)
	}
	return Partition(r.AppCode, r.RoomID, n)
}

func (r *request) timeout() time.Duration { return time.Duration(r.TimeoutMs) * time.Millisecond }
