package imemu

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"voiceroom/imbridge"
)

// reply is a Tencent answer.
type reply map[string]any

func okReply() reply { return reply{"ActionStatus": "OK", "ErrorCode": 0, "ErrorInfo": ""} }

func errReply(code int, info string) reply {
	return reply{"ActionStatus": "FAIL", "ErrorCode": code, "ErrorInfo": info}
}

// serveREST is POST /v4/{service}/{command}.
func (e *Emulator) serveREST(w http.ResponseWriter, r *http.Request) {
	api := r.PathValue("service") + "/" + r.PathValue("command")
	q := r.URL.Query()
	e.mu.Lock()
	e.stats.Calls[api]++
	f := e.activeFaultLocked(api)
	e.mu.Unlock()
	if f != nil {
		switch f.Mode {
		case "http500":
			e.countError("http500")
			http.Error(w, "injected fault", http.StatusInternalServerError)
			return
		case "timeout":
			e.countError("timeout")
			// Read the body first: only then does the server notice the
			// caller giving up and end r.Context().
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxBody))
			t := time.NewTimer(timeoutCap)
			defer t.Stop()
			select {
			case <-r.Context().Done():
			case <-t.C:
			}
			return
		default:
			e.countError(strconv.Itoa(f.ErrorCode))
			writeJSON(w, http.StatusOK, errReply(f.ErrorCode, "injected fault"))
			return
		}
	}
	rep := e.rest(api, q.Get("sdkappid"), q.Get("identifier"), q.Get("usersig"), r)
	if code, _ := rep["ErrorCode"].(int); code != 0 {
		e.countError(strconv.Itoa(code))
	}
	writeJSON(w, http.StatusOK, rep)
}

func (e *Emulator) countError(code string) {
	e.mu.Lock()
	e.stats.Errors[code]++
	e.mu.Unlock()
}

// rest checks the caller and runs one command.
func (e *Emulator) rest(api, sdkAppID, identifier, sig string, r *http.Request) reply {
	id, _ := strconv.ParseInt(sdkAppID, 10, 64) // not a number: 0, no such application
	app, ok := e.apps[id]
	if !ok {
		return errReply(imbridge.CodeSigSDKAppID, "sdkappid not found")
	}
	if identifier != app.Admin {
		return errReply(imbridge.CodeSigIdentifier, "identifier is not the app admin")
	}
	if code := imbridge.CheckUserSig(sig, app.SecretKey, identifier, id, e.now().Unix()); code != 0 {
		return errReply(code, "usersig check failed")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		return errReply(imbridge.CodeInvalidRequest, "body unreadable or too large")
	}
	switch api {
	case imbridge.APICreateGroup:
		return e.createGroup(id, body)
	case imbridge.APISendGroupMsg:
		return e.sendGroupMsg(id, body)
	case imbridge.APIDestroyGroup:
		return e.destroyGroup(id, body)
	case imbridge.APIForbidSendMsg:
		return e.forbidSendMsg(id, body)
	}
	return errReply(imbridge.CodeUnknownAPI, "unknown api "+api)
}

func groupKey(app int64, groupID string) string { return strconv.FormatInt(app, 10) + "/" + groupID }

func (e *Emulator) createGroup(app int64, body []byte) reply {
	var req struct {
		Type    string `json:"Type"`
		GroupID string `json:"GroupId"`
		Name    string `json:"Name"`
		Owner   string `json:"Owner_Account"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return errReply(imbridge.CodeInvalidRequest, "bad json")
	}
	switch {
	case req.GroupID == "" || len(req.GroupID) > maxGroupID || strings.HasPrefix(req.GroupID, "@TGS#"):
		return errReply(imbridge.CodeInvalidRequest, "invalid GroupId")
	case req.Name == "" || len(req.Name) > 30:
		return errReply(imbridge.CodeInvalidRequest, "invalid Name")
	case req.Type != "AVChatRoom" && req.Type != "Public" && req.Type != "Private" && req.Type != "ChatRoom" && req.Type != "Community":
		return errReply(imbridge.CodeInvalidRequest, "invalid Type")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k := groupKey(app, req.GroupID)
	if g, ok := e.groups[k]; ok && !g.Destroyed {
		return errReply(imbridge.CodeGroupIDInUse, "group id in use")
	}
	e.groups[k] = &group{sdkAppID: app, Group: Group{GroupID: req.GroupID, Name: req.Name, Owner: req.Owner,
		Type: req.Type, CreatedAtMs: e.now().UnixMilli()}}
	rep := okReply()
	rep["GroupId"] = req.GroupID
	return rep
}

func (e *Emulator) destroyGroup(app int64, body []byte) reply {
	var req struct {
		GroupID string `json:"GroupId"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return errReply(imbridge.CodeInvalidRequest, "bad json")
	}
	return e.withGroup(app, req.GroupID, func(g *group) reply {
		g.Destroyed = true
		return okReply()
	})
}

// withGroup runs fn on app's group groupID under the lock, or answers
// 10010 when the group does not exist or was destroyed.
func (e *Emulator) withGroup(app int64, groupID string, fn func(*group) reply) reply {
	e.mu.Lock()
	defer e.mu.Unlock()
	g, ok := e.groups[groupKey(app, groupID)]
	if !ok || g.Destroyed {
		return errReply(imbridge.CodeGroupNotFound, "group not found")
	}
	return fn(g)
}

func (e *Emulator) sendGroupMsg(app int64, body []byte) reply {
	var req struct { // what the emulator reads of the body
		GroupID     string `json:"GroupId"`
		Random      uint32 `json:"Random"`
		MsgPriority string `json:"MsgPriority"`
		FromAccount string `json:"From_Account"`
		MsgBody     []struct {
			MsgContent struct {
				Data string `json:"Data"`
				Desc string `json:"Desc"`
			} `json:"MsgContent"`
		} `json:"MsgBody"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return errReply(imbridge.CodeInvalidRequest, "bad json")
	}
	if len(req.MsgBody) == 0 {
		return errReply(imbridge.CodeInvalidRequest, "empty MsgBody")
	}
	if len(body) > imbridge.MaxMessageBytes {
		return errReply(imbridge.CodeMessageTooLong, "message longer than 12 KB")
	}
	c := req.MsgBody[0].MsgContent
	m := Message{GroupID: req.GroupID, Random: req.Random, Priority: req.MsgPriority, Desc: c.Desc, Data: c.Data}
	return e.withGroup(app, req.GroupID, func(g *group) reply {
		if mu := g.mutes[req.FromAccount]; mu != nil && mu.activeAt(e.now()) {
			return errReply(imbridge.CodeSenderMuted, "the sender is muted in this group")
		}
		return e.showLocked(app, g, m)
	})
}

// forbidSendMsg sets or lifts (MuteTime 0) the chat mute of each account
// named, as Tencent checks the request. Tencent documents no error for an
// account that is not in the group, and a mute outlasts leaving the group
// (a muted user who leaves and comes back is still muted); the emulator,
// which has no members, records the mute for any account.
func (e *Emulator) forbidSendMsg(app int64, body []byte) reply {
	var req struct {
		GroupID  string   `json:"GroupId"`
		Accounts []string `json:"Members_Account"`
		MuteTime *int64   `json:"MuteTime"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		// Also a MuteTime that is not a whole number.
		return errReply(imbridge.CodeInvalidRequest, "bad json")
	}
	switch {
	case req.GroupID == "":
		return errReply(imbridge.CodeInvalidRequest, "GroupId required")
	case len(req.GroupID) > maxGroupID:
		return errReply(imbridge.CodeInvalidGroupID, "invalid GroupId")
	case len(req.Accounts) == 0 || len(req.Accounts) > imbridge.MaxMuteAccounts:
		return errReply(imbridge.CodeInvalidRequest, "Members_Account: want 1.."+strconv.Itoa(imbridge.MaxMuteAccounts)+" accounts")
	case slices.Contains(req.Accounts, ""):
		return errReply(imbridge.CodeInvalidRequest, "Members_Account: empty account")
	case req.MuteTime == nil:
		return errReply(imbridge.CodeInvalidRequest, "MuteTime required")
	case *req.MuteTime < 0 || *req.MuteTime > imbridge.MaxMuteTime:
		return errReply(imbridge.CodeInvalidRequest, "MuteTime: want 0.."+strconv.FormatInt(imbridge.MaxMuteTime, 10))
	}
	return e.withGroup(app, req.GroupID, func(g *group) reply {
		if g.Type == "Private" {
			return errReply(imbridge.CodeNoPermission, "members of a Private group cannot be muted")
		}
		if g.mutes == nil {
			g.mutes = map[string]*Mute{}
		}
		now := e.now().UnixMilli()
		for _, a := range req.Accounts {
			m := &Mute{GroupID: g.GroupID, Account: a, MuteTime: *req.MuteTime, SetAtMs: now}
			if m.MuteTime > 0 && m.MuteTime < imbridge.MaxMuteTime {
				m.UntilMs = now + m.MuteTime*1000
			}
			g.mutes[a] = m
		}
		return okReply()
	})
}

// showLocked applies the duplicate check and the rate rule to m, sent to
// g, and keeps it when it is shown.
func (e *Emulator) showLocked(app int64, g *group, m Message) reply {
	now := e.now()
	rk := groupKey(app, m.GroupID) + "/" + strconv.FormatUint(uint64(m.Random), 10)
	if at, ok := e.randoms[rk]; ok && now.Sub(at) < duplicateTTL {
		e.stats.DuplicatesDropped++
		rep := okReply()
		rep["MsgTime"], rep["MsgSeq"] = now.Unix(), 0
		return rep
	}
	cut := now.Add(-time.Second)
	i := 0
	for i < len(g.recent) && !g.recent[i].After(cut) {
		i++
	}
	g.recent = g.recent[i:]
	if len(g.recent) >= groupRate {
		e.stats.RateDropped++
		rep := okReply()
		rep["MsgTime"], rep["MsgSeq"], rep["MsgDropReason"] = now.Unix(), 0, "MsgFreqLimit"
		return rep
	}
	g.recent = append(g.recent, now)
	e.randoms[rk] = now
	if len(e.randoms) > 4*e.maxMessages {
		for k, at := range e.randoms {
			if now.Sub(at) >= duplicateTTL {
				delete(e.randoms, k)
			}
		}
	}
	e.seq++
	g.MessageCount++
	m.MsgSeq, m.ReceivedAtMs, m.EventIDs = e.seq, now.UnixMilli(), imbridge.EventIDsOfData(m.Data)
	if m.EventIDs == nil {
		m.EventIDs = []string{}
	}
	e.stats.Messages++
	for _, id := range m.EventIDs {
		e.stats.EventsShown++
		ev := e.events[id]
		if ev == nil {
			ev = &Event{EventID: id, GroupID: m.GroupID, FirstReceivedAtMs: m.ReceivedAtMs}
			e.events[id] = ev
		}
		ev.Shown++
	}
	if e.onShown != nil {
		e.onShown(m.EventIDs, now)
	}
	if len(e.messages) >= e.maxMessages {
		e.messages = append(e.messages[:0], e.messages[len(e.messages)/2:]...)
	}
	e.messages = append(e.messages, m)
	rep := okReply()
	rep["MsgTime"], rep["MsgSeq"] = now.Unix(), e.seq
	return rep
}
