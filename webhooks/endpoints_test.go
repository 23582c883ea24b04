package webhooks_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
	"voiceroom/webhooks"
)

// TestEndpointsAdmin: create answers the secret once, list and get never
// do; an app holds at most MaxEndpointsPerApp; another app's endpoint is
// NOT_FOUND; patch and delete.
func TestEndpointsAdmin(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	e, err := h.endpoints.Create(ctx, "app1", "admin:7", webhooks.NewEndpoint{URL: "http://127.0.0.1:9/a", EventTypes: []string{"RoomClosed", "RoomClosed", "RoomCreated"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.Secret, webhooks.SecretPrefix) || !e.Enabled || e.CreatedBy != "admin:7" {
		t.Errorf("created %+v", e)
	}
	if got := strings.Join(e.EventTypes, ","); got != "RoomClosed,RoomCreated" {
		t.Errorf("event types %q, want repeats dropped", got)
	}
	list, err := h.endpoints.List(ctx, "app1")
	if err != nil || len(list) != 1 || list[0].ID != e.ID {
		t.Fatalf("list %+v, %v", list, err)
	}
	if _, err := h.endpoints.Get(ctx, "app2", e.ID); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("another app's get: %v, want NOT_FOUND", err)
	}
	if _, err := h.endpoints.Delete(ctx, "app2", e.ID); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("another app's delete: %v, want NOT_FOUND", err)
	}
	for range webhooks.MaxEndpointsPerApp - 1 {
		h.create("app1", "http://127.0.0.1:9/b")
	}
	if _, err := h.endpoints.Create(ctx, "app1", "admin:7", webhooks.NewEndpoint{URL: "http://127.0.0.1:9/c"}); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Errorf("a sixth endpoint: %v, want FAILED_PRECONDITION", err)
	}
	h.create("app2", "http://127.0.0.1:9/other") // another app's count is its own

	url, off, types := "http://127.0.0.1:9/new", false, []string{}
	got, err := h.endpoints.Update(ctx, "app1", "admin:8", e.ID, webhooks.Patch{URL: &url, Enabled: &off, EventTypes: &types})
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != url || got.Enabled || got.PausedReason != "paused by admin:8" || got.PausedAtMs == 0 || len(got.EventTypes) != 0 {
		t.Errorf("patched %+v", got)
	}
	on := true
	if got, err = h.endpoints.Update(ctx, "app1", "admin:8", e.ID, webhooks.Patch{Enabled: &on}); err != nil || !got.Enabled || got.PausedReason != "" {
		t.Errorf("resumed %+v, %v", got, err)
	}
	bad := []string{"RoomNope"}
	if _, err := h.endpoints.Update(ctx, "app1", "admin:8", e.ID, webhooks.Patch{EventTypes: &bad}); !apperr.Is(err, apperr.InvalidArgument) {
		t.Errorf("unknown event type: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := h.endpoints.Delete(ctx, "app1", e.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.endpoints.Get(ctx, "app1", e.ID); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("deleted: %v, want NOT_FOUND", err)
	}
}

// TestSecretsAreSealed: the table holds the secret sealed (the key is not
// in the row), and a row moved to another app does not open.
func TestSecretsAreSealed(t *testing.T) {
	h := newHarness(t)
	e := h.create("app1", "http://127.0.0.1:9/a")
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(e.Secret, webhooks.SecretPrefix))
	if err != nil || len(key) != 32 {
		t.Fatalf("secret %q: %v", e.Secret, err)
	}
	sealed := testenv.Scalar[[]byte](t, h.db, `SELECT secret FROM webhook_endpoints WHERE endpoint_id = ?`, e.ID)
	if bytes.Contains(sealed, key) || bytes.Contains(sealed, []byte(e.Secret)) {
		t.Fatal("the secret is stored in clear")
	}
	if _, err := h.db.Exec(`UPDATE webhook_endpoints SET app_code = 'app2' WHERE endpoint_id = ?`, e.ID); err != nil {
		t.Fatal(err)
	}
	// The sink does not deliver to an endpoint whose secret does not open.
	rc := newReceiver(t)
	url := rc.url()
	if _, err := h.endpoints.Update(context.Background(), "app2", "admin:7", e.ID, webhooks.Patch{URL: &url}); err != nil {
		t.Fatal(err)
	}
	h.startSink(testConfig())
	h.publish(roomEvents("app2", []string{"r1"}, 2)...)
	waitDrained(t, h)
	waitCursor(t, h, e.ID, true)
	if n := len(rc.requests()); n != 0 {
		t.Errorf("delivered %d requests with a secret that does not open", n)
	}
}

// TestURLPolicy: https only unless http is allowed; never a user or
// password; no loopback, private, link-local or internal address, by
// literal or by name, unless allowed.
func TestURLPolicy(t *testing.T) {
	ctx := context.Background()
	strict := webhooks.Policy{}
	httpOK := webhooks.Policy{AllowHTTP: true}
	for _, tc := range []struct {
		p    webhooks.Policy
		url  string
		want string // "" accepted, else a part of the error
	}{
		{strict, "https://93.184.216.34/hook", ""},
		{strict, "https://[2606:2800:220:1:248:1893:25c8:1946]:8443/hook?x=1", ""},
		{strict, "http://93.184.216.34/hook", "must be https"},
		{httpOK, "http://93.184.216.34/hook", ""},
		{strict, "ftp://93.184.216.34/hook", "must be https"},
		{strict, "https://user:pw@93.184.216.34/hook", "user or password"},
		{strict, "https://93.184.216.34/hook#frag", "fragment"},
		{strict, "https:///nohost", "must name a host"},
		{strict, "https://127.0.0.1/hook", "loopback"},
		{strict, "https://localhost/hook", "loopback"},
		{strict, "https://[::1]/hook", "loopback"},
		{strict, "https://[::ffff:127.0.0.1]/hook", "loopback"},
		{strict, "https://10.1.2.3/hook", "private"},
		{strict, "https://172.16.0.1/hook", "private"},
		{strict, "https://192.168.1.1/hook", "private"},
		{strict, "https://[fd00::1]/hook", "private"},
		{strict, "https://169.254.169.254/latest/meta-data", "link-local"},
		{strict, "https://[fe80::1]/hook", "link-local"},
		{strict, "https://0.0.0.0/hook", "unspecified"},
		{strict, "https://100.64.0.1/hook", "internal"},
		{strict, "https://239.1.2.3/hook", "multicast"},
		{strict, "https://224.0.0.251/hook", "link-local"},
		{strict, "https://no-such-host.invalid/hook", "does not resolve"},
		{allowLocal, "http://127.0.0.1:8080/hook", ""},
		{allowLocal, "http://localhost:8080/hook", ""},
	} {
		_, err := tc.p.CheckURL(ctx, tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.url, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s: accepted, want %q", tc.url, tc.want)
		case tc.want != "" && (!apperr.Is(err, apperr.InvalidArgument) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want INVALID_ARGUMENT about %q", tc.url, err, tc.want)
		}
	}
}

// TestPrivateAddressRefusedWhenDialled: an URL whose host resolves to a
// loopback address when the sink connects (accepted when it was set, as
// after a DNS change) is never dialled: every attempt fails, the receiver
// hears nothing, the history says why.
func TestPrivateAddressRefusedWhenDialled(t *testing.T) {
	h := newHarness(t)
	rc := newReceiver(t)
	url := strings.Replace(rc.url(), "127.0.0.1", "localhost", 1)
	e := h.create("app1", url) // the admin side allows it (a name that resolved elsewhere then)
	cfg := testConfig()
	cfg.Policy = webhooks.Policy{AllowHTTP: true} // the sink does not
	h.startSink(cfg)
	h.publish(roomEvents("app1", []string{"r1"}, 1)...)
	hist := h.waitHistory("app1", e.ID, 3)
	for _, d := range hist {
		if d.Outcome != webhooks.OutcomeFailed || d.Status != 0 || !strings.Contains(d.Error, "refused") || !strings.Contains(d.Error, "loopback") {
			t.Errorf("attempt %+v: want failed, refused, loopback", d)
		}
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("the receiver got %d requests", n)
	}
}

// TestRotationSignsWithBoth: after a rotation every delivery carries two
// signatures, one per secret, until the window ends; a rotation without
// a window signs with the new secret alone.
func TestRotationSignsWithBoth(t *testing.T) {
	h := newHarness(t)
	oldRC := newReceiver(t)
	e := h.create("app1", oldRC.url())
	ctx := context.Background()
	rotated, err := h.endpoints.RotateSecret(ctx, "app1", e.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Secret == e.Secret || rotated.PreviousSecretUntilMs < time.Now().Add(23*time.Hour).UnixMilli() {
		t.Fatalf("rotated %+v: want a new secret and the old one for 24h", rotated)
	}
	oldRC.setSecrets(e.Secret) // a receiver not switched over yet
	h.startSink(testConfig())
	envs := roomEvents("app1", []string{"r1"}, 1)
	h.publish(envs...)
	oldRC.waitAccepted(idsByRoom(envs), 30*time.Second)
	oldRC.checkVerified()
	r := oldRC.requests()[0]
	if r.sigs != 2 {
		t.Errorf("%d signatures during the window, want 2", r.sigs)
	}
	if err := verify(rotated.Secret, r.header, r.body, time.Now()); err != nil {
		t.Errorf("the new secret does not verify: %v", err)
	}

	zero := time.Duration(0)
	again, err := h.endpoints.RotateSecret(ctx, "app1", e.ID, &zero)
	if err != nil {
		t.Fatal(err)
	}
	if again.PreviousSecretUntilMs != 0 {
		t.Errorf("rotated without a window: previous secret until %d", again.PreviousSecretUntilMs)
	}
	oldRC.setSecrets(again.Secret)
	more := roomEvents("app1", []string{"r2"}, 1)
	// The sink sees the new secret within its refresh interval.
	testenv.Eventually(t, 30*time.Second, func() error {
		h.publish(more...)
		for _, r := range oldRC.requests() {
			if r.room == "r2" && r.verified == nil {
				if r.sigs != 1 {
					return errors.New("two signatures after a rotation without a window")
				}
				if verify(rotated.Secret, r.header, r.body, time.Now()) == nil {
					return errors.New("the previous secret still verifies")
				}
				return nil
			}
		}
		more = roomEvents("app1", []string{"r2"}, 1)
		return errWaiting
	})
}

// TestChangesNeedTheStreamPosition: with JetStream down, a creation and a
// change of event types are UNAVAILABLE (the endpoint's start cannot be
// read) and change nothing; a pause still works.
func TestChangesNeedTheStreamPosition(t *testing.T) {
	h := newHarness(t)
	e := h.create("app1", "http://127.0.0.1:9/a", "RoomClosed")
	h.js.Stop()
	ctx := context.Background()
	if _, err := h.endpoints.Create(ctx, "app1", "admin:7", webhooks.NewEndpoint{URL: "http://127.0.0.1:9/b"}); !apperr.Is(err, apperr.Unavailable) {
		t.Errorf("create with JetStream down: %v, want UNAVAILABLE", err)
	}
	types := []string{"RoomClosed", "RoomCreated"}
	if _, err := h.endpoints.Update(ctx, "app1", "admin:7", e.ID, webhooks.Patch{EventTypes: &types}); !apperr.Is(err, apperr.Unavailable) {
		t.Errorf("widening with JetStream down: %v, want UNAVAILABLE", err)
	}
	off := false
	if _, err := h.endpoints.Update(ctx, "app1", "admin:7", e.ID, webhooks.Patch{Enabled: &off}); err != nil {
		t.Errorf("pause with JetStream down: %v", err)
	}
	list, err := h.endpoints.List(ctx, "app1")
	if err != nil || len(list) != 1 || len(list[0].EventTypes) != 1 || list[0].Enabled {
		t.Errorf("after the refusals: %+v, %v; want the one endpoint, paused, types unchanged", list, err)
	}
}
