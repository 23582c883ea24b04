package main

import (
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"voiceroom/internal/testenv"
)

// insertActivities writes the scenario's activities of app e2e as rows
// (running from an hour ago for a day): a leaderboard of coins sent, a
// task of one gift, and a leaderboard only for a region nobody is in.
// It returns their ids.
func (a *apiDriver) insertActivities() (board, task, elsewhere int64) {
	a.t.Helper()
	db, err := sql.Open("mysql", a.dsn)
	if err != nil {
		a.t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UnixMilli()
	insert := func(kind, metric, regions string, target, reward int64) int64 {
		var region any
		if regions != "" {
			region = regions
		}
		period := ""
		if kind == "task" {
			period = "window"
		}
		res, err := db.Exec(`INSERT INTO activities (app_code, name, kind, metric, region_ids, starts_at_ms, ends_at_ms, target, period,
			reward_coins, status, created_at_ms, updated_at_ms) VALUES ('e2e', 'openapi', ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?)`,
			kind, metric, region, now-3600_000, now+86400_000, target, period, reward, now, now)
		if err != nil {
			a.t.Fatal(err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			a.t.Fatal(err)
		}
		return id
	}
	return insert("leaderboard", "gift_value_sent", "", 0, 0), insert("task", "gift_count", "", 1, 5),
		insert("leaderboard", "gift_value_sent", "[999999]", 0, 0)
}

// activityBoards reads the boards and progress after user 23's gift of 3
// rockets (300 coins) in room A, and their errors.
func (a *apiDriver) activityBoards(board, task, elsewhere int64) {
	a.t.Helper()
	b, t, e := strconv.FormatInt(board, 10), strconv.FormatInt(task, 10), strconv.FormatInt(elsewhere, 10)
	var got struct {
		Items []struct {
			Rank   int   `json:"rank"`
			UserID int64 `json:"user_id"`
			Score  int64 `json:"score"`
		} `json:"items"`
		Me *struct {
			Rank  int   `json:"rank"`
			Score int64 `json:"score"`
		} `json:"me"`
	}
	testenv.Eventually(a.t, 20*time.Second, func() error {
		a.ok("GET", "/api/v1/activities/"+b+"/board?limit=10", "23", "", &got)
		if len(got.Items) != 1 || got.Items[0].UserID != 23 || got.Items[0].Score != 300 || got.Me == nil || got.Me.Rank != 1 {
			return fmt.Errorf("board after a gift of 300: %+v", got)
		}
		return nil
	})
	a.ok("GET", "/api/v1/activities/"+b+"/board?around=me&limit=3", "21", "", &got)
	if got.Me != nil {
		a.t.Errorf("user 21 sent nothing, yet has a place: %+v", got.Me)
	}
	var progress struct {
		Current struct {
			Score  int64  `json:"score"`
			Status string `json:"status"`
		} `json:"current"`
	}
	// The target reached, the activity role's settlement loop pays the
	// reward while the task runs: pending, then paid.
	testenv.Eventually(a.t, 20*time.Second, func() error {
		a.ok("GET", "/api/v1/activities/"+t+"/progress", "23", "", &progress)
		if progress.Current.Score != 3 || progress.Current.Status != "paid" {
			return fmt.Errorf("progress after 3 gifts: %+v", progress)
		}
		return nil
	})
	for _, q := range []string{"limit=0", "limit=101", "around=you"} {
		a.fail("GET", "/api/v1/activities/"+b+"/board?"+q, "23", "", 400, "INVALID_ARGUMENT", true)
	}
	a.fail("GET", "/api/v1/activities/"+b+"/board?cursor=nope", "23", "", 400, "INVALID_ARGUMENT", false)
	a.fail("GET", "/api/v1/activities/"+b+"/progress", "23", "", 400, "INVALID_ARGUMENT", false)
	for _, id := range []string{e, "999999"} {
		a.fail("GET", "/api/v1/activities/"+id+"/board", "23", "", 404, "NOT_FOUND", false)
		a.fail("GET", "/api/v1/activities/"+id+"/progress", "23", "", 404, "NOT_FOUND", false)
	}

	// The operators' reads: the same board without a place, whatever
	// regions the activity names, and the task's completions per period.
	a.ok("GET", "/admin/v1/activities/"+b+"/board?limit=10", "admin", "", &got)
	if len(got.Items) != 1 || got.Items[0].UserID != 23 || got.Items[0].Score != 300 || got.Me != nil {
		a.t.Errorf("the operator's board: %+v, want user 23 at 300 and no place", got)
	}
	a.ok("GET", "/admin/v1/activities/"+e+"/board", "admin", "", nil)
	var completions struct {
		Periods []struct {
			Participants int64 `json:"participants"`
			Reached      int64 `json:"reached"`
			Paid         int64 `json:"paid"`
			CoinsPaid    int64 `json:"coins_paid"`
		} `json:"periods"`
	}
	a.ok("GET", "/admin/v1/activities/"+t+"/completions", "admin", "", &completions)
	if len(completions.Periods) != 1 || completions.Periods[0].Participants != 1 || completions.Periods[0].Reached != 1 ||
		completions.Periods[0].Paid != 1 || completions.Periods[0].CoinsPaid != 5 {
		a.t.Errorf("the task's completions: %+v, want one period: 1 participant, 1 reached, 1 paid, 5 coins", completions)
	}
	for _, q := range []string{"limit=0", "limit=101"} {
		a.fail("GET", "/admin/v1/activities/"+b+"/board?"+q, "admin", "", 400, "INVALID_ARGUMENT", true)
	}
	a.fail("GET", "/admin/v1/activities/"+b+"/board?cursor=nope", "admin", "", 400, "INVALID_ARGUMENT", false)
	var one struct {
		PeriodStartMs int64 `json:"period_start_ms"`
	}
	a.ok("GET", "/admin/v1/activities/"+t+"/board", "admin", "", &one)
	a.ok("GET", "/admin/v1/activities/"+t+"/board?period_start_ms="+strconv.FormatInt(one.PeriodStartMs, 10), "admin", "", nil)
	a.fail("GET", "/admin/v1/activities/"+t+"/board?period_start_ms="+strconv.FormatInt(one.PeriodStartMs+1, 10), "admin", "", 400, "INVALID_ARGUMENT", false)
	a.fail("GET", "/admin/v1/activities/"+t+"/board?period_start_ms=0", "admin", "", 400, "INVALID_ARGUMENT", true)
	a.fail("GET", "/admin/v1/activities/"+b+"/completions", "admin", "", 400, "INVALID_ARGUMENT", false)
	a.fail("GET", "/admin/v1/activities/0/completions", "admin", "", 400, "INVALID_ARGUMENT", true)
	a.fail("GET", "/admin/v1/activities/999999/board", "admin", "", 404, "NOT_FOUND", false)
	a.fail("GET", "/admin/v1/activities/999999/completions", "admin", "", 404, "NOT_FOUND", false)
}
