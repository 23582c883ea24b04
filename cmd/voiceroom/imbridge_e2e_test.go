package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/imbridge"
	"voiceroom/imemu"
	"voiceroom/internal/testenv"
)

// TestServeIMAcceptance is the README's outbox promise, end to end: with
// Tencent IM failing, JoinRoom still succeeds; once IM is back the
// emulator holds the join's event exactly once, in a group created from
// RoomCreated; the join-group callback allows the joined user and denies
// another.
func TestServeIMAcceptance(t *testing.T) {
	emu, err := imemu.New(imemu.Config{Apps: []imbridge.Application{{SDKAppID: 1400000001, Admin: "administrator", SecretKey: "e2e-key"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(emu)
	defer srv.Close()
	if err := emu.SetFault(imemu.Fault{Mode: "http500"}); err != nil {
		t.Fatal(err)
	}
	p, vars := startServe(t, "VOICEROOM_TIM_DOMAIN="+srv.URL, "VOICEROOM_TIM_SDKAPPID=1400000001",
		"VOICEROOM_TIM_SECRET_KEY=e2e-key", "VOICEROOM_TIM_CALLBACK_TOKEN=cb-token", "VOICEROOM_IMBRIDGE_BACKOFF=100ms,200ms")
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	c := &client{t: t, base: base, secret: []byte(vars["VOICEROOM_JWT_SECRET"])}
	for _, u := range []string{"21", "22"} {
		c.ok("PUT", "/api/v1/users/me", u, `{"display_user_id":"imuser`+u+`"}`, nil)
	}
	var room struct {
		RoomID    string `json:"room_id"`
		IMGroupID string `json:"im_group_id"`
	}
	c.ok("POST", "/api/v1/rooms/create", "21", `{"room_name":"IM down"}`, &room)
	c.ok("POST", "/api/v1/rooms/"+room.RoomID+"/join", "22", ``, nil)
	testenv.Eventually(t, 20*time.Second, func() error {
		if st := emu.Stats(); st.Errors["http500"] < 2 {
			return fmt.Errorf("bridge has not tried yet: %+v", st)
		}
		return nil
	})
	if st := emu.Stats(); st.Messages != 0 {
		t.Fatalf("messages while IM is down: %+v", st)
	}

	emu.ClearFault()
	var joinID string
	testenv.Eventually(t, 20*time.Second, func() error {
		for _, m := range emu.Messages(room.IMGroupID, 0) {
			if m.Desc == "RoomUserJoined" && strings.Contains(m.Data, `"user_id":22`) {
				joinID = m.EventIDs[0]
				return nil
			}
		}
		return fmt.Errorf("join not shown; groups %+v", emu.Groups())
	})
	// A repeat could come only from a delivery not yet acknowledged: once
	// the bridge's durable has acknowledged every event, the count is final.
	js := mustJetStream(t, vars)
	testenv.Eventually(t, 20*time.Second, func() error {
		_, err := consumerSettled(t.Context(), js, bus.DurableIMBridge)
		return err
	})
	if ev, ok := emu.Event(joinID); !ok || ev.Shown != 1 {
		t.Fatalf("join event %+v", ev)
	}
	if g := emu.Groups(); len(g) != 1 || g[0].GroupID != room.IMGroupID || g[0].Owner != "21" {
		t.Fatalf("groups %+v", g)
	}

	at := fmt.Sprint(time.Now().Unix())
	for user, want := range map[string]int{"22": 0, "23": 1} {
		url := base + "/im/callback?SdkAppid=1400000001&CallbackCommand=Group.CallbackBeforeApplyJoinGroup&RequestTime=" + at + "&Sign=" + imbridge.Sign("cb-token", at)
		body := fmt.Sprintf(`{"CallbackCommand":"Group.CallbackBeforeApplyJoinGroup","GroupId":%q,"Requestor_Account":%q}`, room.IMGroupID, user)
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var r imbridge.CallbackReply
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || r.ErrorCode != want {
			t.Fatalf("callback for %s: %d %+v %v, want ErrorCode %d", user, resp.StatusCode, r, err, want)
		}
	}
}
