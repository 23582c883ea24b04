package roomranks

import (
	"sort"
	"time"

	"voiceroom"
	"voiceroom/apperr"
)

// Period is how long a rank counts: a day or a week of the app's calendar.
type Period string

// The periods.
const (
	Day  Period = "day"
	Week Period = "week"
)

// By is whose coins a rank orders: those sent, or those received.
type By string

// The orders.
const (
	BySender   By = "sender"
	ByReceiver By = "receiver"
)

// ParsePeriod returns the period named s, or INVALID_ARGUMENT naming
// "period".
func ParsePeriod(s string) (Period, error) {
	switch p := Period(s); p {
	case Day, Week:
		return p, nil
	}
	return "", apperr.Invalid("period", "must be day or week")
}

// ParseBy returns the order named s, or INVALID_ARGUMENT naming "by".
func ParseBy(s string) (By, error) {
	switch b := By(s); b {
	case BySender, ByReceiver:
		return b, nil
	}
	return "", apperr.Invalid("by", "must be sender or receiver")
}

// Window is one period of one app's calendar: [StartMs, EndMs) in Unix
// milliseconds.
type Window struct {
	Period  Period
	StartMs int64
	EndMs   int64
}

// Contains reports whether the instant atMs falls in w.
func (w Window) Contains(atMs int64) bool { return atMs >= w.StartMs && atMs < w.EndMs }

// Calendar places instants in the apps' days and weeks: a day starts at
// local midnight, a week on Monday at 00:00 local, in each app's time zone
// (UTC for an app without one). Days of a daylight-saving change last 23
// or 25 hours.
type Calendar struct {
	zones map[string]*time.Location
}

// NewCalendar returns the calendar of zones (app_code → IANA name); an
// unknown zone is an error.
func NewCalendar(zones map[string]string) (*Calendar, error) {
	c := &Calendar{zones: make(map[string]*time.Location, len(zones))}
	for app, name := range zones {
		loc, err := time.LoadLocation(name)
		if err != nil {
			return nil, apperr.BadConfig("TimeZones", "%w: TimeZones: app %s: %v", ErrInvalidConfig, app, err)
		}
		c.zones[app] = loc
	}
	return c, nil
}

// CheckTimeZones adds to checks, under field TimeZones, every entry of
// zones (app_code → IANA name, VOICEROOM_APP_TIMEZONES) whose app code is
// not valid or whose zone the Go time package does not know, in app
// order. Every user of a Calendar validates its zones with it.
func CheckTimeZones(checks *apperr.ConfigChecks, zones map[string]string) {
	apps := make([]string, 0, len(zones))
	for app := range zones {
		apps = append(apps, app)
	}
	sort.Strings(apps)
	for _, app := range apps {
		_, err := time.LoadLocation(zones[app])
		checks.Check(voiceroom.ValidAppCode(app), "TimeZones", "%q is not a valid app code", app)
		checks.Check(err == nil && zones[app] != "", "TimeZones", "app %s: unknown time zone %q (want an IANA name such as Asia/Shanghai)", app, zones[app])
	}
}

// Location is the time zone of app.
func (c *Calendar) Location(app string) *time.Location {
	if loc, ok := c.zones[app]; ok {
		return loc
	}
	return time.UTC
}

// Window returns the period p of app that holds the instant atMs.
func (c *Calendar) Window(app string, p Period, atMs int64) Window {
	t := time.UnixMilli(atMs).In(c.Location(app))
	y, m, d := t.Date()
	if p == Week {
		d -= (int(t.Weekday()) + 6) % 7 // back to Monday
		start := time.Date(y, m, d, 0, 0, 0, 0, t.Location())
		return Window{Period: p, StartMs: start.UnixMilli(), EndMs: time.Date(y, m, d+7, 0, 0, 0, 0, t.Location()).UnixMilli()}
	}
	start := time.Date(y, m, d, 0, 0, 0, 0, t.Location())
	return Window{Period: p, StartMs: start.UnixMilli(), EndMs: time.Date(y, m, d+1, 0, 0, 0, 0, t.Location()).UnixMilli()}
}
