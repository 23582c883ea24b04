package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"voiceroom/apiclient"
)

// The create form's shape. Its values go to the API as they are; only a
// value that is not a number (or a time) where the API's JSON wants one is
// refused here, naming the API's field. Every rule (names, windows,
// bands, budgets, catalog, regions) is the API's, answered with its 400.
const (
	// bandRows is the rows of reward bands the create form offers.
	bandRows = 5
	// formTime is the create form's time fields' format (a datetime-local
	// input), read as UTC.
	formTime = "2006-01-02T15:04"
	// boardTop is the entries of an activity's board its page shows.
	boardTop = 20
)

// activityFormKey carries the create form's values back to the page that
// shows its error, so the operator corrects them instead of retyping.
type activityFormKey struct{}

// activityForm is the create form as the page fills it.
type activityForm struct {
	Values url.Values
	Error  string
}

// Get is a field's value as entered, or def when the form is new.
func (f *activityForm) Get(name, def string) string {
	if f.Values == nil {
		return def
	}
	return f.Values.Get(name)
}

// Has reports whether the multiple-choice field name has v chosen.
func (f *activityForm) Has(name string, v any) bool {
	want := fmt.Sprint(v)
	for _, x := range f.Values[name] {
		if x == want {
			return true
		}
	}
	return false
}

// Band is the entered values of band row i.
func (f *activityForm) Band(i int) []string {
	out := make([]string, 3)
	for j, name := range []string{"band_from", "band_to", "band_coins"} {
		if vs := f.Values[name]; i < len(vs) {
			out[j] = vs[i]
		}
	}
	return out
}

// activitiesPage: the app's activities (GET /admin/v1/activities), a page
// at a time, and the create form.
func (c *Console) activitiesPage(k *call) error {
	k.v.Title, k.v.Section = "Activities", "activities"
	q := k.r.URL.Query()
	start := c.now().UTC().Truncate(time.Hour).Add(time.Hour)
	form := &activityForm{}
	if v, ok := k.r.Context().Value(activityFormKey{}).(url.Values); ok {
		// The create form's error goes next to it, with what was entered.
		form.Values, form.Error, k.v.Error = v, k.v.Error, ""
	}
	d := map[string]any{"Cursor": q.Get("cursor"), "Form": form, "Bands": make([]int, bandRows),
		"DefaultStart": start.Format(formTime), "DefaultEnd": start.Add(7 * 24 * time.Hour).Format(formTime)}
	k.v.Data = d
	var regions map[string]any
	if err := k.get("/admin/v1/regions", nil, &regions); err != nil {
		return err
	}
	d["Regions"] = regions["regions"]
	list := url.Values{"limit": {strconv.Itoa(c.cfg.PageSize)}}
	if cur := q.Get("cursor"); cur != "" {
		list.Set("cursor", cur)
	}
	var page map[string]any
	err := k.get("/admin/v1/activities", list, &page)
	d["Page"] = page
	return err
}

// activityPage: one activity (GET /admin/v1/activities/{id}), its live
// board (top 20), a task's completions per period, and its settlement with
// a page of its payouts. A read that fails is shown as an error, the
// others still.
func (c *Console) activityPage(k *call) error {
	d := map[string]any{}
	k.v.Title, k.v.Section, k.v.Data = "Activity", "activities", d
	id, err := pathInt(k.r, "id")
	if err != nil || id <= 0 {
		return invalid("activity_id", "must be a positive number")
	}
	k.v.Title, d["ID"] = fmt.Sprintf("Activity %d", id), id
	base := fmt.Sprintf("/admin/v1/activities/%d", id)
	var a map[string]any
	if err := k.get(base, nil, &a); err != nil {
		return err
	}
	d["Activity"] = a
	k.v.Title = fmt.Sprintf("Activity %d · %v", id, a["name"])
	var errs []string
	more := func(err error) error {
		var ae *apiclient.Error
		if errors.As(err, &ae) && refused(ae) {
			return err
		}
		errs = append(errs, c.message(err))
		return nil
	}
	var board map[string]any
	bq := url.Values{"limit": {strconv.Itoa(boardTop)}}
	if p := k.r.URL.Query().Get("period"); p != "" {
		bq.Set("period_start_ms", p) // a past period's board, from the completions
		d["Period"] = p
	}
	if err := k.get(base+"/board", bq, &board); err != nil {
		if err := more(err); err != nil {
			return err
		}
	}
	d["Board"] = board
	if a["kind"] == "task" {
		var comp map[string]any
		if err := k.get(base+"/completions", nil, &comp); err != nil {
			if err := more(err); err != nil {
				return err
			}
		}
		d["Completions"] = comp
	}
	pq := url.Values{"limit": {strconv.Itoa(c.cfg.PageSize)}}
	if cur := k.r.URL.Query().Get("cursor"); cur != "" {
		pq.Set("cursor", cur)
		d["Cursor"] = cur
	}
	var payouts map[string]any
	if err := k.get(base+"/payouts", pq, &payouts); err != nil {
		if err := more(err); err != nil {
			return err
		}
	}
	d["Payouts"] = payouts
	if p, ok := payouts["settlement"].(map[string]any); ok {
		d["Steps"] = settleSteps(fmt.Sprint(p["settle_state"]))
	}
	if len(errs) > 0 {
		k.v.Error = strings.TrimSpace(k.v.Error + " " + strings.Join(errs, " "))
	}
	return nil
}

// settleStates are the settlement's stored states in their order (docs/
// activities.md, "Settlement and rewards"); cancelled stands apart.
var settleStates = []string{"open", "frozen", "paying", "settled"}

// step is one state of the settlement as its page shows it.
type step struct {
	Name          string
	Done, Current bool
}

// settleSteps are the settlement's states with state marked current and
// those before it done (none for cancelled, which leaves the line).
func settleSteps(state string) []step {
	at := -1
	for i, s := range settleStates {
		if s == state {
			at = i
		}
	}
	out := make([]step, len(settleStates))
	for i, s := range settleStates {
		out[i] = step{Name: s, Done: i < at || (at == len(settleStates)-1 && i == at), Current: i == at}
	}
	return out
}

// createActivity turns the create form into POST /admin/v1/activities.
// On a refusal the page shows the API's message next to the form, with
// the values entered.
func (c *Console) createActivity(k *call) (string, error) {
	body, err := activityBody(k.r)
	if err == nil {
		var out struct {
			ActivityID int64  `json:"activity_id"`
			Name       string `json:"name"`
			Status     string `json:"status"`
		}
		if err = k.send(http.MethodPost, "/admin/v1/activities", body, &out); err == nil {
			return fmt.Sprintf("Activity %d (%s) created: %s.", out.ActivityID, out.Name, out.Status), nil
		}
	}
	k.r = k.r.WithContext(context.WithValue(k.r.Context(), activityFormKey{}, k.r.PostForm))
	return "", err
}

// activityBody is the API's JSON of the create form: a leaderboard's
// bands, or a task's target, period and reward (the other kind's fields
// are left out; an unknown kind sends both, for the API to refuse).
func activityBody(r *http.Request) (map[string]any, error) {
	kind := formText(r, "kind")
	body := map[string]any{"name": formText(r, "name"), "kind": kind, "metric": formText(r, "metric")}
	for _, name := range []string{"gift_ids", "region_ids"} {
		ids, err := formIDs(r, name)
		if err != nil {
			return nil, err
		}
		if ids != nil {
			body[name] = ids
		}
	}
	for _, name := range []string{"starts_at_ms", "ends_at_ms"} {
		ms, err := formTimeMs(r, name)
		if err != nil {
			return nil, err
		}
		if ms != 0 {
			body[name] = ms
		}
	}
	if kind != "task" {
		var bands []map[string]int64
		from, to, coins := r.PostForm["band_from"], r.PostForm["band_to"], r.PostForm["band_coins"]
		for i := range max(len(from), len(to), len(coins)) {
			row := map[string]int64{}
			for _, col := range []struct {
				name string
				vals []string
			}{{"from_rank", from}, {"to_rank", to}, {"coins", coins}} {
				name, vals := col.name, col.vals
				if i >= len(vals) || strings.TrimSpace(vals[i]) == "" {
					continue
				}
				n, err := strconv.ParseInt(strings.TrimSpace(vals[i]), 10, 64)
				if err != nil {
					return nil, invalid(fmt.Sprintf("rewards[%d].%s", len(bands), name), "must be a whole number")
				}
				row[name] = n
			}
			if len(row) > 0 {
				bands = append(bands, row)
			}
		}
		if bands != nil || kind == "leaderboard" {
			body["rewards"] = bands
		}
	}
	if kind != "leaderboard" {
		for _, name := range []string{"target", "reward_coins"} {
			if formText(r, name) == "" {
				continue
			}
			n, err := formInt(r, name, 0)
			if err != nil {
				return nil, err
			}
			body[name] = n
		}
		if p := formText(r, "period"); p != "" {
			body["period"] = p
		}
	}
	return body, nil
}

// formIDs reads a list of ids (commas or spaces between them); empty is
// nil (the API's "absent").
func formIDs(r *http.Request, name string) ([]int64, error) {
	var ids []int64
	for _, s := range r.PostForm[name] {
		for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return nil, invalid(name, "must be ids, whole numbers separated by commas")
			}
			ids = append(ids, n)
		}
	}
	return ids, nil
}

// formTimeMs reads a datetime-local field (UTC) as Unix ms; empty is 0
// (absent).
func formTimeMs(r *http.Request, name string) (int64, error) {
	s := formText(r, name)
	if s == "" {
		return 0, nil
	}
	t, err := time.Parse(formTime+":05", s) // with seconds (step="1")
	if err != nil {
		if t, err = time.Parse(formTime, s); err != nil {
			return 0, invalid(name, "must be a date and time, YYYY-MM-DDTHH:MM[:SS] (UTC)")
		}
	}
	return t.UnixMilli(), nil
}

// activityOps are an activity's operator actions: the API's path under
// the activity, and what the flash says.
var activityOps = map[string]struct{ path, done, question string }{
	"cancel": {"/cancel", "cancelled: nothing is paid",
		"Cancel activity %d? Scoring and settlement stop and nothing more is paid. This cannot be undone."},
	"settle": {"/settle", "ends in 2 s and settles after the grace",
		"Settle activity %d now? It ends 2 s from now and its rewards are paid after the settlement grace."},
	"rerun": {"/settlement/rerun", "settlement re-run: the next round pays what is still unpaid",
		"Re-run the settlement of activity %d? Its lease is freed and the next round pays only what is still unpaid."},
}

func confirmActivityOp(k *call) string {
	op, ok := activityOps[k.r.PathValue("op")]
	if !ok {
		return ""
	}
	return fmt.Sprintf(op.question, pathIntOr0(k.r, "id"))
}

// activityOp cancels, settles now or re-runs an activity's settlement.
func (c *Console) activityOp(k *call) (string, error) {
	op, ok := activityOps[k.r.PathValue("op")]
	if !ok {
		return "", invalid("action", "must be cancel, settle or rerun")
	}
	id, err := pathInt(k.r, "id")
	if err != nil {
		return "", invalid("activity_id", "must be a positive number")
	}
	if err := k.send(http.MethodPost, fmt.Sprintf("/admin/v1/activities/%d%s", id, op.path), nil, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("Activity %d %s.", id, op.done), nil
}

// pathIntOr0 is an integer path value, 0 when it is none.
func pathIntOr0(r *http.Request, name string) int64 {
	n, _ := strconv.ParseInt(r.PathValue(name), 10, 64)
	return n
}
