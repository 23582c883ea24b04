package console

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"voiceroom/apiclient"
)

// view is what a page's template gets.
type view struct {
	Title   string
	Section string // the nav's current entry
	// Path is the page's path and query: where its forms return to.
	Path     string
	App      string
	Operator string
	// Platform: the token is a platform operator's, whose pages are the
	// apps'.
	Platform bool
	CSRF     string
	// Flash says what the last action did; Error what failed (the API's
	// message).
	Flash, Error string
	Confirm      *confirmation
	Data         any
}

// confirmation is the question an action asks before it acts.
type confirmation struct {
	Question string
	Action   string
	Fields   []field
}

type field struct{ Name, Value string }

// call is one request of a page or an action.
type call struct {
	c     *Console
	w     http.ResponseWriter
	r     *http.Request
	token string
	v     *view
}

func (c *Console) newCall(w http.ResponseWriter, r *http.Request) *call {
	token, _ := r.Context().Value(tokenKey{}).(string)
	h := claims(token)
	return &call{c: c, w: w, r: r, token: token,
		v: &view{Path: pathOf(r.URL), App: h.App, Operator: h.Operator, Platform: h.Platform, CSRF: c.csrf(token)}}
}

// get reads path?q from the API into out.
func (k *call) get(path string, q url.Values, out any) error {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return k.c.api.Call(k.r.Context(), apiclient.Request{Method: http.MethodGet, Path: path, Token: k.token}, out)
}

// send calls the API with a JSON body.
func (k *call) send(method, path string, body, out any) error {
	return k.c.api.Call(k.r.Context(), apiclient.Request{Method: method, Path: path, Token: k.token, Body: body}, out)
}

// outcome is what an action leaves for the page it returns to.
type outcome struct {
	flash string
	err   error
}

type outcomeKey struct{}

// audience is who a page or action is for: an app's admins or platform
// operators. A token of the other kind is shown the page's title and
// where to go instead, without any call to the API (which would refuse
// it and sign the tab out).
type audience bool

const (
	forApp      audience = false
	forPlatform audience = true
)

// wrongAudience says so on k's page and reports whether it did.
func (c *Console) wrongAudience(k *call, a audience) bool {
	if audience(k.v.Platform) == a {
		return false
	}
	k.v.Title = "Not for this token"
	k.v.Error = "This page is for an app's admins; a platform operator's token manages the apps."
	if a == forPlatform {
		k.v.Error = "This page is for platform operators; an app's admin token manages that app only."
	}
	k.w.Header().Set("X-Console-Location", k.v.Path)
	c.render(k.w, http.StatusOK, "notfound", k.v)
	return true
}

// page serves a page for an app's admins: fn fills k.v.Data, and the
// template name renders it. An error is shown above what fn could read.
func (c *Console) page(name string, fn func(k *call) error) http.Handler {
	return c.pageFor(forApp, name, fn)
}

// pageFor is page for audience a.
func (c *Console) pageFor(a audience, name string, fn func(k *call) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := c.newCall(w, r)
		if c.wrongAudience(k, a) {
			return
		}
		if o, ok := r.Context().Value(outcomeKey{}).(outcome); ok {
			k.v.Flash = o.flash
			if o.err != nil {
				k.v.Error = c.message(o.err)
			}
		}
		if err := fn(k); err != nil {
			if c.signOut(k, err) {
				return
			}
			k.v.Error = strings.TrimSpace(k.v.Error + " " + c.message(err))
		}
		w.Header().Set("X-Console-Location", k.v.Path)
		c.render(w, http.StatusOK, name, k.v)
	})
}

// signOut answers the sign-in form when the API refused the token, and
// tells the script to forget it.
func (c *Console) signOut(k *call, err error) bool {
	var ae *apiclient.Error
	if !errors.As(err, &ae) || !refused(ae) {
		return false
	}
	k.w.Header().Set("X-Console-Auth", "refused")
	c.render(k.w, http.StatusOK, "signin", &view{Path: k.v.Path, Error: c.message(err)})
	return true
}

// message is what the operator reads about err: the API's message as it
// is, or that the API could not be reached.
func (c *Console) message(err error) string {
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		if ae.RequestID == "" {
			return ae.Message
		}
		return fmt.Sprintf("%s (%s, request %s)", ae.Message, ae.Code, ae.RequestID)
	}
	c.log.Warn("console call failed", "error", err)
	return "the console could not complete the call; see the server's log"
}

// invalid is a form value the console cannot put in the API's JSON (a
// number that is not one); the API checks everything else.
func invalid(name, msg string) error {
	return &apiclient.Error{Status: http.StatusBadRequest, Code: "INVALID_ARGUMENT", Message: name + ": " + msg}
}

// refused reports whether the API refused the token itself: the tab
// signs out.
func refused(e *apiclient.Error) bool {
	return e.Status == http.StatusUnauthorized || (e.Status == http.StatusForbidden && e.Code == "PERMISSION_DENIED")
}

// maxAnswerBytes bounds an answer the console reads.
const maxAnswerBytes = 8 << 20

// action serves a form's POST: with a valid csrf field, it asks confirm's
// question first when confirm is not nil (and the form does not carry
// confirm=yes), then runs fn and shows the page named by the form's back
// field with fn's flash or error. The API decides whether the token may.
func (c *Console) action(confirm func(k *call) string, fn func(k *call) (string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		k := c.newCall(w, r)
		if !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(k.v.CSRF)) {
			http.Error(w, "forbidden: the form's csrf field does not match", http.StatusForbidden)
			return
		}
		back := safeBack(r.PostForm.Get("back"))
		if confirm != nil && r.PostForm.Get("confirm") != "yes" {
			if q := confirm(k); q != "" {
				k.v.Path, k.v.Title = back, "Confirm"
				k.v.Confirm = &confirmation{Question: q, Action: r.URL.Path}
				for name, vals := range r.PostForm {
					if name == "csrf" || name == "confirm" {
						continue
					}
					for _, v := range vals {
						k.v.Confirm.Fields = append(k.v.Confirm.Fields, field{name, v})
					}
				}
				w.Header().Set("X-Console-Location", back)
				c.render(w, http.StatusOK, "confirm", k.v)
				return
			}
		}
		flash, err := fn(k)
		if err != nil && c.signOut(k, err) {
			return
		}
		u, _ := url.Parse(back)
		// fn may have left values for the page in k.r's context.
		next := r.Clone(context.WithValue(k.r.Context(), outcomeKey{}, outcome{flash: flash, err: err}))
		next.Method, next.URL, next.Body, next.ContentLength = http.MethodGet, u, http.NoBody, 0
		next.Form, next.PostForm = nil, nil
		c.pages.ServeHTTP(w, next)
	})
}

// safeBack is a form's back path when it is a clean console path, else
// the console's home.
func safeBack(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || strings.ContainsAny(p, "\\\r\n") ||
		(u.Path != "/console" && !strings.HasPrefix(u.Path, "/console/")) || (u.Path != "/console/" && path.Clean(u.Path) != u.Path) {
		return "/console/"
	}
	return p
}

// formInt reads an integer form field; absent or empty is def.
func formInt(r *http.Request, name string, def int64) (int64, error) {
	s := strings.TrimSpace(r.PostForm.Get(name))
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, invalid(name, "must be a whole number")
	}
	return n, nil
}

// pathInt reads an integer path value.
func pathInt(r *http.Request, name string) (int64, error) {
	n, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil {
		return 0, invalid(name, "must be a whole number")
	}
	return n, nil
}

// formText is a form field, trimmed.
func formText(r *http.Request, name string) string { return strings.TrimSpace(r.PostForm.Get(name)) }

// routes are the console's pages and actions.
func (c *Console) routes() *http.ServeMux {
	m := http.NewServeMux()
	regions, apps := c.page("regions", c.regionsPage), c.pageFor(forPlatform, "apps", c.appsPage)
	home := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _ := r.Context().Value(tokenKey{}).(string)
		if claims(token).Platform {
			apps.ServeHTTP(w, r)
			return
		}
		regions.ServeHTTP(w, r)
	})
	m.Handle("GET /console", home)
	m.Handle("GET /console/{$}", home)
	m.Handle("GET /console/regions", regions)
	m.Handle("GET /console/apps", apps)
	m.Handle("POST /console/apps", c.action(nil, c.createApp))
	m.Handle("POST /console/apps/{app}/status", c.action(confirmAppStatus, c.setAppStatus))
	m.Handle("POST /console/apps/{app}/rotate", c.action(confirmRotate, c.rotateKey))
	m.Handle("POST /console/apps/{app}/keys/{kid}/revoke", c.action(confirmRevoke, c.revokeKey))
	m.Handle("POST /console/regions", c.action(nil, c.createRegion))
	m.Handle("POST /console/regions/{id}", c.action(confirmRegion, c.updateRegion))
	m.Handle("POST /console/countries", c.action(nil, c.createCountry))
	m.Handle("POST /console/countries/{code}", c.action(confirmCountry, c.updateCountry))
	m.Handle("POST /console/rebuild", c.action(confirmRebuild, c.rebuild))
	m.Handle("GET /console/users", c.page("users", c.usersPage))
	m.Handle("POST /console/users/{id}/region", c.action(nil, c.setUserRegion))
	m.Handle("POST /console/users/{id}/release", c.action(nil, c.releaseUserRegion))
	m.Handle("GET /console/lists", c.page("lists", c.listsPage))
	m.Handle("POST /console/pins", c.action(nil, c.pin))
	m.Handle("POST /console/pins/{id}/remove", c.action(nil, c.unpin))
	m.Handle("POST /console/hides", c.action(nil, c.hide))
	m.Handle("POST /console/hides/{id}/remove", c.action(nil, c.unhide))
	m.Handle("GET /console/rooms", c.page("rooms", c.searchPage))
	m.Handle("GET /console/rooms/{id}", c.page("room", c.roomPage))
	m.Handle("POST /console/rooms/{id}/{op}", c.action(confirmModeration, c.moderate))
	m.Handle("GET /console/activities", c.page("activities", c.activitiesPage))
	m.Handle("POST /console/activities", c.action(nil, c.createActivity))
	m.Handle("GET /console/activities/{id}", c.page("activity", c.activityPage))
	m.Handle("POST /console/activities/{id}/{op}", c.action(confirmActivityOp, c.activityOp))
	m.Handle("GET /console/delivery", c.page("delivery", c.deliveryPage))
	m.Handle("POST /console/delivery/replay", c.action(confirmReplay, c.replay))
	m.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := c.newCall(w, r)
		k.v.Title = "Not found"
		w.Header().Set("X-Console-Location", k.v.Path)
		c.render(w, http.StatusOK, "notfound", k.v)
	}))
	return m
}
