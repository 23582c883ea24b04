package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"time"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	// when shows a Unix ms time in UTC; 0 is a dash.
	"when": func(v any) string {
		ms := num(v)
		if ms == 0 {
			return "—"
		}
		return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05")
	},
	// age shows a duration in ms, to the second.
	"age": func(v any) string {
		return (time.Duration(num(v)) * time.Millisecond).Round(time.Second).String()
	},
	// str is a value as text, to compare ids of answers with the query's.
	"str": func(v any) string { return fmt.Sprint(v) },
	// compact shows a JSON value (an audit entry's before and after).
	"compact": func(v any) string {
		if v == nil {
			return "—"
		}
		b, err := json.Marshal(v)
		if err != nil {
			return "?"
		}
		return string(b)
	},
	"pair": func(v, x any) pair { return pair{v, x} },
	// metrics and periods are the options of an activity's create form
	// (docs/activities.md); the API refuses any other.
	"metrics": func() []string {
		return []string{"gift_value_sent", "gift_value_received", "room_gift_value", "gift_count", "mic_seconds"}
	},
	"periods": func() []string { return []string{"day", "week", "window"} },
	// region is how a region is shown: its code and name ("SEA · Southeast
	// Asia"), GLOBAL for 0, "region N" for one the list lacks. regions is
	// an answer's list of regions (GET /admin/v1/regions).
	"region": regionLabel,
	// initial is a card's stand-in for a cover image (the CSP loads no
	// image of another origin).
	"initial": func(v any) string {
		for _, r := range fmt.Sprint(v) {
			return string(r)
		}
		return "?"
	},
}

// pair hands a sub-template the page's view and one item.
type pair struct{ V, X any }

// regionLabel is the template function region.
func regionLabel(regions, id any) string {
	want := fmt.Sprint(id)
	if want == "0" || want == "" {
		return "GLOBAL"
	}
	list, _ := regions.([]any)
	for _, r := range list {
		m, ok := r.(map[string]any)
		if !ok || fmt.Sprint(m["region_id"]) != want {
			continue
		}
		label := fmt.Sprint(m["region_code"])
		if name, _ := m["name"].(string); name != "" {
			label += " · " + name
		}
		return label
	}
	return "region " + want
}
