package roomevent

import "strconv"

// Event types.
const (
	RoomCreated              = "RoomCreated"
	RoomUserJoined           = "RoomUserJoined"
	RoomUserLeft             = "RoomUserLeft"
	RoomMicUp                = "RoomMicUp"
	RoomMicDown              = "RoomMicDown"
	RoomMicChanged           = "RoomMicChanged"
	RoomSeatLockChanged      = "RoomSeatLockChanged"
	RoomHostTransferred      = "RoomHostTransferred"
	RoomGiftSent             = "RoomGiftSent"
	RoomHeatChanged          = "RoomHeatChanged"
	RoomRankChanged          = "RoomRankChanged"
	RoomPasswordChanged      = "RoomPasswordChanged"
	RoomUserKicked           = "RoomUserKicked"
	RoomClosed               = "RoomClosed"
	RoomVisibleRegionChanged = "RoomVisibleRegionChanged"
	RoomBanned               = "RoomBanned"
	RoomRestored             = "RoomRestored"

	// Hosts' tools (roles, seats, requests to speak, invitations, room
	// information, chat mute).
	RoomAdminAdded            = "RoomAdminAdded"
	RoomAdminRemoved          = "RoomAdminRemoved"
	RoomSeatMuteChanged       = "RoomSeatMuteChanged"
	RoomSelfMuteChanged       = "RoomSelfMuteChanged"
	RoomSeatModeChanged       = "RoomSeatModeChanged"
	RoomMicRequested          = "RoomMicRequested"
	RoomMicRequestCancelled   = "RoomMicRequestCancelled"
	RoomMicRequestApproved    = "RoomMicRequestApproved"
	RoomMicRequestRejected    = "RoomMicRequestRejected"
	RoomMicInvited            = "RoomMicInvited"
	RoomMicInvitationAccepted = "RoomMicInvitationAccepted"
	RoomMicInvitationDeclined = "RoomMicInvitationDeclined"
	RoomInfoChanged           = "RoomInfoChanged"
	RoomChatMuted             = "RoomChatMuted"

	// Activities' results (package activity). They are not a room's: their
	// room_id is the activity's pseudo room (ActivityRoomID), their
	// room_version its own sequence, and their payload has no card.
	ActivityRewarded = "ActivityRewarded"
	ActivitySettled  = "ActivitySettled"

	// PK battles between two rooms (package pk): each room's start and
	// end of its battle, and the battle's settled result, which is not a
	// room's (its room_id is the battle's pseudo room, PKRoomID).
	RoomPKStarted      = "RoomPKStarted"
	RoomPKScoreChanged = "RoomPKScoreChanged"
	RoomPKEnded        = "RoomPKEnded"
	PKSettled          = "PKSettled"
)

// PKRoomIDPrefix begins the pseudo room id of a battle's result.
const PKRoomIDPrefix = "pk-"

// PKRoomID is the room_id of battle id's result, "pk-<battle_id>" (a room
// id is "<app_code>_<uuid>", so the two never meet).
func PKRoomID(battleID string) string { return PKRoomIDPrefix + battleID }

// PK battle end reasons (PKEnded.Reason, PKResult.Reason).
const (
	PKReasonTimeUp     = "time_up"
	PKReasonForfeit    = "forfeit"
	PKReasonRoomClosed = "room_closed"
)

// PK battle outcomes as one room sees them (PKEnded.Result).
const (
	PKWin  = "win"
	PKLose = "lose"
	PKDraw = "draw"
)

// ActivityRoomIDPrefix begins the pseudo room id of an activity's events.
const ActivityRoomIDPrefix = "activity-"

// ActivityRoomID is the room_id of activity id's events, "activity-<id>":
// one ordered sequence per activity on room.events.<app>.activity-<id>.<type>.
func ActivityRoomID(id int64) string { return ActivityRoomIDPrefix + strconv.FormatInt(id, 10) }

// IMAction is what the Tencent IM bridge does with an event type.
type IMAction int

const (
	// IMSkip: nothing for clients to see; acked without a call.
	IMSkip IMAction = iota
	// IMCreateGroup: create the room's group.
	IMCreateGroup
	// IMMessage: a custom group message carrying the event.
	IMMessage
	// IMCloseGroup: the message, then destroy the group.
	IMCloseGroup
	// IMMuteChat: apply the chat mute in the room's group (Tencent's
	// forbid_send_msg, MuteTime 0 lifts it), then the message.
	IMMuteChat
)

// Spec says what each sink does with one event type. The room list
// projector needs no entry: every event carries the room's card, and the
// list applies the newest card of a room whatever the type.
type Spec struct {
	// Type is the event type.
	Type string
	// IM is the Tencent IM bridge's action.
	IM IMAction
	// IMHigh sends the message with MsgPriority High (a batch holding one
	// such event is High): seat and role changes, kicks, closes and bans,
	// which clients must not lose to Tencent's rate limiting of Normal
	// messages.
	IMHigh bool
	// NoRoom: the event is not a room's (an activity's result): its payload
	// carries no card and the room sinks (Tencent IM, the room list, the
	// ranks) ack it without doing anything. Webhooks deliver it.
	NoRoom bool
	// body makes a new value of the type's body (nil: none).
	body func() any
}

// NewBody returns a pointer to a new value of the body of event type t, to
// decode a payload into; nil for a type without a body or an unknown type.
func NewBody(t string) any {
	if s, ok := specOf[t]; ok && s.body != nil {
		return s.body()
	}
	return nil
}

func body[T any]() func() any { return func() any { return new(T) } }

// specs lists every event type the rooms package emits, in a fixed order.
var specs = []Spec{
	{Type: RoomCreated, IM: IMCreateGroup},
	{Type: RoomUserJoined, IM: IMMessage, body: body[UserJoined]()},
	{Type: RoomUserLeft, IM: IMMessage, body: body[UserLeft]()},
	{Type: RoomMicUp, IM: IMMessage, IMHigh: true, body: body[MicMoved]()},
	{Type: RoomMicDown, IM: IMMessage, IMHigh: true, body: body[MicMoved]()},
	{Type: RoomMicChanged, IM: IMMessage, IMHigh: true, body: body[MicChanged]()},
	{Type: RoomSeatLockChanged, IM: IMMessage, IMHigh: true, body: body[SeatLockChanged]()},
	{Type: RoomHostTransferred, IM: IMMessage, IMHigh: true, body: body[HostTransferred]()},
	{Type: RoomGiftSent, IM: IMMessage, body: body[GiftSent]()},
	{Type: RoomHeatChanged, IM: IMSkip, body: body[HeatChanged]()},
	{Type: RoomRankChanged, IM: IMSkip, body: body[RankChanged]()},
	{Type: RoomPasswordChanged, IM: IMMessage, body: body[PasswordChanged]()},
	{Type: RoomUserKicked, IM: IMMessage, IMHigh: true, body: body[UserKicked]()},
	{Type: RoomClosed, IM: IMCloseGroup, IMHigh: true, body: body[Closed]()},
	{Type: RoomVisibleRegionChanged, IM: IMSkip, body: body[VisibleRegionChanged]()},
	// A ban can be undone: the group stays.
	{Type: RoomBanned, IM: IMMessage, IMHigh: true, body: body[Moderated]()},
	{Type: RoomRestored, IM: IMMessage, IMHigh: true, body: body[Moderated]()},
	{Type: RoomAdminAdded, IM: IMMessage, IMHigh: true, body: body[AdminChanged]()},
	{Type: RoomAdminRemoved, IM: IMMessage, IMHigh: true, body: body[AdminChanged]()},
	{Type: RoomSeatMuteChanged, IM: IMMessage, IMHigh: true, body: body[SeatMuteChanged]()},
	{Type: RoomSelfMuteChanged, IM: IMMessage, IMHigh: true, body: body[SelfMuteChanged]()},
	{Type: RoomSeatModeChanged, IM: IMMessage, IMHigh: true, body: body[SeatModeChanged]()},
	{Type: RoomMicRequested, IM: IMMessage, IMHigh: true, body: body[MicRequested]()},
	{Type: RoomMicRequestCancelled, IM: IMMessage, IMHigh: true, body: body[MicRequestEnded]()},
	{Type: RoomMicRequestApproved, IM: IMMessage, IMHigh: true, body: body[MicRequestEnded]()},
	{Type: RoomMicRequestRejected, IM: IMMessage, IMHigh: true, body: body[MicRequestEnded]()},
	{Type: RoomMicInvited, IM: IMMessage, IMHigh: true, body: body[MicInvited]()},
	{Type: RoomMicInvitationAccepted, IM: IMMessage, IMHigh: true, body: body[MicInvitationEnded]()},
	{Type: RoomMicInvitationDeclined, IM: IMMessage, IMHigh: true, body: body[MicInvitationEnded]()},
	{Type: RoomInfoChanged, IM: IMMessage, body: body[InfoChanged]()},
	{Type: RoomChatMuted, IM: IMMuteChat, IMHigh: true, body: body[ChatMuted]()},
	{Type: ActivityRewarded, IM: IMSkip, NoRoom: true, body: body[Rewarded]()},
	{Type: ActivitySettled, IM: IMSkip, NoRoom: true, body: body[ActivityResult]()},
	{Type: RoomPKStarted, IM: IMMessage, IMHigh: true, body: body[PKStarted]()},
	{Type: RoomPKScoreChanged, IM: IMMessage, body: body[PKScore]()},
	{Type: RoomPKEnded, IM: IMMessage, IMHigh: true, body: body[PKEnded]()},
	{Type: PKSettled, IM: IMSkip, NoRoom: true, body: body[PKResult]()},
}

var specOf = func() map[string]Spec {
	m := make(map[string]Spec, len(specs))
	for _, s := range specs {
		m[s.Type] = s
	}
	return m
}()

// Lookup returns the Spec of event type t; ok is false for a type this
// version does not know (a newer producer's), which sinks count and skip.
func Lookup(t string) (s Spec, ok bool) {
	s, ok = specOf[t]
	return s, ok
}

// Types returns every known event type, in a fixed order.
func Types() []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Type
	}
	return out
}
