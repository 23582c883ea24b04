package roomcluster_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"voiceroom/apperr"
	"voiceroom/roomcluster"
	"voiceroom/roomevent"
	"voiceroom/rooms"
)

// v1Request is version 1's routed request, frozen as voiceroom 1.x's api
// processes send it (roomcluster/wire.go's request, before version 2).
type v1Request struct {
	Call      string           `json:"call,omitempty"`
	AppCode   string           `json:"app"`
	RoomID    string           `json:"room,omitempty"`
	CommandID string           `json:"cid,omitempty"`
	ClientKey bool             `json:"ck,omitempty"`
	RequestID string           `json:"rid,omitempty"`
	Kind      rooms.Kind       `json:"kind,omitempty"`
	Actor     rooms.Actor      `json:"actor"`
	Args      rooms.Args       `json:"args"`
	Password  string           `json:"pw,omitempty"`
	GiftID    int64            `json:"gift,omitempty"`
	RegionID  int64            `json:"region,omitempty"`
	Reason    string           `json:"reason,omitempty"`
	Create    *v1CreateRequest `json:"create,omitempty"`
	GroupID   string           `json:"group,omitempty"`
	Read      string           `json:"read,omitempty"`
	UserID    int64            `json:"user,omitempty"`
	TimeoutMs int64            `json:"t"`
}

// v1CreateRequest is version 1's rooms.CreateRequest.
type v1CreateRequest struct {
	Title       string `json:"title"`
	CoverURL    string `json:"cover_url,omitempty"`
	Description string `json:"description,omitempty"`
	SeatCount   int    `json:"seat_count,omitempty"`
	Mode        string `json:"mode,omitempty"`
	SeatMode    string `json:"seat_mode,omitempty"`
	RoomID      string `json:"room_id,omitempty"`
}

// v1Reply is the reply, as version 1 reads it.
type v1Reply struct {
	View     *rooms.View `json:"view,omitempty"`
	Replayed bool        `json:"replayed,omitempty"`
	Node     string      `json:"node"`
	Err      *struct {
		Code       apperr.Code `json:"code"`
		Message    string      `json:"message"`
		Field      string      `json:"field,omitempty"`
		NotServing bool        `json:"not_serving,omitempty"`
	} `json:"err,omitempty"`
	Requests []rooms.MicRequest `json:"requests,omitempty"`
	GuardApp string             `json:"gapp,omitempty"`
	Found    bool               `json:"found,omitempty"`
	Present  bool               `json:"present,omitempty"`
}

// v1Op is the endpoint version 1 sent a request to.
func v1Op(r v1Request) string {
	switch {
	case r.GroupID != "":
		return "guard"
	case r.Call == "" && r.Read == "mic_requests":
		return "mic_requests"
	case r.Call == "":
		return "view"
	}
	return "command"
}

// TestVersion1Requests: a version 2 rooms node answers every request of
// a version 1 api process (an upgrade replaces the rooms nodes first):
// each command of version 1's, with its inputs beside the command (a
// create's request, a password, a gift, a region, a reason), and the
// three reads; an internal kind is refused there as well. The node
// announces version 2.0.0 with its .execute endpoint.
func TestVersion1Requests(t *testing.T) {
	cfg := roomcluster.Config{Partitions: 8, LeaseTTL: 2 * time.Second}
	h := newHarness(t, cfg)
	n := h.startNode("n1")
	h.waitBalanced(h.router("api"), n)
	if err := n.svc.UpsertGift(context.Background(), testApp, rooms.Gift{GiftID: 3, Name: "Rose", Heat: 5, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	nc, _ := h.connect("v1-api")
	send := func(r v1Request) v1Reply {
		t.Helper()
		r.TimeoutMs = 10_000
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := nc.Request(roomcluster.SubjectPrefix+"."+n.node.ID()+"."+v1Op(r), data, 10*time.Second)
		if err != nil {
			t.Fatalf("%s %s: %v", r.Call, r.Kind, err)
		}
		var rep v1Reply
		if err := json.Unmarshal(msg.Data, &rep); err != nil {
			t.Fatalf("%s %s: reply %q: %v", r.Call, r.Kind, msg.Data, err)
		}
		if rep.Node != n.node.ID() {
			t.Fatalf("%s %s: answered by %q", r.Call, r.Kind, rep.Node)
		}
		return rep
	}
	ok := func(r v1Request) rooms.View {
		t.Helper()
		rep := send(r)
		if rep.Err != nil || rep.View == nil {
			t.Fatalf("%s %s: %+v", r.Call, r.Kind, rep.Err)
		}
		return *rep.View
	}
	owner, admin := rooms.Actor{UserID: 1}, rooms.Actor{Admin: true, Operator: "admin:1"}
	roomID := rooms.NewRoomID(testApp, 1, "v1-create", true)
	cmd := func(call string, kind rooms.Kind, actor rooms.Actor) v1Request {
		return v1Request{Call: call, AppCode: testApp, RoomID: roomID, CommandID: rooms.NewCommandID(), Kind: kind, Actor: actor}
	}

	create := v1Request{Call: "create", AppCode: testApp, RoomID: roomID, CommandID: "v1-create", ClientKey: true, Actor: owner,
		Create: &v1CreateRequest{Title: " Old API ", SeatCount: 6, RoomID: roomID}}
	if v := ok(create); v.RoomID != roomID || v.Title != "Old API" || v.SeatCount != 6 || v.OwnerUserID != 1 || v.VisibleRegionID != 5 {
		t.Fatalf("create: %+v", v)
	}
	if again := send(create); again.Err != nil || !again.Replayed {
		t.Fatalf("create again: %+v", again)
	}
	setPW := cmd("set_password", rooms.KindSetRoomPassword, owner)
	setPW.Password = "secret"
	if v := ok(setPW); !v.Locked {
		t.Fatalf("set_password: %+v", v)
	}
	wrong := cmd("join", rooms.KindJoinRoom, rooms.Actor{UserID: 2})
	wrong.Password = "wrong"
	if rep := send(wrong); rep.Err == nil || rep.Err.Code != apperr.PermissionDenied {
		t.Fatalf("join with a wrong password: %+v", rep.Err)
	}
	join := cmd("join", rooms.KindJoinRoom, rooms.Actor{UserID: 2})
	join.Password = "secret"
	ok(join)
	ok(cmd("execute", rooms.KindJoinRoom, owner)) // the owner needs none
	gift := cmd("send_gift", rooms.KindSendGift, rooms.Actor{UserID: 2})
	gift.GiftID, gift.Args = 3, rooms.Args{Count: 2, TargetUserID: 1}
	if v := ok(gift); v.Heat != 10 || v.OnlineCount != 2 {
		t.Fatalf("send_gift: %+v", v)
	}
	region := cmd("change_region", rooms.KindChangeRoomVisibleRegion, admin)
	region.RegionID, region.Reason = 0, "to GLOBAL" // 0 is omitted on the wire
	if v := ok(region); v.VisibleRegionID != 0 {
		t.Fatalf("change_region: %+v", v)
	}
	region.CommandID, region.Reason = rooms.NewCommandID(), ""
	if rep := send(region); rep.Err == nil || rep.Err.Field != "reason" {
		t.Fatalf("change_region without a reason: %+v", rep.Err)
	}

	if v := ok(v1Request{AppCode: testApp, RoomID: roomID}); v.RoomID != roomID || v.Heat != 10 {
		t.Fatalf("view: %+v", v)
	}
	if rep := send(v1Request{AppCode: testApp, RoomID: roomID, Read: "mic_requests", Actor: owner}); rep.Err != nil || len(rep.Requests) != 0 {
		t.Fatalf("mic_requests: %+v", rep)
	}
	if rep := send(v1Request{AppCode: testApp, RoomID: roomID, Read: "mic_requests", Actor: rooms.Actor{UserID: 2}}); rep.Err == nil ||
		rep.Err.Code != apperr.PermissionDenied {
		t.Fatalf("mic_requests by a member: %+v", rep.Err)
	}
	if rep := send(v1Request{GroupID: roomevent.IMGroupID(testApp, roomID), UserID: 2}); rep.GuardApp != testApp || !rep.Found || !rep.Present {
		t.Fatalf("guard: %+v", rep)
	}

	sweep := cmd("execute", rooms.KindSweepStale, admin)
	sweep.Args.UserIDs = []int64{2}
	if rep := send(sweep); rep.Err == nil || rep.Err.Field != "kind" {
		t.Fatalf("SweepStale from outside: %+v", rep.Err)
	}
	ban := cmd("ban", rooms.KindBanRoom, admin)
	ban.Reason = "spam"
	if v := ok(ban); v.Status != roomevent.StatusBanned || v.OnlineCount != 0 {
		t.Fatalf("ban: %+v", v)
	}
	restore := cmd("restore", rooms.KindRestoreRoom, admin)
	restore.Reason = "appeal"
	if v := ok(restore); v.Status != roomevent.StatusActive {
		t.Fatalf("restore: %+v", v)
	}
	closing := cmd("close", rooms.KindCloseRoom, admin)
	closing.Reason = "done"
	if v := ok(closing); v.Status != roomevent.StatusClosed {
		t.Fatalf("close: %+v", v)
	}
	page, err := n.svc.Audit(context.Background(), testApp, roomID, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range page.Items {
		reasons = append(reasons, string(e.Action)+":"+e.Reason)
	}
	if want := []string{"close:done", "restore:appeal", "ban:spam", "region_change:to GLOBAL"}; !slices.Equal(reasons, want) {
		t.Fatalf("audit trail %v, want %v", reasons, want)
	}

	// The micro service is version 2, with .execute beside version 1's
	// .command.
	infoMsg, err := nc.Request("$SRV.INFO."+roomcluster.ServiceName, nil, 5*time.Second) // the one node
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(infoMsg.Data, &info); err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, e := range info.Endpoints {
		subjects = append(subjects, e.Subject)
	}
	prefix := roomcluster.SubjectPrefix + "." + n.node.ID() + "."
	if info.Version != "2.0.0" || !slices.Contains(subjects, prefix+"execute") || !slices.Contains(subjects, prefix+"command") {
		t.Fatalf("micro service %s with %v", info.Version, subjects)
	}
}
