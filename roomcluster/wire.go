package roomcluster

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"voiceroom/apperr"
	"voiceroom/rooms"
)

// Endpoints of a node's micro service (version 2): each is
// <SubjectPrefix>.<node id>.<op>.
const (
	// opExecute runs a room command: the request's body is the
	// rooms.Command's JSON, as is, and the caller's deadline travels in
	// the header timeoutHeader.
	opExecute = "execute"
	opView    = "view"  // the room's view (GET /api/v1/rooms/{id})
	opGuard   = "guard" // the IM join-group callback's membership check
	// opMicRequests is the room's queue of requests to speak (GET
	// /api/v1/rooms/{id}/mic/requests), for the host's powers.
	opMicRequests = "mic_requests"
	// opCommand is version 1's endpoint of every command, still answered
	// so that the api processes of the previous release route to new
	// rooms nodes during an upgrade (legacy.go).
	opCommand = "command"
)

// ops are every endpoint of a node's micro service.
var ops = []string{opExecute, opView, opGuard, opMicRequests, opCommand}

// timeoutHeader carries what is left of an execute request's deadline,
// in milliseconds.
const timeoutHeader = "Voiceroom-Timeout-Ms"

// readMicRequests names the read of opMicRequests in a read's body
// (version 1 told the reads apart by it; version 2 by the endpoint, and
// still sends it, so that the reads of either version reach the other).
const readMicRequests = "mic_requests"

// routed is one request a router sends to a room's owner: a command, or a
// live read.
type routed interface {
	// op is the endpoint it goes to.
	op() string
	// partition is the partition its room belongs to among n.
	partition(n int) int
	// run is what the owner does with it: a plain call of svc.
	run(ctx context.Context, svc rooms.Rooms) (reply, error)
	// message is it as a NATS request's body and header, with timeoutMs
	// left of its deadline.
	message(timeoutMs int64) ([]byte, nats.Header, error)
	// mayHaveRun marks it, after an attempt timed out, as one its owner
	// may have run already (a command: its id is then looked up in the
	// room's command log before it runs again).
	mayHaveRun()
	// decode reads the owner's reply to it.
	decode(data []byte) (reply, error)
}

// execute is a room command.
type execute struct{ cmd *rooms.Command }

func (e execute) op() string          { return opExecute }
func (e execute) partition(n int) int { return Partition(e.cmd.AppCode, e.cmd.RoomID, n) }
func (e execute) mayHaveRun()         { e.cmd.ClientKey = true }

func (e execute) run(ctx context.Context, svc rooms.Rooms) (reply, error) {
	res, err := svc.Execute(ctx, e.cmd)
	if err != nil {
		return reply{}, err
	}
	rep := reply{Replayed: res.Replayed, Epoch: res.Epoch}
	if !e.cmd.NoView {
		rep.View = &res.View
	}
	return rep, nil
}

// decode reads the reply; the view stays JSON when the command asked
// for it so (rooms.Command.ViewJSON).
func (e execute) decode(data []byte) (reply, error) {
	if !e.cmd.ViewJSON {
		return decodeReply(data)
	}
	var raw struct {
		reply
		View json.RawMessage `json:"view,omitempty"` // hides reply.View
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return reply{}, err
	}
	raw.reply.viewJSON = raw.View
	return raw.reply, nil
}

func decodeReply(data []byte) (reply, error) {
	var rep reply
	err := json.Unmarshal(data, &rep)
	return rep, err
}

func (e execute) message(timeoutMs int64) ([]byte, nats.Header, error) {
	data, err := encodeCommand(e.cmd)
	return data, nats.Header{timeoutHeader: []string{strconv.FormatInt(timeoutMs, 10)}}, err
}

// read is a live read: the view, the queue of requests to speak or the
// guard's check. Its JSON is version 1's.
type read struct {
	endpoint string
	AppCode  string      `json:"app"`
	RoomID   string      `json:"room,omitempty"`
	Actor    rooms.Actor `json:"actor"`
	GroupID  string      `json:"group,omitempty"`
	Read     string      `json:"read,omitempty"`
	UserID   int64       `json:"user,omitempty"`
	// TimeoutMs is what is left of the caller's deadline.
	TimeoutMs int64 `json:"t"`
}

func (r *read) op() string                        { return r.endpoint }
func (r *read) decode(data []byte) (reply, error) { return decodeReply(data) }
func (r *read) mayHaveRun()                       {}

func (r *read) partition(n int) int {
	if r.endpoint == opGuard {
		return PartitionOfGroup(r.GroupID, n)
	}
	return Partition(r.AppCode, r.RoomID, n)
}

func (r *read) run(ctx context.Context, svc rooms.Rooms) (reply, error) {
	switch r.endpoint {
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
	v, err := svc.Get(ctx, r.AppCode, r.RoomID)
	if err != nil {
		return reply{}, err
	}
	return reply{View: &v}, nil
}

func (r *read) message(timeoutMs int64) ([]byte, nats.Header, error) {
	r.TimeoutMs = timeoutMs
	data, err := json.Marshal(r)
	return data, nil, err
}

// reply is the owner's answer (the same in versions 1 and 2).
type reply struct {
	View     *rooms.View `json:"view,omitempty"`
	Replayed bool        `json:"replayed,omitempty"`
	Epoch    uint64      `json:"epoch,omitempty"`
	Node     string      `json:"node"`
	Err      *wireError  `json:"err,omitempty"`
	// Requests answers opMicRequests (never nil then).
	Requests []rooms.MicRequest `json:"requests,omitempty"`
	// The guard's answer.
	GuardApp string `json:"gapp,omitempty"`
	Found    bool   `json:"found,omitempty"`
	Present  bool   `json:"present,omitempty"`
	// viewJSON is the view as the owner encoded it, read in place of
	// View for a command that asked for it (rooms.Command.ViewJSON).
	viewJSON json.RawMessage
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

// millis is a request's time left as a duration: at least a millisecond.
func millis(ms int64) time.Duration { return max(time.Duration(ms)*time.Millisecond, time.Millisecond) }
