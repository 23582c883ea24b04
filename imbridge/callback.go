package imbridge

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"voiceroom/apperr"
)

// CommandBeforeApplyJoinGroup is the callback the guard decides.
const CommandBeforeApplyJoinGroup = "Group.CallbackBeforeApplyJoinGroup"

// Members answers whether a user is present in the room of a GroupId
// (rooms.Service.IMGroupMember).
type Members interface {
	IMGroupMember(groupID string, userID int64) (appCode string, found, present bool)
}

// GuardConfig configures a Guard.
type GuardConfig struct {
	// MaxSkew is how far RequestTime may be from now, either way, when
	// the application has a callback token. Default 60s.
	MaxSkew time.Duration
}

// WithDefaults returns c with zero fields defaulted.
func (c GuardConfig) WithDefaults() GuardConfig {
	if c.MaxSkew == 0 {
		c.MaxSkew = time.Minute
	}
	return c
}

// Validate checks c after defaults; it never changes c. Errors are
// *apperr.ConfigError naming the field and wrap ErrInvalidConfig.
func (c GuardConfig) Validate() error {
	if s := c.WithDefaults().MaxSkew; s < time.Second || s > time.Hour {
		return apperr.BadConfig("MaxSkew", "%w: callback max skew %s: want 1s..1h", ErrInvalidConfig, s)
	}
	return nil
}

// Guard answers Tencent IM's third-party callbacks: it lets a user into a
// room's group only while the user is present in the room. It reads
// memory only, so it answers in microseconds, far inside Tencent's 2 s.
type Guard struct {
	apps    Apps
	tokens  map[int64][]string // callback tokens by sdkappid; a known sdkappid may have none
	members Members
	cfg     GuardConfig
	metrics *Metrics
	now     func() time.Time
}

// NewGuard returns a Guard over the rooms of this process.
func NewGuard(apps Apps, members Members, cfg GuardConfig, m *Metrics, now func() time.Time) (*Guard, error) {
	if members == nil {
		return nil, fmt.Errorf("%w: guard: nil members", ErrInvalidConfig)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tokens := map[int64][]string{}
	for _, app := range apps.Applications() {
		tokens[app.SDKAppID], _ = apps.Tokens(app.SDKAppID)
	}
	return &Guard{apps: apps, tokens: tokens, members: members, cfg: cfg, metrics: m, now: now}, nil
}

// CallbackQuery is the query string of a callback.
type CallbackQuery struct {
	SDKAppID        string
	CallbackCommand string
	Sign            string
	RequestTime     string
}

// CallbackReply is the answer Tencent reads: ErrorCode 0 allows, 1 denies.
type CallbackReply struct {
	ActionStatus string `json:"ActionStatus"`
	ErrorInfo    string `json:"ErrorInfo"`
	ErrorCode    int    `json:"ErrorCode"`
}

func allow() CallbackReply { return CallbackReply{ActionStatus: "OK", ErrorCode: 0} }

func deny(info string) CallbackReply {
	return CallbackReply{ActionStatus: "OK", ErrorCode: 1, ErrorInfo: info}
}

// Sign is a callback's Sign for token at requestTime: hex(sha256(token +
// requestTime)).
func Sign(token, requestTime string) string {
	sum := sha256.Sum256([]byte(token + requestTime))
	return hex.EncodeToString(sum[:])
}

// Handle answers one callback. A join is allowed only when the callback is
// authentic (an application with that SdkAppid exists and, when it has a
// callback token, Sign matches and RequestTime is within MaxSkew), the
// group belongs to a loaded room of an app that application serves, and
// Requestor_Account is present in that room. Any other command is answered
// OK. It never fails: bad input is a denial.
func (g *Guard) Handle(q CallbackQuery, body []byte) CallbackReply {
	start := time.Now()
	command := "other"
	if q.CallbackCommand == CommandBeforeApplyJoinGroup {
		command = "join"
	}
	reply, result := g.handle(q, body, command)
	g.metrics.callback(command, result, time.Since(start).Seconds())
	return reply
}

func (g *Guard) handle(q CallbackQuery, body []byte, command string) (CallbackReply, string) {
	sdkAppID, err := strconv.ParseInt(q.SDKAppID, 10, 64)
	tokens, known := g.tokens[sdkAppID]
	if err != nil || !known {
		return deny("unknown SdkAppid"), "unknown_app"
	}
	if len(tokens) > 0 {
		t, err := strconv.ParseInt(q.RequestTime, 10, 64)
		if err != nil {
			return deny("bad RequestTime"), "stale"
		}
		if skew := g.now().Sub(time.Unix(t, 0)); skew > g.cfg.MaxSkew || skew < -g.cfg.MaxSkew {
			return deny("RequestTime out of range"), "stale"
		}
		ok := false
		for _, tok := range tokens {
			if subtle.ConstantTimeCompare([]byte(Sign(tok, q.RequestTime)), []byte(q.Sign)) == 1 {
				ok = true
			}
		}
		if !ok {
			return deny("bad Sign"), "bad_sign"
		}
	}
	if command != "join" {
		return allow(), "ok"
	}
	var req struct {
		GroupID   string `json:"GroupId"`
		Requestor string `json:"Requestor_Account"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return deny("bad body"), "deny"
	}
	userID, err := strconv.ParseInt(req.Requestor, 10, 64)
	if err != nil || userID <= 0 {
		return deny("unknown user"), "deny"
	}
	appCode, found, present := g.members.IMGroupMember(req.GroupID, userID)
	if !found || !present {
		return deny("not in the room"), "deny"
	}
	app, err := g.apps.For(appCode)
	if err != nil || app.SDKAppID != sdkAppID {
		return deny("group of another application"), "deny"
	}
	return allow(), "allow"
}
