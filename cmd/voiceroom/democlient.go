package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"voiceroom/apiclient"
	"voiceroom/authtoken"
)

// errRouteMissing is the answer of a server that has no such route: a
// feature of another build. The demo skips the step that needs it.
var errRouteMissing = apiclient.ErrRouteNotFound

// isCode reports whether err is a refusal with the envelope code.
func isCode(err error, code string) bool { return apiclient.IsCode(err, code) }

// refusal is the envelope code and message of a refused request.
func refusal(err error) string {
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		return ae.Code + ": " + ae.Message
	}
	return err.Error()
}

// demoActor is who a request is made as: a user, or an operator of the app.
type demoActor struct {
	name   string
	userID int64
	admin  bool
}

// demoClient calls a running voiceroom with tokens it signs itself, and
// prints each call it is asked to show.
type demoClient struct {
	api apiclient.Client // BaseURL: the API's
	app string
	key authtoken.Key
	out io.Writer
	// aliases names long ids in the requests shown ("$ROOM_SG").
	aliases map[string]string
}

// call sends a request as who, shows it, and decodes the envelope's data
// into out (when out is not nil).
func (c *demoClient) call(ctx context.Context, method, path string, who demoActor, body, out any) error {
	shown := path
	if body != nil {
		if b, err := json.Marshal(body); err == nil && len(b) <= 160 {
			shown += " " + string(b)
		}
	}
	for id, alias := range c.aliases {
		shown = strings.ReplaceAll(shown, id, alias)
	}
	fmt.Fprintf(c.out, "   %-6s %s   (as %s)\n", method, shown, who.name)
	return c.send(ctx, method, path, who, body, out)
}

// send is call without showing the request (for polls).
func (c *demoClient) send(ctx context.Context, method, path string, who demoActor, body, out any) error {
	role := ""
	if who.admin {
		role = authtoken.RoleAdmin
	}
	tok, err := c.key.Issue(c.app, who.userID, role, 10*time.Minute, time.Now())
	if err != nil {
		return fmt.Errorf("sign a token for %s: %w", who.name, err)
	}
	return c.api.Call(ctx, apiclient.Request{Method: method, Path: path, Token: tok, Body: body}, out)
}

// getPlain fetches a URL outside the API envelope (readyz, /docs, the
// emulator). It answers the status and at most limit bytes of the body.
func (c *demoClient) getPlain(ctx context.Context, url string, limit int64) (int, []byte, error) {
	return c.api.Get(ctx, url, limit)
}

// demoRoom is the part of a room snapshot the demo shows.
type demoRoom struct {
	RoomID          string  `json:"room_id"`
	RoomShortID     string  `json:"room_short_id"`
	IMGroupID       string  `json:"im_group_id"`
	OwnerUserID     int64   `json:"owner_user_id"`
	VisibleRegionID int64   `json:"visible_region_id"`
	Title           string  `json:"title"`
	Notice          string  `json:"notice"`
	SeatMode        string  `json:"seat_mode"`
	AdminUserIDs    []int64 `json:"admin_user_ids"`
	Status          string  `json:"status"`
	Heat            int64   `json:"heat"`
	RoomVersion     int64   `json:"room_version"`
	Seats           []struct {
		Index  int   `json:"index"`
		UserID int64 `json:"user_id"`
		Muted  bool  `json:"muted"`
	} `json:"seats"`
	OnlineCount int `json:"online_count"`
	GiftRank    []struct {
		UserID int64 `json:"user_id"`
		Value  int64 `json:"value"`
	} `json:"gift_rank"`
}

// listItem is the part of a room list entry the demo shows.
type listItem struct {
	RoomID      string `json:"room_id"`
	RoomShortID string `json:"room_short_id"`
	Title       string `json:"title"`
	OnlineCount int    `json:"online_count"`
	Heat        int64  `json:"heat"`
	Pinned      bool   `json:"pinned"`
}

// roomList is a page of GET /api/v1/rooms.
type roomList struct {
	Rooms      []listItem `json:"rooms"`
	NextCursor string     `json:"next_cursor"`
}

// emuMessage is a system message as the IM emulator holds it.
type emuMessage struct {
	GroupID  string   `json:"group_id"`
	MsgSeq   int64    `json:"msg_seq"`
	Priority string   `json:"priority"`
	Desc     string   `json:"desc"`
	EventIDs []string `json:"event_ids"`
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
