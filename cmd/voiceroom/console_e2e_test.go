package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"voiceroom/authtoken"
	"voiceroom/imbridge"
	"voiceroom/imemu"
	"voiceroom/internal/testenv"
)

// browsers are the names Chromium goes by (Debian's package is chromium).
var browsers = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// findBrowser is the path of a Chromium, installed for this test when
// there is none (testTool: only this test needs it).
func findBrowser(tb testing.TB) string {
	tb.Helper()
	return testTool(tb, "chromium", func() string {
		for _, b := range browsers {
			if p, err := exec.LookPath(b); err == nil {
				return p
			}
		}
		return ""
	})
}

// browser is a headless Chromium tab, started by the test, that fails the
// test on any error in its console (a script error, a CSP violation, a
// failed request) when the test ends.
type browser struct {
	t    testing.TB
	ctx  context.Context
	base string
	mu   sync.Mutex
	errs []string
}

func newTestBrowser(t testing.TB, base string) *browser {
	t.Helper()
	path := findBrowser(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, base: base}
	messages := chromedp.Console(ctx)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start %s: %v", path, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.errs = append(b.errs, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		<-done
		for _, e := range b.errors() {
			t.Errorf("browser console: %s", e)
		}
	})
	return b
}

func (b *browser) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.errs)
}

// do runs steps, failing the test on an error.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// open loads a console page as a new navigation (the shell, then its
// content) and waits for the content.
func (b *browser) open(path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base + path))
	b.waitFor(`!document.querySelector('main[aria-busy]') && !!document.querySelector('main h1')`)
}

// eval is a JavaScript expression's value.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor waits until a JavaScript expression is true (evaluated through
// DevTools, which the page's CSP does not restrict).
func (b *browser) waitFor(expr string) {
	b.t.Helper()
	testenv.Eventually(b.t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("not yet: %s; page: %s", expr, b.mainText())
		}
		return nil
	})
}

// mainText is the page's content, for failure messages.
func (b *browser) mainText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('main') ? document.querySelector('main').innerText : ''`))
	if len(s) > 1500 {
		s = s[:1500] + "…"
	}
	return s
}

// waitText waits until the element sel shows text.
func (b *browser) waitText(sel, text string) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent.includes(%q))`, sel, text))
}

// submit sets form fields by CSS selector, then clicks the button: in one
// script, once the page is not loading, so that no content swapped in
// between finding a field and setting it (a page shown twice) can leave a
// stale node behind.
func (b *browser) submit(form string, fields map[string]string) {
	b.t.Helper()
	vals, err := json.Marshal(fields)
	if err != nil {
		b.t.Fatal(err)
	}
	sel, _ := json.Marshal(form)
	b.waitFor(fmt.Sprintf(`(() => {
		if (document.querySelector('main[aria-busy]')) return false;
		const f = document.querySelector(%s), vals = %s;
		if (!f) return false;
		for (const [name, v] of Object.entries(vals)) {
			const e = f.querySelector('[name="' + name + '"]');
			if (!e) return false;
			e.value = v;
		}
		const btn = f.querySelector('button');
		if (!btn) return false;
		btn.click();
		return true;
	})()`, sel, vals))
}

// confirm answers the confirmation an action asks for.
func (b *browser) confirm(question string) {
	b.t.Helper()
	b.waitText(".confirm p", question)
	b.do(chromedp.Click(chromedp.CSS(".confirm button")))
}

// signIn pastes token into the sign-in form.
func (b *browser) signIn(token string) {
	b.t.Helper()
	b.waitFor(`!!document.querySelector('form[data-signin] textarea')`)
	b.submit("form[data-signin]", map[string]string{"token": token})
}

// issue mints a token of app for user (0: an admin token).
func issue(t testing.TB, secret []byte, app string, user int64) string {
	t.Helper()
	role := ""
	if user == 0 {
		role = authtoken.RoleAdmin
	}
	tok, err := authtoken.Issue(secret, app, user, role, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// fragment fetches a console page's content over HTTP as the console's
// script does, with token, and returns the status and body.
func fragment(t testing.TB, base, token, method, path string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Console", "1")
	req.Header.Set("Authorization", "Bearer "+token)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(raw)
}

// TestConsoleInABrowser drives the operators' console in a headless
// Chromium against a real serve (MySQL, a Redis of its own, embedded
// JetStream, the IM emulator failing permanently so that letters die):
// sign-in, a region and a country, a region's list, a pin and a hide seen
// by a user of that region through the API, a ban and a restore, the
// replay of a dead letter, the Activities page (checkActivities),
// sign-out; a user's token and another app's
// admin see and change nothing; the pages answer with Redis stopped. Any
// error in the browser's console fails it. With
// VOICEROOM_UPDATE_SCREENSHOT=1 it rewrites docs/console.png.
func TestConsoleInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("server and browser test")
	}
	findBrowser(t)
	rds := testenv.RunRedis(t)
	emu, err := imemu.New(imemu.Config{Apps: []imbridge.Application{{SDKAppID: 1400000001, Admin: "administrator", SecretKey: "e2e-key"}}})
	if err != nil {
		t.Fatal(err)
	}
	im := httptest.NewServer(emu)
	defer im.Close()
	if err := emu.SetFault(imemu.Fault{Mode: "error", ErrorCode: imbridge.CodeInvalidRequest}); err != nil {
		t.Fatal(err)
	}
	p, vars := startServe(t, "VOICEROOM_REDIS_ADDR="+rds.Socket(), "VOICEROOM_TIM_DOMAIN="+im.URL,
		"VOICEROOM_TIM_SDKAPPID=1400000001", "VOICEROOM_TIM_SECRET_KEY=e2e-key", "VOICEROOM_TIM_CALLBACK_TOKEN=cb-token",
		"VOICEROOM_IMBRIDGE_BACKOFF=100ms,200ms")
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	secret := []byte(vars["VOICEROOM_JWT_SECRET"])
	c := &client{t: t, base: base, secret: secret}
	admin := issue(t, secret, "e2e", 0)

	b := newTestBrowser(t, base)

	// Sign in.
	b.open("/console/")
	b.signIn(admin)
	b.waitText("main h1", "Regions and countries")
	if got := eval[string](b, `sessionStorage.getItem('voiceroom.console.token')`); got != admin {
		t.Fatalf("the tab keeps %q, want the token", got)
	}
	if u := eval[string](b, `location.href`); strings.Contains(u, "eyJ") {
		t.Fatalf("the token is in the URL %s", u)
	}

	// A region and a country in it.
	b.submit(`form[action="/console/regions"]`, map[string]string{"region_code": "SEA", "name": "Southeast Asia"})
	b.waitText(".flash", "Region SEA created.")
	var regions struct {
		Regions []struct {
			RegionID   int64  `json:"region_id"`
			RegionCode string `json:"region_code"`
		} `json:"regions"`
	}
	c.ok("GET", "/admin/v1/regions", "admin", "", &regions)
	if len(regions.Regions) != 1 || regions.Regions[0].RegionCode != "SEA" {
		t.Fatalf("regions %+v", regions.Regions)
	}
	sea := strconv.FormatInt(regions.Regions[0].RegionID, 10)
	b.submit(`form[action="/console/countries"]`, map[string]string{"country_code": "SG", "name": "Singapore", "region_id": sea})
	b.waitText(".flash", "Country SG created.")
	// The country's row names its region, and its Move menu starts there.
	b.waitText("tr", "SEA · Southeast Asia")
	if got := eval[string](b, `document.querySelector('form[action="/console/countries/SG"] select[name="region_id"]').value`); got != sea {
		t.Fatalf("SG's Move menu starts at region %q, want its own, %s", got, sea)
	}

	// Users of the region and their rooms (the IM bridge dead-letters the
	// rooms' events: the emulator refuses them).
	for _, u := range []string{"41", "42", "43", "44", "45", "46"} {
		c.ok("PUT", "/api/v1/users/me", u, `{"display_user_id":"con`+u+`","country":"SG"}`, nil)
	}
	var roomA, roomB roomView
	c.ok("POST", "/api/v1/rooms/create", "41", `{"room_name":"Karaoke night"}`, &roomA)
	c.ok("POST", "/api/v1/rooms/create", "42", `{"room_name":"Morning chat"}`, &roomB)
	for i, title := range []string{"Study with me", "Guitar corner", "Late night talk"} {
		c.ok("POST", "/api/v1/rooms/create", strconv.Itoa(44+i), `{"room_name":"`+title+`"}`, nil)
	}
	const rooms = 5
	if roomA.VisibleRegionID != regions.Regions[0].RegionID {
		t.Fatalf("room listed in region %d, want %s", roomA.VisibleRegionID, sea)
	}

	// The region's list, as its users get it.
	testenv.Eventually(t, 30*time.Second, func() error {
		b.open("/console/lists?region=" + sea)
		if n := eval[int](b, `document.querySelectorAll('#rooms .card').length`); n != rooms {
			return fmt.Errorf("%d cards", n)
		}
		return nil
	})

	// Pin B, hide A.
	b.do(chromedp.Click(chromedp.CSS(`.card[data-room="` + roomB.RoomID + `"] details summary`)))
	b.submit(`.card[data-room="`+roomB.RoomID+`"] form[action="/console/pins"]`, map[string]string{"reason": "featured"})
	b.waitText(".flash", "pinned in region "+sea)
	b.do(chromedp.Click(chromedp.CSS(`.card[data-room="` + roomA.RoomID + `"] details:last-of-type summary`)))
	b.submit(`.card[data-room="`+roomA.RoomID+`"] form[action="/console/hides"]`, map[string]string{"reason": "spam reports"})
	b.waitText(".flash", "hidden in region "+sea)

	// A user of the region gets B pinned first and no A.
	testenv.Eventually(t, 30*time.Second, func() error {
		var list struct {
			Rooms []struct {
				RoomID string `json:"room_id"`
				Pinned bool   `json:"pinned"`
			} `json:"rooms"`
		}
		c.ok("GET", "/api/v1/rooms?tab=hot", "43", "", &list)
		if len(list.Rooms) != rooms-1 || list.Rooms[0].RoomID != roomB.RoomID || !list.Rooms[0].Pinned {
			return fmt.Errorf("user 43 gets %+v, want %d rooms, %s first, pinned", list.Rooms, rooms-1, roomB.RoomID)
		}
		for _, r := range list.Rooms {
			if r.RoomID == roomA.RoomID {
				return fmt.Errorf("user 43 still gets the hidden room %s", r.RoomID)
			}
		}
		return nil
	})
	b.open("/console/lists?region=" + sea)
	b.waitFor(`document.querySelector('#rooms .card.pinned') !== null`)
	// The pins and hides tables name the rooms by title (the hidden one
	// is in no list: its title comes from the room), linking to them.
	b.waitFor(`[...document.querySelectorAll('table')].some(t => t.textContent.includes('Morning chat') && t.querySelector('a[href="/console/rooms/` + roomB.RoomID + `"]'))`)
	b.waitFor(`[...document.querySelectorAll('table')].some(t => t.textContent.includes('Karaoke night') && t.querySelector('a[href="/console/rooms/` + roomA.RoomID + `"]'))`)
	b.waitText("h2", "Pins in SEA · Southeast Asia")
	screenshot(t, b)

	// Ban and restore A, from its page, with reasons.
	b.open("/console/rooms/" + roomA.RoomID)
	b.waitText("dd", "SEA · Southeast Asia") // the region it is listed in
	b.submit(`form[action$="/ban"]`, map[string]string{"reason": "abuse"})
	b.confirm("Ban room " + roomA.RoomID)
	b.waitText(".flash", "banned")
	var status struct {
		Status string `json:"status"`
	}
	c.ok("GET", "/admin/v1/rooms/"+roomA.RoomID, "admin", "", &status)
	if status.Status != "banned" {
		t.Fatalf("room A is %s after the ban", status.Status)
	}
	b.submit(`form[action$="/restore"]`, map[string]string{"reason": "appeal granted"})
	b.waitText(".flash", "restored")
	b.waitText("table", "appeal granted") // the audit trail
	c.ok("GET", "/admin/v1/rooms/"+roomA.RoomID, "admin", "", &status)
	if status.Status != "active" {
		t.Fatalf("room A is %s after the restore", status.Status)
	}

	// Activities: created (after the API's refusal), listed, scored from
	// gifts, cancelled.
	checkActivities(t, b, c, roomB.RoomID)

	// A user's token and another app's admin see and change nothing.
	checkOutsiders(t, b, base, secret, roomA.RoomID, sea)
	// A platform operator sees the apps, and no app's pages; an app's
	// admin the reverse.
	checkPlatform(t, b, base, admin)

	// With Redis stopped the pages still answer, from MySQL.
	b.signIn(admin)
	rds.Stop()
	b.open("/console/lists?region=" + sea)
	b.waitFor(fmt.Sprintf(`document.querySelectorAll('#rooms .card').length === %d`, rooms-1))
	b.open("/console/rooms/" + roomB.RoomID)
	b.waitText("dd", "Morning chat")
	rds.Start()

	// Replay a dead letter of the IM bridge once IM is healthy.
	var letters deadLetterPage
	testenv.Eventually(t, 30*time.Second, func() error {
		c.ok("GET", "/admin/v1/dlq?sink=imbridge&limit=100", "admin", "", &letters)
		if len(letters.Items) == 0 {
			return fmt.Errorf("no dead letters yet")
		}
		return nil
	})
	emu.ClearFault()
	first := letters.Items[0]
	b.open("/console/delivery?sink=imbridge")
	b.waitText("table", first.EventID)
	b.do(chromedp.Click(chromedp.CSS(`input[name="seq"][value="` + strconv.FormatUint(first.Seq, 10) + `"]`)))
	b.do(chromedp.Click(chromedp.CSS(`form[action="/console/delivery/replay"] button`)))
	b.confirm("Replay 1 dead letter(s) to sink imbridge?")
	b.waitText(".flash", "Replayed 1 letter(s), skipped 0.")
	testenv.Eventually(t, 30*time.Second, func() error {
		c.ok("GET", "/admin/v1/dlq?sink=imbridge&limit=100", "admin", "", &letters)
		for _, l := range letters.Items {
			if l.Seq == first.Seq {
				return fmt.Errorf("letter %d still there", first.Seq)
			}
		}
		return nil
	})

	// Sign out: the tab forgets the token.
	b.do(chromedp.Click(chromedp.CSS(`a[data-signout]`)))
	b.waitFor(`!!document.querySelector('form[data-signin]')`)
	if got := eval[string](b, `sessionStorage.getItem('voiceroom.console.token') || ''`); got != "" {
		t.Fatal("the token is still in the tab after signing out")
	}
	b.open("/console/regions")
	b.waitFor(`!!document.querySelector('form[data-signin]')`)

	if logs := p.logs.String(); strings.Contains(logs, admin) || strings.Contains(logs, admin[strings.LastIndex(admin, ".")+1:]) {
		t.Fatal("serve logged the admin token")
	}
}

// checkOutsiders signs in with a user's token and with another app's
// admin token: the first is refused and signed out, the second sees none
// of app e2e's rooms, regions or letters, and its actions on them fail
// with the API's message and change nothing.
func checkOutsiders(t *testing.T, b *browser, base string, secret []byte, room, region string) {
	t.Helper()
	user := issue(t, secret, "e2e", 43)
	b.do(chromedp.Click(chromedp.CSS(`a[data-signout]`)))
	b.signIn(user)
	b.waitText(".error", "admin role required")
	if got := eval[string](b, `sessionStorage.getItem('voiceroom.console.token') || ''`); got != "" {
		t.Fatal("a refused token stays in the tab")
	}
	for _, path := range []string{"/console/lists?region=" + region, "/console/rooms/" + room, "/console/delivery?sink=imbridge"} {
		status, body := fragment(t, base, user, "GET", path, nil)
		if status != 200 || !strings.Contains(body, "admin role required") || strings.Contains(body, room) {
			t.Fatalf("a user's token on %s: %d %s", path, status, body)
		}
	}
	if status, _ := fragment(t, base, user, "POST", "/console/rooms/"+room+"/ban", url.Values{"reason": {"x"}, "confirm": {"yes"}}); status != http.StatusForbidden {
		t.Fatalf("a user's ban: %d, want 403", status)
	}

	other := issue(t, secret, "other", 0)
	b.signIn(other)
	b.waitText("main h1", "Regions and countries")
	b.waitText(".who", "other")
	b.open("/console/lists?region=" + region)
	b.waitFor(`document.querySelectorAll('#rooms .card').length === 0`)
	b.open("/console/rooms/" + room)
	b.waitText(".error", "room not found")
	b.open("/console/delivery?sink=imbridge")
	b.waitText("table", "No dead letters.")
	// Its forms carry its own csrf field; the API refuses the action.
	_, page := fragment(t, base, other, "GET", "/console/regions", nil)
	csrf := between(page, `name="csrf" value="`, `"`)
	if csrf == "" {
		t.Fatalf("no csrf field in %s", page)
	}
	status, body := fragment(t, base, other, "POST", "/console/rooms/"+room+"/ban",
		url.Values{"csrf": {csrf}, "back": {"/console/rooms/" + room}, "reason": {"x"}, "confirm": {"yes"}})
	if status != 200 || !strings.Contains(body, "room not found") {
		t.Fatalf("another app's ban: %d %s", status, body)
	}
	var st struct {
		Status string `json:"status"`
	}
	(&client{t: t, base: base, secret: secret}).ok("GET", "/admin/v1/rooms/"+room, "admin", "", &st)
	if st.Status != "active" {
		t.Fatalf("another app's admin changed the room: %s", st.Status)
	}
	b.do(chromedp.Click(chromedp.CSS(`a[data-signout]`)))
}

// checkPlatform signs in with a platform operator's token: the console
// shows the apps (and no app's sections), registers an app whose key the
// API then accepts, rotates its key and disables it; an app's page says
// it is not for this token, without signing the tab out. Signed in with an
// app's admin token, the apps' page says the same.
func checkPlatform(t *testing.T, b *browser, base, appAdmin string) {
	t.Helper()
	platform := platformTok(t)
	b.signIn(platform)
	b.waitText("main h1", "Apps and their keys")
	b.waitText(".who", "platform operator")
	if n := eval[int](b, `document.querySelectorAll('nav a[href="/console/regions"]').length`); n != 0 {
		t.Fatal("a platform operator is shown an app's sections")
	}
	b.submit(`form[action="/console/apps"]`, map[string]string{"app_code": "browserapp"})
	b.waitText(".flash", "App browserapp registered.")
	flash := eval[string](b, `document.querySelector('.flash').textContent`)
	kid, secret := between(flash, "Key ", ","), between(flash, "secret ", " ")
	if kid == "" || len(secret) != 64 {
		t.Fatalf("the new key is not shown: %q", flash)
	}
	b.waitText("table", kid)
	appTok := signed(t, authtoken.Key{ID: kid, Secret: []byte(secret)}, "browserapp", 0)
	if a := callWith(t, base, "GET", "/admin/v1/regions", appTok, ""); a.status != 200 {
		t.Fatalf("the key the console showed: %d %s", a.status, a.message)
	}
	b.submit(`form[action="/console/apps/browserapp/rotate"]`, map[string]string{"grace_seconds": "3600"})
	b.confirm("Give app browserapp a new key?")
	b.waitText(".flash", "App browserapp has a new key.")
	b.waitText("table", "retiring")
	b.do(chromedp.Click(chromedp.CSS(`form[action="/console/apps/browserapp/status"] button`)))
	b.confirm("Disable app browserapp?")
	b.waitText(".flash", "App browserapp is disabled.")
	if a := callWith(t, base, "GET", "/admin/v1/regions", appTok, ""); a.status != 401 {
		t.Fatalf("a disabled app's token: %d, want 401", a.status)
	}
	b.open("/console/regions")
	b.waitText(".error", "This page is for an app's admins")
	if got := eval[string](b, `sessionStorage.getItem('voiceroom.console.token') || ''`); got != platform {
		t.Fatal("an app's page signed the platform operator out")
	}
	b.do(chromedp.Click(chromedp.CSS(`a[data-signout]`)))

	b.signIn(appAdmin)
	b.waitText("main h1", "Regions and countries")
	if n := eval[int](b, `document.querySelectorAll('nav a[href="/console/apps"]').length`); n != 0 {
		t.Fatal("an app's admin is shown the apps' section")
	}
	b.open("/console/apps")
	b.waitText(".error", "This page is for platform operators")
	if got := eval[string](b, `sessionStorage.getItem('voiceroom.console.token') || ''`); got != appAdmin {
		t.Fatal("the apps' page signed the app's admin out")
	}
	if status, body := fragment(t, base, appAdmin, "POST", "/console/apps", url.Values{"app_code": {"sneaky"}}); status != http.StatusForbidden {
		t.Fatalf("an app's admin posting the apps' form without its csrf: %d %s", status, body)
	}
	_, page := fragment(t, base, appAdmin, "GET", "/console/regions", nil)
	status, body := fragment(t, base, appAdmin, "POST", "/console/apps",
		url.Values{"csrf": {between(page, `name="csrf" value="`, `"`)}, "back": {"/console/apps"}, "app_code": {"sneaky"}})
	if status != 200 || !strings.Contains(body, "platform operator token required") {
		t.Fatalf("an app's admin registering an app: %d %s", status, body)
	}
	b.do(chromedp.Click(chromedp.CSS(`a[data-signout]`)))
}

// between is the text of s between the first start and the next end.
func between(s, start, end string) string {
	_, rest, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, end)
	return v
}

// screenshot rewrites docs/console.png from the page shown, when
// VOICEROOM_UPDATE_SCREENSHOT=1.
func screenshot(t *testing.T, b *browser) {
	t.Helper()
	if os.Getenv("VOICEROOM_UPDATE_SCREENSHOT") != "1" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatal("the screenshot is not a PNG")
	}
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "console.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("wrote docs/console.png")
}

// TestConsoleOff: with VOICEROOM_CONSOLE=false, /console is an unknown
// route, and the API serves as before.
func TestConsoleOff(t *testing.T) {
	p, vars := startServe(t, "VOICEROOM_CONSOLE=false")
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	for _, path := range []string{"/console", "/console/", "/console/assets/console.js"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
	if status := adminOf(t, base, []byte(vars["VOICEROOM_JWT_SECRET"]), "e2e", "GET", "/admin/v1/regions", "", nil); status != 200 {
		t.Fatalf("GET /admin/v1/regions: %d", status)
	}
}
