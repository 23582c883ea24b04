package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// demoBattle is the part of a PK battle the demo shows.
type demoBattle struct {
	BattleID       string `json:"battle_id"`
	Status         string `json:"status"`
	RoomScore      int64  `json:"room_score"`
	OpponentScore  int64  `json:"opponent_score"`
	Reason         string `json:"reason"`
	WinnerRoomID   string `json:"winner_room_id"`
	RoomTopSenders []struct {
		UserID int64 `json:"user_id"`
		Coins  int64 `json:"coins"`
	} `json:"room_top_senders"`
}

// demoRoomPK is a room view's pk.
type demoRoomPK struct {
	PK *struct {
		BattleID      string `json:"battle_id"`
		MyScore       int64  `json:"my_score"`
		OpponentScore int64  `json:"opponent_score"`
		Seq           int64  `json:"seq"`
	} `json:"pk"`
}

// stepPK is the end of step 3: a PK battle between the SG and the MY
// rooms (docs/pk.md). The SG owner invites, the MY owner accepts, a gift
// in the SG room scores for it and the MY room's view shows the live
// totals; then the MY owner ends it early (a forfeit) and the result is
// settled once.
func (d *demoRun) stepPK(ctx context.Context) error {
	d.say("a PK battle: the SG room invites the MY room for 60 s; gifts each room receives are its score:")
	var b demoBattle
	invite := map[string]any{"opponent_room_id": d.my.room.RoomID, "duration_seconds": 60}
	err := d.c.call(ctx, http.MethodPost, roomPath(d.sg.room, "/pk"), d.sg.demoActor, invite, &b)
	if d.skipped(err, "PK battles") {
		return nil
	}
	if err != nil {
		return err
	}
	path := "/api/v1/pk/" + b.BattleID
	if err := d.c.call(ctx, http.MethodPost, path+"/accept", d.my.demoActor, nil, &b); err != nil {
		return err
	}
	d.say("-> battle %s %s", b.BattleID, b.Status)
	body := map[string]any{"gift_id": demoGiftID, "count": 2, "receiver_user_id": d.my.userID}
	if err := d.c.call(ctx, http.MethodPost, roomPath(d.sg.room, "/gift"), d.sg.demoActor, body, nil); err != nil {
		return err
	}
	var view demoRoomPK
	start := time.Now()
	d.say("%-6s %s until its pk shows the gift   (as %s)", "GET", roomPath(demoRoom{RoomID: "$ROOM_MY"}, ""), d.my.name)
	if err := d.poll(ctx, func() (bool, error) {
		err := d.c.send(ctx, http.MethodGet, roomPath(d.my.room, ""), d.my.demoActor, nil, &view)
		return err == nil && view.PK != nil && view.PK.OpponentScore == 20, err
	}); err != nil {
		return err
	}
	if view.PK == nil || view.PK.OpponentScore != 20 {
		d.say("-> the MY room's view did not show the score within %v: does serve run the api role's pk scorer?", d.cfg.Wait)
	} else {
		d.say("-> the MY room sees the battle after %v: my_score %d, opponent_score %d (seq %d)", time.Since(start).Round(100*time.Millisecond),
			view.PK.MyScore, view.PK.OpponentScore, view.PK.Seq)
	}
	d.say("the MY owner ends it early: the MY room forfeits, the result is settled once:")
	if err := d.c.call(ctx, http.MethodPost, path+"/end", d.my.demoActor, nil, &b); err != nil {
		return err
	}
	d.say("%-6s %s until it is settled   (as %s)", "GET", path, d.my.name)
	if err := d.poll(ctx, func() (bool, error) {
		err := d.c.send(ctx, http.MethodGet, path, d.my.demoActor, nil, &b)
		return err == nil && b.Status == "ended", err
	}); err != nil {
		return err
	}
	winner := b.WinnerRoomID
	if a, ok := d.c.aliases[winner]; ok {
		winner = a
	}
	top := "none"
	if len(b.RoomTopSenders) > 0 {
		top = fmt.Sprintf("%s (%d coins)", d.name(b.RoomTopSenders[0].UserID), b.RoomTopSenders[0].Coins)
	}
	d.say("-> battle %s: %d:%d, winner %s (%s); the SG room's top sender %s", b.Status, b.RoomScore, b.OpponentScore, winner, b.Reason, top)
	return nil
}

// poll calls check every 200 ms until it is done, fails, or the demo's
// --wait passes (then it returns nil: the caller says what it saw).
func (d *demoRun) poll(ctx context.Context, check func() (bool, error)) error {
	deadline := time.Now().Add(d.cfg.Wait)
	for {
		done, err := check()
		if err != nil || done || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
