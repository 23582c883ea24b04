// Package imbridge delivers room events to Tencent Cloud IM and guards who
// may join a room's IM group. Its stand-in for Tencent IM, for development
// and tests, is package imemu.
//
// # Guarantees
//
// Delivery is at least once, and no event is ever dropped because of a
// retry count. The [Bridge] reads the durable consumer "imbridge" on
// ROOM_EVENTS and acks an event only once Tencent IM has accepted the
// message that carries it (or once the event is known to need no call).
//
//   - A retryable failure (a transport error, a timeout, an HTTP status
//     other than 200, a retryable ErrorCode, a message Tencent dropped with
//     MsgDropReason) is retried forever, every second (the outbox spec's
//     fixed interval; Config.RetryDelays, VOICEROOM_IMBRIDGE_BACKOFF, takes
//     a backoff list instead, each delay at most 5 min). The
//     bridge holds the room's events meanwhile (the consumer keeps telling
//     the server they are in progress) rather than nakking them, so later
//     events of the room cannot overtake them; the durable has no delivery
//     limit (MaxDeliver -1), so a restart cannot turn retries into a dead
//     letter either.
//   - A permanent failure (see [Permanent]) dead-letters the event into
//     ROOM_EVENTS_DLQ with Tencent's code and reason, and the room's later
//     events carry on. A refused batch is first split, so only the
//     offending event is dead-lettered.
//   - Order: events of one room are sent in room order (stream order); a
//     room's next message waits for the previous one. This holds across a
//     lost NATS connection (a JetStream restart, a network cut): events
//     the server sent into the dead connection are read back from the
//     stream and sent before the room's later events, without waiting for
//     the durable's ack wait (package bus, "Order per room across a
//     reconnect"; the fault suite checks each room's order at the
//     emulator). It needs one bridge process on the durable: with several,
//     a room's events are spread over them.
//   - No event is shown twice by a retry: a message's Random is derived
//     from its event ids, and a retried message is the same message (same
//     events, same Random, same bytes), so Tencent's 5-minute duplicate
//     check drops a repeat whose first attempt did arrive.
//   - No event is shown twice by a redelivery while the bridge process
//     lives. The server delivers an event again when its ack was lost
//     (acks are fire-and-forget; a JetStream restart loses those in
//     flight) or when it stopped hearing that the event is in progress;
//     grouped into another message, with another Random, Tencent would
//     show it again. So the bridge remembers, per Tencent application, the
//     ids of the events Tencent accepted in the last
//     Config.AcceptedWindow (5 minutes, Tencent's window) and acks such an
//     event without a call; an event delivered again while the bridge
//     still holds it is settled together with the delivery it holds. Both
//     count as outcome "duplicate". The record is bounded
//     (Config.AcceptedEvents per application): at the bound the oldest ids
//     are forgotten early, and such an event, delivered again, may be
//     shown again. Every process also writes the accepted ids, in the
//     background, to the JetStream key-value bucket AcceptedBucket (TTL
//     Config.AcceptedWindow, the replicas of ROOM_EVENTS) as plain
//     publishes on the keys' subjects, not waiting for acks, and looks a
//     redelivered event (NumDelivered > 1) its own record lacks up there
//     before sending it: a restarted bridge, or another instance on the
//     durable, acks an event Tencent accepted from elsewhere without a
//     call. That shared record is best effort: a write is lost when the
//     process dies in the milliseconds after Tencent accepted (a graceful
//     stop writes what is queued and waits up to 2 s for the server to
//     have it), when its queue is full, or while the bucket is
//     unreachable (a failed lookup sends the event).
//     Such an event, and one whose call had an unknown outcome, may be
//     grouped differently and shown again; clients de-duplicate by
//     event_id.
//   - Limits: at most Config.CallsPerSecond calls per API per Tencent
//     application (Tencent allows 200) and Config.GroupMessagesPerSecond
//     messages per group (Tencent drops above 40). The bridge waits for a
//     token; it never drops.
//   - Shutdown: the consumer stops fetching, calls in flight finish (each
//     bounded by the call timeout) and their events are settled; events
//     not yet sent are released for redelivery.
//   - With no Tencent application configured, [Bridge.Run] logs that once
//     and does not consume: events wait in the durable (within the
//     stream's retention) and their count shows in
//     voiceroom_bus_consumer_pending{consumer="imbridge"} and the nats
//     CLI.
//
// # Events and messages
//
// RoomCreated creates the room's AVChatRoom group (GroupId = the room's
// im_group_id, see roomevent.IMGroupID; "already exists" is success). Events
// clients show become one send_group_msg with a TIMCustomElem whose Desc
// is the event type and whose Data is the event JSON (event_id,
// event_type, room_id, room_version, occurred_at_ms, payload); a message
// for a group that is missing (10010) creates the group first. RoomClosed
// is sent, then the group destroyed. RoomChatMuted first sets the user's
// mute in the group with forbid_send_msg (Members_Account the user id in
// decimal, the account the bridge names users by everywhere; MuteTime the
// seconds left until the event's until_ms at that call, rounded up, 0 to
// lift it or when it is already over), then its message is sent: a
// message starts with a RoomChatMuted or holds none, so the events before
// it are shown first. A mute that fails is retried or dead-lettered like
// a message, holding the room's later events; a dead-lettered one is not
// shown. What each type becomes, and which go
// with MsgPriority High, is the event contract's (roomevent.Spec): types
// whose IM action is IMSkip (RoomHeatChanged, RoomRankChanged,
// RoomVisibleRegionChanged) and unknown types are acked without a call and
// counted as skipped; events delivered again (see above) are acked
// without a call and counted as duplicate.
//
// When a room's events come faster than the limits let through, the
// events that waited go together: Data = {"events":[...]} in room order,
// Desc = "RoomEventBatch", the whole request within 12 KB
// ([MaxMessageBytes]). A message is built only once its tokens are in
// hand, so the longer a room waits, the more one call carries.
//
// # The join-group guard
//
// [Guard] answers Group.CallbackBeforeApplyJoinGroup (POST /im/callback,
// mounted by gateway): it allows a join only when Requestor_Account is
// present in the room of GroupId, as the rooms of this process know from
// memory (rooms.Service.IMGroupMember): JoinRoom succeeded and the user
// has not left, been kicked or been swept. When the application has a
// callback token it checks Sign = hex(sha256(token + RequestTime)) and
// refuses a RequestTime further than GuardConfig.MaxSkew from now. It
// reads memory only: microseconds, far inside Tencent's 2 s.
package imbridge
