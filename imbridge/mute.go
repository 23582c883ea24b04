package imbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"voiceroom/bus"
	"voiceroom/roomevent"
)

// Tencent's limits on forbid_send_msg.
const (
	// MaxMuteTime is the largest MuteTime, 0xFFFFFFFF: a mute for ever.
	MaxMuteTime = 1<<32 - 1
	// MaxMuteAccounts is how many accounts one call may name.
	MaxMuteAccounts = 500
)

// forbidSendMsg is the forbid_send_msg request.
type forbidSendMsg struct {
	GroupID  string   `json:"GroupId"`
	Accounts []string `json:"Members_Account"`
	MuteTime int64    `json:"MuteTime"`
}

// accountOf is a user's Tencent IM account: the user id in decimal.
func accountOf(userID int64) string { return strconv.FormatInt(userID, 10) }

// muteTimeOf is the MuteTime that ends a mute at untilMs when asked at
// nowMs: the seconds left, rounded up (at most MaxMuteTime); 0, which
// lifts it, when untilMs is 0 or already past.
func muteTimeOf(untilMs, nowMs int64) int64 {
	if untilMs <= nowMs {
		return 0
	}
	return min((untilMs-nowMs+999)/1000, MaxMuteTime)
}

// muteChat applies the chat mute that e, the RoomChatMuted at the head of
// l, sets or lifts, with the seconds left now; then the lane sends its
// message. A missing group is created first, as for a message; in a
// closed room the event is skipped with its message. A retry asks again
// with the seconds left then: the call sets the mute's end, so repeating
// it changes nothing.
func (b *Bridge) muteChat(ctx context.Context, l *lane, e bus.Envelope) error {
	var body roomevent.ChatMuted
	if err := json.Unmarshal(e.Payload, &body); err != nil || body.UserID <= 0 {
		return fmt.Errorf("event %s: no user to mute: %w", e.EventID, ErrBadEvent)
	}
	req := forbidSendMsg{GroupID: l.groupID, Accounts: []string{accountOf(body.UserID)}}
	call := func() error {
		if err := b.apiLimit(ctx, l.client, APIForbidSendMsg); err != nil {
			return err
		}
		req.MuteTime = muteTimeOf(body.UntilMs, b.now().UnixMilli())
		return b.call(ctx, l.client, APIForbidSendMsg, req, nil)
	}
	err := call()
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == CodeGroupNotFound {
		var skipped bool
		if skipped, err = b.groupMissing(ctx, l, 1); skipped || err != nil {
			return err
		}
		err = call()
	}
	if err != nil {
		return err
	}
	b.mu.Lock()
	l.muted = true
	b.mu.Unlock()
	return nil
}
