package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"voiceroom/internal/testenv"
)

// checkActivities drives the console's Activities page (signed in as
// app e2e's admin, Redis up): a leaderboard refused by the API (bands
// that overlap), its message next to the form and nothing created; the
// corrected leaderboard and a daily task created, listed; gifts sent in
// room (two users of region SEA) scored onto the leaderboard's board and
// into the task's completions, its reward paid; the leaderboard cancelled
// after a confirmation.
func checkActivities(t *testing.T, b *browser, c *client, room string) {
	t.Helper()
	c.ok("POST", "/admin/v1/gifts", "admin", `{"gift_id":7,"name":"Rocket","price":100,"heat":40}`, nil)
	for _, u := range []string{"47", "48"} {
		c.ok("PUT", "/api/v1/users/me", u, `{"display_user_id":"con`+u+`","country":"SG"}`, nil)
		c.ok("POST", "/admin/v1/wallets/"+u+"/credit", "admin", `{"amount":1000,"idempotency_key":"console-`+u+`"}`, nil)
		c.ok("POST", "/api/v1/rooms/"+room+"/join", u, "", nil)
	}
	// The window starts a few seconds ahead (a start in the past may go
	// back only as far as the stream holds events) and runs for a day.
	start := time.Now().UTC().Truncate(time.Second).Add(5 * time.Second)
	startField, endField := start.Format("2006-01-02T15:04:05"), start.Add(24*time.Hour).Format("2006-01-02T15:04:05")

	b.open("/console/activities")
	b.waitText("main h1", "Activities")
	b.waitText("#activities", "No activities yet.")
	// create fills the create form (fields by name, band rows by their
	// labels) and submits it, in one script as browser.submit does.
	create := func(fields map[string]string, bands [][3]string) {
		t.Helper()
		sel := map[string]string{}
		for name, v := range fields {
			sel[`[name="`+name+`"]`] = v
		}
		for i, band := range bands {
			for j, col := range []string{"from rank", "to rank", "coins"} {
				sel[fmt.Sprintf(`input[aria-label="band %d %s"]`, i, col)] = band[j]
			}
		}
		vals, err := json.Marshal(sel)
		if err != nil {
			t.Fatal(err)
		}
		b.waitFor(fmt.Sprintf(`(() => {
			if (document.querySelector('main[aria-busy]')) return false;
			const f = document.querySelector('#create form'), vals = %s;
			if (!f) return false;
			for (const [sel, v] of Object.entries(vals)) {
				const e = f.querySelector(sel);
				if (!e) return false;
				e.value = v;
			}
			f.querySelector('button').click();
			return true;
		})()`, vals))
	}
	board := map[string]string{"name": "Top senders <SEA>", "kind": "leaderboard", "metric": "gift_value_sent",
		"starts_at_ms": startField, "ends_at_ms": endField}
	// The API's refusal (the browser's checks of each field pass: only the
	// API knows bands must not overlap), next to the form, which keeps what
	// was entered.
	create(board, [][3]string{{"1", "3", "100"}, {"2", "5", "10"}})
	b.waitText("#create .error", "rewards: bands 1..3 and 2..5 overlap")
	if got := eval[string](b, `document.querySelector('#create [name="name"]').value`); got != board["name"] {
		t.Fatalf("the form lost the name: %q", got)
	}
	var list struct {
		Items []struct {
			ActivityID int64  `json:"activity_id"`
			Name       string `json:"name"`
			Status     string `json:"status"`
		} `json:"items"`
	}
	c.ok("GET", "/admin/v1/activities", "admin", "", &list)
	if len(list.Items) != 0 {
		t.Fatalf("a refused definition created %+v", list.Items)
	}
	create(board, [][3]string{{"1", "1", "500"}, {"2", "3", "100"}, {"", "", ""}})
	b.waitText(".flash", "(Top senders <SEA>) created: ")
	b.waitText("#activities", "Top senders <SEA>")
	create(map[string]string{"name": "Two rockets a day", "kind": "task", "metric": "gift_count", "starts_at_ms": startField,
		"ends_at_ms": endField, "target": "2", "period": "day", "reward_coins": "5"}, nil)
	b.waitText(".flash", "(Two rockets a day) created: ")
	b.waitText("#activities", "Two rockets a day")
	c.ok("GET", "/admin/v1/activities", "admin", "", &list)
	if len(list.Items) != 2 {
		t.Fatalf("activities %+v, want the leaderboard and the task", list.Items)
	}
	lb, task := strconv.FormatInt(list.Items[0].ActivityID, 10), strconv.FormatInt(list.Items[1].ActivityID, 10)

	// Once the window runs, user 47 sends 2 rockets (200 coins), 48 one.
	testenv.Eventually(t, 30*time.Second, func() error {
		var a struct {
			Status string `json:"status"`
		}
		c.ok("GET", "/admin/v1/activities/"+lb, "admin", "", &a)
		if a.Status != "running" {
			return fmt.Errorf("activity %s is %s", lb, a.Status)
		}
		return nil
	})
	c.ok("POST", "/api/v1/rooms/"+room+"/gift", "47", `{"gift_id":7,"count":2,"receiver_user_id":48}`, nil)
	c.ok("POST", "/api/v1/rooms/"+room+"/gift", "48", `{"gift_id":7,"count":1,"receiver_user_id":47}`, nil)

	// The leaderboard's live board.
	testenv.Eventually(t, 30*time.Second, func() error {
		b.open("/console/activities/" + lb)
		rows := eval[string](b, `[...document.querySelectorAll('#board tbody tr')].map(r => r.innerText.replace(/\s+/g, ' ').trim()).join('|')`)
		if rows != "1 47 200|2 48 100" {
			return fmt.Errorf("board rows %q", rows)
		}
		return nil
	})
	b.waitText("main h1", "Top senders <SEA>")
	b.waitFor(`document.querySelector('#settlement [aria-current="step"]').textContent === 'open'`)

	// The task's completions: two scored today, 47 reached 2 rockets and is
	// paid while the task runs.
	testenv.Eventually(t, 30*time.Second, func() error {
		b.open("/console/activities/" + task)
		row := eval[string](b, `[...document.querySelectorAll('#completions tbody td')].slice(1).map(td => td.innerText.trim()).join(' ')`)
		if row != "2 1 1 5" {
			return fmt.Errorf("completions %q, want participants 2, reached 1, paid 1, coins 5", row)
		}
		return nil
	})
	b.waitText("#payouts", "activity:"+task+":task:")

	// Cancel the leaderboard, after the confirmation.
	b.open("/console/activities/" + lb)
	b.submit(`form[action="/console/activities/`+lb+`/cancel"]`, map[string]string{})
	b.confirm("Cancel activity " + lb + "?")
	b.waitText(".flash", "Activity "+lb+" cancelled")
	b.waitText("#settlement", "nothing more is paid")
	var a struct {
		Status string `json:"status"`
	}
	c.ok("GET", "/admin/v1/activities/"+lb, "admin", "", &a)
	if a.Status != "cancelled" {
		t.Fatalf("activity %s is %s after the cancel", lb, a.Status)
	}
	b.open("/console/activities")
	b.waitFor(`document.querySelector('tr[data-activity="` + lb + `"] .tag').textContent === 'cancelled'`)
	if eval[bool](b, `document.querySelector('main sea') !== null`) || !strings.Contains(b.mainText(), "Top senders <SEA>") {
		t.Fatal("an activity's name is not shown as text")
	}
}
