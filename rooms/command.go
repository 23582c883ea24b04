package rooms

import "encoding/json"

// Kind names a command. It is stored in the command log.
type Kind string

// The room commands.
const (
	KindCreateRoom              Kind = "CreateRoom"
	KindJoinRoom                Kind = "JoinRoom"
	KindLeaveRoom               Kind = "LeaveRoom"
	KindHeartbeat               Kind = "Heartbeat"
	KindMicUp                   Kind = "MicUp"
	KindMicDown                 Kind = "MicDown"
	KindChangeMicSeat           Kind = "ChangeMicSeat"
	KindSetSeatLock             Kind = "SetSeatLock"
	KindTransferRoomHost        Kind = "TransferRoomHost"
	KindSendGift                Kind = "SendGift"
	KindSetRoomPassword         Kind = "SetRoomPassword"
	KindKickUser                Kind = "KickUser"
	KindCloseRoom               Kind = "CloseRoom"
	KindChangeRoomVisibleRegion Kind = "ChangeRoomVisibleRegion"
	KindSweepStale              Kind = "SweepStale"

	// Hosts' tools: roles, seats, requests to speak, invitations, the
	// room's information and chat mute.
	KindAddRoomAdmin         Kind = "AddRoomAdmin"
	KindRemoveRoomAdmin      Kind = "RemoveRoomAdmin"
	KindMuteSeat             Kind = "MuteSeat"
	KindSelfMute             Kind = "SelfMute"
	KindSetSeatMode          Kind = "SetSeatMode"
	KindRequestMic           Kind = "RequestMic"
	KindCancelMicRequest     Kind = "CancelMicRequest"
	KindApproveMicRequest    Kind = "ApproveMicRequest"
	KindRejectMicRequest     Kind = "RejectMicRequest"
	KindInviteToMic          Kind = "InviteToMic"
	KindAcceptMicInvitation  Kind = "AcceptMicInvitation"
	KindDeclineMicInvitation Kind = "DeclineMicInvitation"
	KindUpdateRoomInfo       Kind = "UpdateRoomInfo"
	KindMuteChat             Kind = "MuteChat"
)

// Actor is who issues a command. AppCode and UserID come from the token.
type Actor struct {
	UserID int64 `json:"user_id,omitempty"`
	// Admin is an operator acting through /admin routes (or the system,
	// for the presence sweeper).
	Admin bool `json:"admin,omitempty"`
	// Operator names an admin in audit rows and events.
	Operator string `json:"operator,omitempty"`
}

// Command is one request to change a room: the whole of what its caller
// sends, and what a router ships, as its JSON, to the rooms node that owns
// the room. The caller sets Kind, the room, the ids, the actor, Args and,
// for JoinRoom and SetRoomPassword, Password. The service fills NowMs and
// the resolved inputs (the creator's short id and region, gift price,
// password hashes) before applying it, and logs its projection (kind,
// actor, NowMs and Args: never Password), so replaying the log applies
// every command exactly as it was applied the first time.
type Command struct {
	Kind      Kind   `json:"kind"`
	AppCode   string `json:"app"`
	RoomID    string `json:"room,omitempty"`
	CommandID string `json:"cid,omitempty"`
	// ClientKey is true when CommandID came from the client's
	// Idempotency-Key: only then can it repeat, so only then is the log
	// searched for it.
	ClientKey bool   `json:"ck,omitempty"`
	RequestID string `json:"rid,omitempty"`
	Actor     Actor  `json:"actor"`
	NowMs     int64  `json:"now_ms,omitempty"`
	Args      Args   `json:"args"`
	// Password is JoinRoom's password, checked against the room's hash,
	// or SetRoomPassword's new one ("" unlocks). It is an input only: the
	// service turns it into Args.PasswordHash and never logs it. It
	// travels to the room's owner in the routed command (the cluster's
	// NATS is trusted: run it with TLS between machines).
	Password string `json:"pw,omitempty"`
	// NoView is true when the caller answers without the room's view
	// (the HTTP edge's leave and heartbeat): a rooms node that runs the
	// command for a router then replies without it. An input only, like
	// Password; the service's own Result still holds the view.
	NoView bool `json:"nv,omitempty"`
	// ViewJSON is true when the caller only writes the room's view out
	// as JSON (the HTTP edge): a router then hands back the view as the
	// owner encoded it (Result.ViewJSON) instead of decoding it. Never
	// sent; the service's own Result holds the view as ever.
	ViewJSON bool `json:"-"`
}

// logged is what the command log stores of a command: the kind, the
// actor, the clock and the arguments, with the inputs resolved. The room,
// the ids and the transient inputs (Password) are not part of it.
type logged struct {
	Kind  Kind  `json:"kind"`
	Actor Actor `json:"actor"`
	NowMs int64 `json:"now_ms"`
	Args  Args  `json:"args"`
}

// logEntry is cmd's entry in the command log.
func (c *Command) logEntry() ([]byte, error) {
	return json.Marshal(logged{Kind: c.Kind, Actor: c.Actor, NowMs: c.NowMs, Args: c.Args})
}

// Args are the arguments of all commands; each kind reads its own.
type Args struct {
	// CreateRoom
	Title       string `json:"title,omitempty"`
	CoverURL    string `json:"cover_url,omitempty"`
	Description string `json:"description,omitempty"`
	Mode        string `json:"mode,omitempty"`
	SeatCount   int    `json:"seat_count,omitempty"`
	ShortID     string `json:"room_short_id,omitempty"`
	// RegionID is the new visible region (ChangeRoomVisibleRegion, given
	// by the caller) or the creator's region (CreateRoom, resolved by the
	// service, like ShortID).
	RegionID int64 `json:"region_id,omitempty"`

	// MicUp, ChangeMicSeat, SetSeatLock, MuteSeat; RequestMic,
	// ApproveMicRequest and InviteToMic, where AnySeat (-1) lets the room
	// pick the lowest free seat.
	SeatIndex int  `json:"seat_index,omitempty"`
	Locked    bool `json:"locked,omitempty"`
	// MuteSeat, SelfMute
	Muted bool `json:"muted,omitempty"`
	// SetSeatMode, and CreateRoom's seat mode ("" is free).
	SeatMode string `json:"seat_mode,omitempty"`
	// RequestMic, InviteToMic: when the request or invitation lapses, set
	// by the service from its configuration before the command applies.
	ExpiresAtMs int64 `json:"expires_at_ms,omitempty"`
	// UpdateRoomInfo: the fields to change (nil: unchanged), checked by the
	// service.
	Info *RoomInfo `json:"info,omitempty"`
	// MuteChat: how long (0 lifts the mute).
	MuteSeconds int64 `json:"mute_seconds,omitempty"`

	// TransferRoomHost, KickUser, SendGift (the receiver), AddRoomAdmin,
	// RemoveRoomAdmin, ApproveMicRequest, RejectMicRequest, InviteToMic,
	// MuteChat
	TargetUserID int64 `json:"target_user_id,omitempty"`
	BanSeconds   int64 `json:"ban_seconds,omitempty"`

	// SendGift: GiftID and Count from the caller; the catalog entry's
	// name, price and heat resolved by the service when the command was
	// issued.
	GiftID   int64  `json:"gift_id,omitempty"`
	GiftName string `json:"gift_name,omitempty"`
	Count    int64  `json:"count,omitempty"`
	Price    int64  `json:"price,omitempty"`
	HeatPer  int64  `json:"heat_per,omitempty"`

	// PasswordHash is the new bcrypt hash (SetRoomPassword; "" unlocks) or,
	// for JoinRoom, the hash the given password was verified against ("" if
	// none was verified): resolved by the service from Command.Password.
	// Never a password.
	PasswordHash string `json:"password_hash,omitempty"`
	// PasswordGiven is true when a JoinRoom came with a password, right or
	// wrong (only accepted commands are logged, so never a wrong one there).
	PasswordGiven bool `json:"password_given,omitempty"`

	// Reason is an operator's reason: required (1..256 characters) for
	// ChangeRoomVisibleRegion, BanRoom and RestoreRoom, optional for
	// CloseRoom (an admin's close records it in the audit trail). Other
	// kinds carry none.
	Reason string `json:"reason,omitempty"`

	// PKStart, PKEnd (pk.go): the battle as the room sees it.
	PK *PKArgs `json:"pk,omitempty"`

	// SweepStale: the users whose heartbeats stopped.
	UserIDs []int64 `json:"user_ids,omitempty"`
}

// AnySeat as a SeatIndex lets the room pick the lowest free seat.
const AnySeat = -1

// RoomInfo is UpdateRoomInfo's change: the fields given, the rest nil.
type RoomInfo struct {
	Title       *string `json:"title,omitempty"`
	Notice      *string `json:"notice,omitempty"`
	CoverURL    *string `json:"cover_url,omitempty"`
	Description *string `json:"description,omitempty"`
}
