package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// undoStack holds what the demo must undo (pins, hides, bans, open rooms),
// newest last. A step that undoes something itself marks it done.
type undoStack struct {
	keys []string
	fns  map[string]func(context.Context) error
}

func (u *undoStack) push(key string, fn func(context.Context) error) {
	if u.fns == nil {
		u.fns = map[string]func(context.Context) error{}
	}
	u.keys = append(u.keys, key)
	u.fns[key] = fn
}

func (u *undoStack) done(key string) {
	u.keys = slices.DeleteFunc(u.keys, func(k string) bool { return k == key })
	delete(u.fns, key)
}

// run undoes what is left, newest first, on a context that outlives an
// interrupt by a bound. It answers the first failure.
func (u *undoStack) run(ctx context.Context, out io.Writer) error {
	if len(u.keys) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	fmt.Fprintln(out, "\ncleanup: undoing what this run left")
	var first error
	for i := len(u.keys) - 1; i >= 0; i-- {
		if err := u.fns[u.keys[i]](ctx); err != nil && first == nil {
			first = fmt.Errorf("cleanup of %s: %w", u.keys[i], err)
		}
	}
	u.keys, u.fns = nil, nil
	return first
}

// listOf fetches the first page of who's region list, newest rooms first.
func (d *demoRun) listOf(ctx context.Context, who *demoUser, show bool) ([]listItem, error) {
	var page roomList
	path := "/api/v1/rooms?tab=new&limit=50"
	var err error
	if show {
		err = d.c.call(ctx, http.MethodGet, path, who.demoActor, nil, &page)
	} else {
		err = d.c.send(ctx, http.MethodGet, path, who.demoActor, nil, &page)
	}
	return page.Rooms, err
}

// awaitList polls who's list until want accepts it (lists are eventually
// consistent: a projector applies the room events), then shows it.
func (d *demoRun) awaitList(ctx context.Context, who *demoUser, what string, want func([]listItem) error) ([]listItem, error) {
	items, err := d.listOf(ctx, who, true)
	deadline := time.Now().Add(d.cfg.Wait)
	start := time.Now()
	for {
		if err != nil {
			return nil, err
		}
		werr := want(items)
		if werr == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s's list after %v: %w", who.display, d.cfg.Wait, werr)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		items, err = d.listOf(ctx, who, false)
	}
	d.say("-> %s (%s) sees %s after %v:", who.display, who.regionCode, what, time.Since(start).Round(100*time.Millisecond))
	d.showList(items)
	return items, nil
}

func (d *demoRun) showList(items []listItem) {
	ours := map[string]bool{}
	for _, u := range d.users() {
		ours[u.room.RoomID] = true
	}
	for i, it := range items {
		if i == 6 {
			d.say("     ... and %d more", len(items)-i)
			break
		}
		flags := ""
		if it.Pinned {
			flags += " [pinned]"
		}
		if ours[it.RoomID] {
			flags += "   <- this run"
		}
		d.say("     %d. %-22s %-24q online %d, heat %d%s", i+1, it.RoomShortID, it.Title, it.OnlineCount, it.Heat, flags)
	}
	if len(items) == 0 {
		d.say("     (no rooms)")
	}
}

func indexOf(items []listItem, roomID string) int {
	return slices.IndexFunc(items, func(it listItem) bool { return it.RoomID == roomID })
}

// sameRegionRooms checks that who's list holds the run's rooms of its
// region and none of another region's.
func (d *demoRun) sameRegionRooms(who *demoUser) func([]listItem) error {
	return func(items []listItem) error {
		for _, u := range d.users() {
			in := indexOf(items, u.room.RoomID) >= 0
			switch {
			case u.regionID == who.regionID && !in:
				return fmt.Errorf("room %s of region %s is not listed yet", u.room.RoomID, u.regionCode)
			case u.regionID != who.regionID && in:
				return fmt.Errorf("room %s of region %s is listed in %s", u.room.RoomID, u.regionCode, who.regionCode)
			}
		}
		return nil
	}
}

// countsAsRooms checks that who's list shows the run's rooms of its region
// with the counts their own views show now (views, by room id): a list
// card whose only change is its counts is written up to
// VOICEROOM_LIST_COUNTS_DELAY (1 s) late, by design.
func countsAsRooms(who *demoUser, users []*demoUser, views map[string]demoRoom) func([]listItem) error {
	return func(items []listItem) error {
		for _, u := range users {
			v, ok := views[u.room.RoomID]
			i := indexOf(items, u.room.RoomID)
			if !ok || i < 0 || u.regionID != who.regionID {
				continue
			}
			if it := items[i]; it.OnlineCount != v.OnlineCount || it.Heat != v.Heat {
				return fmt.Errorf("room %s is listed with online %d, heat %d; its view shows online %d, heat %d",
					u.room.RoomID, it.OnlineCount, it.Heat, v.OnlineCount, v.Heat)
			}
		}
		return nil
	}
}

func (d *demoRun) stepLists(ctx context.Context) error {
	d.say("GET /api/v1/rooms lists the caller's region only; no parameter chooses it")
	d.say("(a room's counts reach the list up to 1 s after its own view, by design; the demo waits for them)")
	views := map[string]demoRoom{}
	for _, u := range d.users() {
		var v demoRoom
		if err := d.c.send(ctx, http.MethodGet, roomPath(u.room, ""), u.demoActor, nil, &v); err != nil {
			return err
		}
		views[u.room.RoomID] = v
	}
	seen := map[*demoUser][]string{}
	for _, u := range d.users() {
		region, counts := d.sameRegionRooms(u), countsAsRooms(u, d.users(), views)
		items, err := d.awaitList(ctx, u, "its region's rooms", func(items []listItem) error {
			if err := region(items); err != nil {
				return err
			}
			return counts(items)
		})
		if d.skipped(err, "the room list (GET /api/v1/rooms)") {
			return nil
		}
		if err != nil {
			return err
		}
		for _, it := range items {
			seen[u] = append(seen[u], it.RoomID)
		}
	}
	d.hasList = true
	if d.sg.regionID == d.my.regionID && slices.Equal(seen[d.sg], seen[d.my]) {
		d.say("-> the SG and the MY user see the same list (both in %s); the SA user sees %s's", d.sg.regionCode, d.sa.regionCode)
	}
	return nil
}

func (d *demoRun) stepPin(ctx context.Context) error {
	room := d.sg.room
	body := map[string]any{
		"room_id": room.RoomID, "visible_region_id": room.VisibleRegionID, "weight": 100,
		"expires_at_ms": time.Now().Add(10 * time.Minute).UnixMilli(),
	}
	var pin struct {
		PinID int64 `json:"pin_id"`
	}
	err := d.c.call(ctx, http.MethodPost, "/admin/v1/pins", d.admin, body, &pin)
	if d.skipped(err, "pins (POST /admin/v1/pins)") {
		return nil
	}
	if err != nil {
		return err
	}
	unpin := "/admin/v1/pins/" + itoa(pin.PinID)
	d.undo.push("pin "+itoa(pin.PinID), func(ctx context.Context) error {
		return d.c.call(ctx, http.MethodDelete, unpin, d.admin, nil, nil)
	})
	d.say("-> pin %d: %q first in region %s for 10 minutes", pin.PinID, room.Title, d.region(room.VisibleRegionID))
	if d.hasList {
		_, err := d.awaitList(ctx, d.sg, "the pinned room first", func(items []listItem) error {
			if len(items) == 0 || items[0].RoomID != room.RoomID || !items[0].Pinned {
				return fmt.Errorf("room %s is not first and pinned yet", room.RoomID)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := d.c.call(ctx, http.MethodDelete, unpin, d.admin, nil, nil); err != nil {
		return err
	}
	d.undo.done("pin " + itoa(pin.PinID))
	if d.hasList {
		_, err := d.awaitList(ctx, d.sg, "the room unpinned", func(items []listItem) error {
			if i := indexOf(items, room.RoomID); i < 0 || items[i].Pinned {
				return fmt.Errorf("room %s is not listed unpinned yet", room.RoomID)
			}
			return nil
		})
		return err
	}
	return nil
}

func (d *demoRun) stepHide(ctx context.Context) error {
	owner := d.my
	room := owner.room
	body := map[string]any{
		"room_id": room.RoomID, "visible_region_id": room.VisibleRegionID, "reason": "demo: hide",
		"expires_at_ms": time.Now().Add(10 * time.Minute).UnixMilli(),
	}
	var hide struct {
		HideID int64 `json:"hide_id"`
	}
	err := d.c.call(ctx, http.MethodPost, "/admin/v1/hides", d.admin, body, &hide)
	if d.skipped(err, "hides (POST /admin/v1/hides)") {
		return nil
	}
	if err != nil {
		return err
	}
	unhide := "/admin/v1/hides/" + itoa(hide.HideID)
	d.undo.push("hide "+itoa(hide.HideID), func(ctx context.Context) error {
		return d.c.call(ctx, http.MethodDelete, unhide, d.admin, nil, nil)
	})
	d.say("-> hide %d: %q out of region %s's lists and search", hide.HideID, room.Title, d.region(room.VisibleRegionID))
	if d.hasList {
		if _, err := d.awaitList(ctx, owner, "the room hidden", func(items []listItem) error {
			if indexOf(items, room.RoomID) >= 0 {
				return fmt.Errorf("room %s is still listed", room.RoomID)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	d.say("a hidden room stays joinable by its id:")
	if err := d.c.call(ctx, http.MethodGet, roomPath(room, ""), d.sg.demoActor, nil, &owner.room); err != nil {
		return err
	}
	d.showRoom(owner.room)
	if err := d.c.call(ctx, http.MethodDelete, unhide, d.admin, nil, nil); err != nil {
		return err
	}
	d.undo.done("hide " + itoa(hide.HideID))
	if d.hasList {
		_, err := d.awaitList(ctx, owner, "the room back", func(items []listItem) error {
			if indexOf(items, room.RoomID) < 0 {
				return fmt.Errorf("room %s is not listed again yet", room.RoomID)
			}
			return nil
		})
		return err
	}
	return nil
}

func (d *demoRun) stepBan(ctx context.Context) error {
	owner := d.sg
	room := owner.room
	base := "/admin/v1/rooms/" + room.RoomID
	err := d.c.call(ctx, http.MethodPost, base+"/ban", d.admin, map[string]any{"reason": "demo: ban"}, &owner.room)
	if d.skipped(err, "bans (POST /admin/v1/rooms/:room_id/ban)") {
		return nil
	}
	if err != nil {
		return err
	}
	d.undo.push("ban "+room.RoomID, func(ctx context.Context) error {
		return d.c.call(ctx, http.MethodPost, base+"/restore", d.admin, map[string]any{"reason": "demo cleanup"}, nil)
	})
	d.say("everyone present leaves, the seats are freed, joins are refused:")
	d.showRoom(owner.room)
	err = d.c.call(ctx, http.MethodPost, roomPath(room, "/join"), d.my.demoActor, nil, nil)
	if !isCode(err, "FAILED_PRECONDITION") {
		return fmt.Errorf("joining a banned room: want FAILED_PRECONDITION, got %v", err)
	}
	d.say("-> %s", refusal(err))
	if d.hasList {
		if _, err := d.awaitList(ctx, owner, "the banned room gone", func(items []listItem) error {
			if indexOf(items, room.RoomID) >= 0 {
				return fmt.Errorf("room %s is still listed", room.RoomID)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if err := d.c.call(ctx, http.MethodPost, base+"/restore", d.admin, map[string]any{"reason": "demo: restore"}, &owner.room); err != nil {
		return err
	}
	d.undo.done("ban " + room.RoomID)
	d.showRoom(owner.room)
	if d.hasList {
		if _, err := d.awaitList(ctx, owner, "the restored room back", func(items []listItem) error {
			if indexOf(items, room.RoomID) < 0 {
				return fmt.Errorf("room %s is not listed again yet", room.RoomID)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	d.say("every operator action on a room is audited:")
	var audit struct {
		Items []struct {
			Action   string `json:"action"`
			Operator string `json:"operator"`
			Reason   string `json:"reason"`
		} `json:"items"`
	}
	err = d.c.call(ctx, http.MethodGet, base+"/audit?limit=10", d.admin, nil, &audit)
	if d.skipped(err, "the audit trail (GET /admin/v1/rooms/:room_id/audit)") {
		return nil
	}
	if err != nil {
		return err
	}
	for _, a := range audit.Items {
		d.say("     %s", auditLine(a.Action, a.Operator, a.Reason))
	}
	return nil
}

// auditLine is one audit entry as the demo shows it; an entry with no
// reason has no colon after its operator.
func auditLine(action, operator, reason string) string {
	line := fmt.Sprintf("%-8s by %s", action, operator)
	if reason == "" {
		return line
	}
	return line + ": " + reason
}

func (d *demoRun) stepIM(ctx context.Context) error {
	status, _, err := d.c.getPlain(ctx, d.cfg.IMEmuURL+"/_emu/groups", 1<<20)
	if err != nil || status != http.StatusOK {
		why := fmt.Sprint(err)
		if err == nil {
			why = fmt.Sprintf("GET /_emu/groups answers %d", status)
		}
		d.say("skipped: no IM emulator at %s (%s); task run starts one unless Tencent IM is configured, or run voiceroom imemu", d.cfg.IMEmuURL, why)
		return nil
	}
	d.say("the imbridge sink sends each room's events to its IM group as custom group messages:")
	for _, u := range d.users() {
		room := u.room
		d.say("GET    %s/_emu/messages?group_id=%s", d.cfg.IMEmuURL, d.c.aliases[room.RoomID])
		msgs, err := d.awaitMessages(ctx, room.IMGroupID)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			d.say("-> no messages for group %s after %v: does serve's VOICEROOM_TIM_DOMAIN point at %s?", room.IMGroupID, d.cfg.Wait, d.cfg.IMEmuURL)
			continue
		}
		d.say("-> %d message(s) in the group of %q", len(msgs), room.Title)
		for i, m := range msgs {
			if i == 12 {
				d.say("     ... and %d more", len(msgs)-i)
				break
			}
			d.say("     #%-3d %-22s %d event(s), priority %s", m.MsgSeq, m.Desc, len(m.EventIDs), m.Priority)
		}
	}
	return nil
}

// awaitMessages polls the emulator until the group holds messages and their
// number has stopped growing for a moment, or until the wait is over.
func (d *demoRun) awaitMessages(ctx context.Context, group string) ([]emuMessage, error) {
	deadline := time.Now().Add(d.cfg.Wait)
	var last []emuMessage
	for {
		status, raw, err := d.c.getPlain(ctx, d.cfg.IMEmuURL+"/_emu/messages?limit=100&group_id="+url.QueryEscape(group), 4<<20)
		if err != nil {
			return nil, fmt.Errorf("IM emulator messages: %w", err)
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("IM emulator messages: %d %.200s", status, raw)
		}
		var page struct {
			Messages []emuMessage `json:"messages"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("IM emulator messages: %w", err)
		}
		if len(page.Messages) > 0 && len(page.Messages) == len(last) {
			return page.Messages, nil
		}
		last = page.Messages
		if time.Now().After(deadline) {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (d *demoRun) stepClose(ctx context.Context) error {
	for _, u := range d.users() {
		err := d.c.call(ctx, http.MethodPost, roomPath(u.room, "/close"), u.demoActor, nil, &u.room)
		if isCode(err, "FAILED_PRECONDITION") { // still banned: only an operator closes it
			err = d.c.call(ctx, http.MethodPost, "/admin/v1/rooms/"+u.room.RoomID+"/close", d.admin, map[string]any{"reason": "demo"}, &u.room)
		}
		if err != nil {
			return err
		}
		d.undo.done("room " + u.room.RoomID)
		d.say("-> %s is %s", d.c.aliases[u.room.RoomID], u.room.Status)
	}
	return nil
}

func (d *demoRun) stepNext(ctx context.Context) error {
	for _, p := range []struct{ path, what string }{
		{"/docs", "every route, body and error code"},
		{"/openapi.yaml", "the OpenAPI document"},
	} {
		status, _, err := d.c.getPlain(ctx, d.cfg.URL+p.path, 1<<20)
		switch {
		case err != nil:
			return fmt.Errorf("GET %s: %w", p.path, err)
		case status == http.StatusOK:
			d.say("%-36s %s", d.cfg.URL+p.path, p.what)
		default:
			d.say("skipped: %s answers %d (not on this server)", d.cfg.URL+p.path, status)
		}
	}
	d.showMetrics(ctx)
	d.say("each sink's dead letters in this app (replay: POST /admin/v1/dlq/replay {sink, seqs?}):")
	for _, sink := range []string{"imbridge", "listprojector", "roomranks", "webhooks"} {
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		err := d.c.call(ctx, http.MethodGet, "/admin/v1/dlq?limit=50&sink="+sink, d.admin, nil, &page)
		if d.skipped(err, "the dead-letter routes (GET /admin/v1/dlq)") {
			break
		}
		if isCode(err, "INVALID_ARGUMENT") {
			d.say("-> %s", refusal(err))
			continue
		}
		if err != nil {
			return err
		}
		d.say("-> %d dead letter(s) on the first page", len(page.Items))
	}
	d.say("the event streams and the dead letters, with the nats CLI (from the repository root):")
	for _, c := range []string{
		"stream ls",
		"stream info ROOM_EVENTS",
		"consumer info ROOM_EVENTS listprojector",
		"consumer info ROOM_EVENTS imbridge",
		"stream info ROOM_EVENTS_DLQ",
	} {
		d.say("     go tool -modfile=tools.mod task nats -- %s", c)
	}
	return nil
}

// showMetrics shows where the Prometheus metrics are (the operators'
// listener, not the API's) and a few of them. The listener may be off or
// elsewhere: then the demo says so and goes on.
func (d *demoRun) showMetrics(ctx context.Context) {
	if d.cfg.OpsURL == "" {
		d.say("skipped: Prometheus metrics: the operators' listener is off (VOICEROOM_OPS_ADDR is empty)")
		return
	}
	u := d.cfg.OpsURL + "/metrics"
	status, body, err := d.c.getPlain(ctx, u, 1<<20)
	switch {
	case err != nil:
		d.say("skipped: Prometheus metrics: %s not reachable (the operators' listener, VOICEROOM_OPS_ADDR; --ops-url): %v", u, err)
		return
	case status != http.StatusOK:
		d.say("skipped: Prometheus metrics: %s answers %d", u, status)
		return
	}
	d.say("%-36s %s", u, "Prometheus metrics (the operators' listener)")
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "voiceroom_outbox_pending_rows") || strings.HasPrefix(line, "voiceroom_rooms_moderation_actions_total") {
			d.say("     %s", line)
		}
	}
}
