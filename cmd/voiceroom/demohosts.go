package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// demoMembers is a page of GET .../members.
type demoMembers struct {
	Members []struct {
		UserID    int64  `json:"user_id"`
		Role      string `json:"role"`
		SeatIndex int    `json:"seat_index"`
		SeatMuted bool   `json:"seat_muted"`
	} `json:"members"`
	OnlineCount int    `json:"online_count"`
	NextCursor  string `json:"next_cursor"`
}

// stepHosts is the hosts' tools in SG's room, where SG's owner is on seat
// 0, MY's user on seat 1 and SA's user present: MY's user is named a room
// admin and sets the notice, seats go to apply mode, SA's user asks for a
// seat and the admin approves, the admin mutes that seat, and the member
// list is read a page at a time.
func (d *demoRun) stepHosts(ctx context.Context) error {
	room := d.sg.room
	owner, admin, listener := d.sg.demoActor, d.my.demoActor, d.sa.demoActor
	d.say("the owner names a room admin, who may then do what the host does while in the room:")
	err := d.c.call(ctx, http.MethodPost, roomPath(room, "/admins"), owner, map[string]any{"user_id": admin.userID}, &d.sg.room)
	if d.skipped(err, "the hosts' tools") {
		return nil
	}
	if err != nil {
		return err
	}
	notice := "Be kind. Ask for a seat, the hosts approve."
	if err := d.c.call(ctx, http.MethodPatch, roomPath(room, ""), admin, map[string]any{"notice": notice}, &d.sg.room); err != nil {
		return err
	}
	if err := d.c.call(ctx, http.MethodPost, roomPath(room, "/mic/mode"), owner, map[string]any{"seat_mode": "apply"}, &d.sg.room); err != nil {
		return err
	}
	var admins []string
	for _, id := range d.sg.room.AdminUserIDs {
		admins = append(admins, d.name(id))
	}
	d.say("-> admins [%s], notice %q, seat_mode %s", strings.Join(admins, " "), d.sg.room.Notice, d.sg.room.SeatMode)

	d.say("in apply mode a listener's mic/up is refused; they ask for a seat, and the admin approves:")
	err = d.c.call(ctx, http.MethodPost, roomPath(room, "/mic/up"), listener, map[string]any{"seat_index": 2}, nil)
	if !isCode(err, "FAILED_PRECONDITION") {
		return fmt.Errorf("mic/up in apply mode: want FAILED_PRECONDITION, got %v", err)
	}
	d.say("-> %s", refusal(err))
	if err := d.c.call(ctx, http.MethodPost, roomPath(room, "/mic/requests"), listener, map[string]any{"seat_index": 2}, nil); err != nil {
		return err
	}
	var queue struct {
		Requests []struct {
			UserID    int64 `json:"user_id"`
			SeatIndex int   `json:"seat_index"`
		} `json:"requests"`
	}
	if err := d.c.call(ctx, http.MethodGet, roomPath(room, "/mic/requests"), admin, nil, &queue); err != nil {
		return err
	}
	for _, r := range queue.Requests {
		d.say("-> waiting: %s for seat %d", d.name(r.UserID), r.SeatIndex)
	}
	if err := d.c.call(ctx, http.MethodPost, roomPath(room, "/mic/requests/"+itoa(listener.userID)+"/approve"), admin, nil, &d.sg.room); err != nil {
		return err
	}

	d.say("the admin mutes seat 2; its speaker cannot lift the host's mute:")
	mute := func(who demoActor, muted bool) error {
		return d.c.call(ctx, http.MethodPost, roomPath(room, "/mic/mute"), who, map[string]any{"seat_index": 2, "muted": muted}, &d.sg.room)
	}
	if err := mute(admin, true); err != nil {
		return err
	}
	err = mute(listener, false)
	if !isCode(err, "PERMISSION_DENIED") {
		return fmt.Errorf("a speaker lifting the host's mute: want PERMISSION_DENIED, got %v", err)
	}
	d.say("-> %s", refusal(err))
	d.showRoom(d.sg.room)

	d.say("the member list, two a page: seated first, then the owner, host and admins, then everyone else:")
	path := roomPath(room, "/members?limit=2")
	for page := 1; ; page++ {
		var p demoMembers
		if err := d.c.call(ctx, http.MethodGet, path, listener, nil, &p); err != nil {
			return err
		}
		var shown []string
		for _, m := range p.Members {
			s := fmt.Sprintf("%s (%s", d.name(m.UserID), m.Role)
			if m.SeatIndex >= 0 {
				s += fmt.Sprintf(", seat %d", m.SeatIndex)
			}
			if m.SeatMuted {
				s += ", seat muted"
			}
			shown = append(shown, s+")")
		}
		d.say("-> page %d: %s; %d online", page, strings.Join(shown, ", "), p.OnlineCount)
		if p.NextCursor == "" || page >= 10 {
			break
		}
		path = roomPath(room, "/members?limit=2&cursor="+p.NextCursor)
	}
	return nil
}
