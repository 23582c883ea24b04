// Package roomevent is the room event's contract: the one definition that
// the rooms package emits and every sink (the Tencent IM bridge, the room
// list projector, any later consumer) decodes.
//
// It owns:
//   - the event types (the last token of an event's subject
//     room.events.<app_code>.<room_id>.<event_type>) and, per type, what
//     each sink does with it (Spec);
//   - the room card every event carries (Card), what a room list shows of
//     it (Listing), and the room statuses;
//   - the bodies of the events, and the payload encoding: a payload is the
//     body's fields plus "room", the room's Card after the command;
//   - the room's Tencent IM GroupId (IMGroupID).
//
// The wire form is pinned by golden files (testdata/): renaming a Go field
// cannot change what is in the stream, the outbox, Redis or MySQL without a
// failing test. Sinks must ignore fields they do not know, so producers may
// add fields; removing or renaming one is a breaking change for every
// consumer of ROOM_EVENTS.
//
// The package depends on the standard library and internal/plainjson (the
// reflection-free reader and writer of the card's JSON, itself standard
// library alone), and holds no I/O.
package roomevent
