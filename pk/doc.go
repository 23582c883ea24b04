// Package pk runs PK battles between two rooms of an app (issue 46,
// docs/pk.md): an invitation, its answer, the battle's clock, and its
// result, settled once.
//
// # Who owns what
//
// A battle's row in pk_battles (MySQL) is the truth of its state, its
// times and its result; pk_room_slots holds each room's one battle,
// pending or running, so that "a room is in at most one battle" is a
// primary key every process shares. The clock is Clock: any number of api
// processes run one, and each battle with something due is advanced by
// the one holding its lease (clock_owner, clock_lease_until_ms), taken
// over once it lapses, as an activity's settlement is. The timer is thus
// the row's ends_at_ms, not a goroutine: it survives the process that
// started the battle, and either room's node.
//
// A room's view shows its battle (rooms.PK) because the room's own state
// holds it: the clock (and the request that accepts or ends a battle)
// tells each room through the room command pipeline (rooms.KindPKStart,
// rooms.KindPKEnd, as rooms.PKActor), routed to the room's owner node;
// their events (RoomPKStarted, RoomPKEnded) go out through the room's
// outbox like any other. Each room is told until it has been (the
// notified bits), with a command id of the battle's, so a retry after an
// in-doubt answer finds its first run.
//
// # Scoring
//
// Scorer reads ROOM_EVENTS with a durable of its own (bus.DurablePK,
// RoomGiftSent only). A gift received in a room whose slot names a
// running battle, inside [starts_at_ms, ends_at_ms) by the event's
// occurred_at_ms, adds its value to that room's side and to its sender's
// total (pk_senders), in one transaction with a pk_seen row keyed by the
// event id (as activity_seen is the activities'): a redelivered, replayed
// or restarted event counts nothing. A delivery batch is one transaction
// (ScoreBatch), its battles locked in battle-id order, so N scorers never
// deadlock; a failed batch is retried a gift per transaction. score_seq
// counts the score changes: the gifts scored, and the totals an admin set
// (SetScore, which tells both rooms at once).
//
// The clock tells both rooms the totals (rooms.KindPKScore, event
// RoomPKScoreChanged with the absolute totals and score_seq) when
// score_seq passed what they were told: at most once a tick per battle,
// however fast gifts come, and a lost or repeated message corrects itself.
// A battle whose time is up is settled only once the scoring durable has
// passed its end (Progress: bus.DurableProgress on the durable pk), so a
// relay or consumer backlog at the end is not cut off.
//
// # Settling once
//
// A forfeit or a room closed or banned makes a running battle ending (its
// window closes now, its reason and winner are set). Settling (the
// clock's, once the scorer has passed the window's end) is one
// transaction that moves the row from running or ending to ended under
// its row lock, frees both slots and writes PKSettled (the app's webhook
// of the result) into room_outbox: however often and by whichever clock it
// is tried, the result is written once.
package pk
