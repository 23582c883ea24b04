package main

import (
	"time"

	"voiceroom/authtoken"
)

// platform drives the platform operators' routes: success and the typical
// errors of each, and what a key made there does to the app's tokens.
func (a *apiDriver) platform() {
	const apps = "/platform/v1/apps"
	var created struct {
		NewKey struct {
			KeyID  string `json:"key_id"`
			Secret string `json:"secret"`
		} `json:"new_key"`
	}
	a.ok("POST", apps, "platform", `{"app_code":"oasapp"}`, &created)
	if created.NewKey.KeyID == "" || len(created.NewKey.Secret) != 64 {
		a.t.Fatalf("create app: answered %+v", created)
	}
	a.fail("POST", apps, "platform", `{"app_code":"oasapp"}`, 409, "ALREADY_EXISTS", false)
	a.fail("POST", apps, "platform", `{"app_code":"bad.app"}`, 400, "INVALID_ARGUMENT", true)
	a.fail("POST", apps, "platform", `{}`, 400, "INVALID_ARGUMENT", true)
	a.ok("GET", apps, "platform", "", nil)

	// The key signs the app's tokens; a disabled app's are refused.
	key := authtoken.Key{ID: created.NewKey.KeyID, Secret: []byte(created.NewKey.Secret)}
	as := func(k authtoken.Key, want int, code string) {
		a.t.Helper()
		tok, err := k.Issue("oasapp", 31, "", time.Hour, time.Now())
		if err != nil {
			a.t.Fatal(err)
		}
		a.do(call{method: "GET", path: "/api/v1/users/me", header: map[string]string{"Authorization": "Bearer " + tok}, want: want, code: code})
	}
	as(key, 404, "NOT_FOUND") // authenticated: no profile yet
	app := apps + "/oasapp"
	a.ok("GET", app, "platform", "", nil)
	a.fail("GET", apps+"/nobody", "platform", "", 404, "NOT_FOUND", false)
	a.fail("GET", apps+"/bad.app", "platform", "", 400, "INVALID_ARGUMENT", false)
	a.ok("PATCH", app, "platform", `{"status":"disabled"}`, nil)
	as(key, 401, "UNAUTHENTICATED")
	a.ok("PATCH", app, "platform", `{"status":"active"}`, nil)
	as(key, 404, "NOT_FOUND")
	a.fail("PATCH", app, "platform", `{"status":"paused"}`, 400, "INVALID_ARGUMENT", true)
	a.fail("PATCH", apps+"/nobody", "platform", `{"status":"active"}`, 404, "NOT_FOUND", false)

	// Rotation: both keys verify during the grace period; a third key
	// waits for the old one's revocation.
	var rotated struct {
		NewKey struct {
			KeyID  string `json:"key_id"`
			Secret string `json:"secret"`
		} `json:"new_key"`
	}
	a.ok("POST", app+"/keys/rotate", "platform", `{"grace_seconds":3600}`, &rotated)
	as(authtoken.Key{ID: rotated.NewKey.KeyID, Secret: []byte(rotated.NewKey.Secret)}, 404, "NOT_FOUND")
	as(key, 404, "NOT_FOUND")
	a.fail("POST", app+"/keys/rotate", "platform", "", 409, "FAILED_PRECONDITION", false)
	a.fail("POST", app+"/keys/rotate", "platform", `{"grace_seconds":-1}`, 400, "INVALID_ARGUMENT", true)
	a.fail("POST", apps+"/nobody/keys/rotate", "platform", "", 404, "NOT_FOUND", false)
	a.fail("POST", apps+"/cfgapp/keys/rotate", "platform", "", 409, "FAILED_PRECONDITION", false)
	a.ok("DELETE", app+"/keys/"+key.ID, "platform", "", nil)
	as(key, 401, "UNAUTHENTICATED")
	a.ok("POST", app+"/keys/rotate", "platform", `{"grace_seconds":0}`, nil)
	a.fail("DELETE", app+"/keys/oasapp-00000000", "platform", "", 404, "NOT_FOUND", false)
	a.fail("DELETE", app+"/keys/no$such", "platform", "", 400, "INVALID_ARGUMENT", true)
	a.fail("DELETE", apps+"/cfgapp/keys/cfg-1", "platform", "", 409, "FAILED_PRECONDITION", false)

	// The identity provider (a loopback URL that refuses: nothing is
	// fetched from elsewhere).
	jwks := `{"url":"https://127.0.0.1:1/jwks.json","issuer":"https://idp.test/","audience":"voiceroom","app_claim":"tenant"}`
	a.ok("PUT", app+"/jwks", "platform", jwks, nil)
	a.fail("PUT", app+"/jwks", "platform", `{"url":"http://127.0.0.1:1/jwks.json","issuer":"i","audience":"a"}`, 400, "INVALID_ARGUMENT", false)
	a.fail("PUT", apps+"/nobody/jwks", "platform", jwks, 404, "NOT_FOUND", false)
	a.ok("DELETE", app+"/jwks", "platform", "", nil)
	a.fail("DELETE", apps+"/nobody/jwks", "platform", "", 404, "NOT_FOUND", false)
	a.fail("DELETE", apps+"/bad.app/jwks", "platform", "", 400, "INVALID_ARGUMENT", false)
}
