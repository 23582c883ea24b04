package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
)

// The hosts mix (MixHosts): a user in a room and its room's host (the
// owner, who acts from anywhere) take turns through the hosts' tools. A
// user in a room heartbeats (30 %), leaves (8 %), is the subject of a
// change of the room's information (8 %), of a chat mute or its lift
// (8 %) or of being named or removed as a room admin (4 %); else (42 %),
// off a seat, it asks to speak (40 %), is invited to a seat (40 %) or
// takes one (20 %); on a seat, it mutes or unmutes itself, its host mutes
// or unmutes its seat, or it leaves the seat (a third each). A request to
// speak is answered by the host on the user's next turn (approved onto a
// random seat, or, one in four, rejected; one in eight the user cancels
// first), an invitation by the user (accepted, or, one in four or after a
// failed accept, declined). mic_up and mic_down are today's seat commands,
// measured in the same run.
const (
	hHeartbeat = 30
	hLeave     = 8
	hInfo      = 8
	hChatMute  = 8
	hAdmin     = 4
)

// hostsState is what the hosts mix believes of a user beyond its room
// and seat. Rooms are indexes into world.rooms, -1 for none.
type hostsState struct {
	requested    bool
	invited      bool
	invitedSeat  int
	acceptFailed bool
	selfMuted    bool
	// mutedRoom and mutedSeat are the seat the host muted under the user:
	// the mute stays on the seat, so it is lifted there.
	mutedRoom, mutedSeat int
	chatMutedIn          int
	adminIn              int
	infoChanges          int
}

func newHostsState() hostsState {
	return hostsState{invitedSeat: -1, mutedRoom: -1, mutedSeat: -1, chatMutedIn: -1, adminIn: -1}
}

// hostsStep is step for MixHosts, for a user in a room.
func (b *Bench) hostsStep(ctx context.Context, w *world, u *user, rng *rand.Rand) (string, answer) {
	h := &u.hosts
	rm := w.rooms[u.room]
	path := "/api/v1/rooms/" + rm.id
	uid := fmt.Sprint(u.id)
	do := func(method, p, token string, body map[string]any) answer {
		return b.http.do(ctx, method, path+p, token, body)
	}
	hostDo := func(room int, method, p string, body map[string]any) answer {
		r := w.rooms[room]
		return b.http.do(ctx, method, "/api/v1/rooms/"+r.id+p, r.hostToken, body)
	}

	// A request or an invitation is answered first.
	switch {
	case h.requested && rng.IntN(8) == 0:
		a := do(http.MethodDelete, "/mic/requests", u.token, map[string]any{})
		h.requested = false
		return "mic_cancel", a
	case h.requested && rng.IntN(4) == 0:
		a := do(http.MethodPost, "/mic/requests/"+uid+"/reject", rm.hostToken, map[string]any{})
		h.requested = false
		return "mic_reject", a
	case h.requested:
		seat := rng.IntN(seats)
		a := do(http.MethodPost, "/mic/requests/"+uid+"/approve", rm.hostToken, map[string]any{"seat_index": seat})
		switch {
		case a.code == "":
			h.requested, u.seat, h.selfMuted = false, seat, false
		case strings.Contains(a.message, "no request"):
			h.requested = false
		}
		return "mic_approve", a
	case h.invited && (h.acceptFailed || rng.IntN(4) == 0):
		a := do(http.MethodPost, "/mic/invitations/decline", u.token, map[string]any{})
		h.invited, h.acceptFailed = false, false
		return "mic_decline", a
	case h.invited:
		a := do(http.MethodPost, "/mic/invitations/accept", u.token, map[string]any{})
		if a.code == "" {
			h.invited, u.seat, h.selfMuted = false, h.invitedSeat, false
		} else {
			h.acceptFailed = true
		}
		return "mic_accept", a
	}

	var op string
	var a answer
	switch r := rng.IntN(100); {
	case r < hHeartbeat:
		op, a = "heartbeat", do(http.MethodPost, "/heartbeat", u.token, map[string]any{})
	case r < hHeartbeat+hLeave:
		op, a = "leave", do(http.MethodPost, "/leave", u.token, map[string]any{})
		if a.code == "" {
			// The room drops the leaver's request to speak and invitation.
			u.room, u.seat = -1, -1
			h.requested, h.invited = false, false
		}
	case r < hHeartbeat+hLeave+hInfo:
		h.infoChanges++
		body := map[string]any{"notice": fmt.Sprintf("Welcome, %d: be kind", u.id+int64(h.infoChanges))}
		if h.infoChanges%2 == 0 {
			body = map[string]any{"room_name": fmt.Sprintf("bench room %s #%d", rm.shortID, h.infoChanges)}
		}
		op, a = "room_info", do(http.MethodPatch, "", rm.hostToken, body)
	case r < hHeartbeat+hLeave+hInfo+hChatMute:
		op = "chat_mute"
		if h.chatMutedIn >= 0 {
			if a = hostDo(h.chatMutedIn, http.MethodPost, "/chat/mute", map[string]any{"user_id": u.id, "seconds": 0}); a.code == "" {
				h.chatMutedIn = -1
			}
		} else if a = do(http.MethodPost, "/chat/mute", rm.hostToken, map[string]any{"user_id": u.id, "seconds": 60}); a.code == "" {
			h.chatMutedIn = u.room
		}
	case r < hHeartbeat+hLeave+hInfo+hChatMute+hAdmin:
		if h.adminIn >= 0 {
			op, a = "admin_remove", hostDo(h.adminIn, http.MethodDelete, "/admins/"+uid, nil)
			if a.code == "" {
				h.adminIn = -1
			}
		} else {
			op, a = "admin_add", do(http.MethodPost, "/admins", rm.hostToken, map[string]any{"user_id": u.id})
			if a.code == "" {
				h.adminIn = u.room
			}
		}
	case u.seat < 0:
		seat := rng.IntN(seats)
		switch r := rng.IntN(10); {
		case r < 4:
			op, a = "mic_request", do(http.MethodPost, "/mic/requests", u.token, map[string]any{})
			h.requested = a.code == ""
		case r < 8:
			op, a = "mic_invite", do(http.MethodPost, "/mic/invitations", rm.hostToken, map[string]any{"user_id": u.id, "seat_index": seat})
			if a.code == "" {
				h.invited, h.invitedSeat, h.acceptFailed = true, seat, false
			}
		default:
			op, a = "mic_up", do(http.MethodPost, "/mic/up", u.token, map[string]any{"seat_index": seat})
			if a.code == "" {
				u.seat, h.selfMuted = seat, false
			}
		}
	default:
		switch rng.IntN(3) {
		case 0:
			op, a = "self_mute", do(http.MethodPost, "/mic/self-mute", u.token, map[string]any{"muted": !h.selfMuted})
			if a.code == "" {
				h.selfMuted = !h.selfMuted
			}
		case 1:
			op = "seat_mute"
			if h.mutedRoom >= 0 {
				a = hostDo(h.mutedRoom, http.MethodPost, "/mic/mute", map[string]any{"seat_index": h.mutedSeat, "muted": false})
				if a.code == "" {
					h.mutedRoom, h.mutedSeat = -1, -1
				}
			} else if a = do(http.MethodPost, "/mic/mute", rm.hostToken, map[string]any{"seat_index": u.seat, "muted": true}); a.code == "" {
				h.mutedRoom, h.mutedSeat = u.room, u.seat
			}
		default:
			op, a = "mic_down", do(http.MethodPost, "/mic/down", u.token, map[string]any{})
			if a.code == "" {
				u.seat = -1
			}
		}
	}
	return op, a
}
