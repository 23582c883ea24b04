package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"voiceroom/apiclient"
	"voiceroom/apperr"
)

// Config configures the console. Zero fields take the defaults given.
type Config struct {
	// Key signs the forms' csrf fields. Required, at least 16 bytes; serve
	// derives it from the JWT secret, so that every api node takes a form
	// another one rendered.
	Key []byte
	// PageSize is the rows of one page of a list: 1..50, default 20.
	PageSize int
}

// MaxPageSize bounds Config.PageSize (the API's list limit).
const MaxPageSize = 50

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.PageSize == 0 {
		c.PageSize = 20
	}
	return c
}

// Validate checks c after defaults are applied; it never changes c.
// Errors are *apperr.ConfigError naming the field.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if len(c.Key) < 16 {
		return apperr.BadConfig("Key", "console key must be at least 16 bytes")
	}
	if c.PageSize < 1 || c.PageSize > MaxPageSize {
		return apperr.BadConfig("PageSize", "console page size %d: want 1..%d", c.PageSize, MaxPageSize)
	}
	return nil
}

//go:embed assets templates
var files embed.FS

// maxFormBytes bounds a form's body: reasons are at most 256 characters,
// a replay names at most a page of letters.
const maxFormBytes = 32 << 10

// Console serves the pages. It is an http.Handler for the paths under
// /console.
type Console struct {
	api    *apiclient.Client
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	tmpl   *template.Template
	pages  *http.ServeMux
	assets http.Handler
}

var _ http.Handler = (*Console)(nil)

// New returns a console that calls the admin API through rt (see
// gateway.ConsoleRoutes). now is the clock of expiry times.
func New(rt http.RoundTripper, cfg Config, log *slog.Logger, now func() time.Time) (*Console, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rt == nil {
		return nil, errors.New("console: nil round tripper")
	}
	tmpl, err := template.New("console").Funcs(funcs).ParseFS(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	assets, err := fs.Sub(files, "assets")
	if err != nil {
		return nil, err
	}
	// The API runs in process (rt): no network, and every call goes
	// through the server's middleware and routes as a client's would.
	api := &apiclient.Client{HTTP: &http.Client{Transport: rt}, MaxAnswerBytes: maxAnswerBytes, UseNumber: true}
	c := &Console{api: api, cfg: cfg, log: log, now: now, tmpl: tmpl,
		assets: http.StripPrefix("/console/assets/", http.FileServerFS(assets))}
	c.pages = c.routes()
	return c, nil
}

// securityHeaders are on every answer under /console.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
	"X-Frame-Options":            "DENY",
	"Referrer-Policy":            "no-referrer",
	"Cross-Origin-Opener-Policy": "same-origin",
	"Cache-Control":              "no-store",
}

// ServeHTTP answers the shell, the assets, and the pages' content.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for k, v := range securityHeaders {
		w.Header().Set(k, v)
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/console/assets/") && r.Method == http.MethodGet:
		c.assets.ServeHTTP(w, r)
	case r.Header.Get("X-Console") == "":
		if r.Method != http.MethodGet {
			http.Error(w, "forbidden: the console's forms are sent by its script", http.StatusForbidden)
			return
		}
		c.render(w, http.StatusOK, "shell", nil)
	case r.Method == http.MethodPost && !sameOrigin(r):
		http.Error(w, "forbidden: cross-origin request", http.StatusForbidden)
	default:
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		token = strings.TrimSpace(token)
		if token == "" {
			c.render(w, http.StatusOK, "signin", &view{Path: pathOf(r.URL)})
			return
		}
		ctx := context.WithValue(r.Context(), tokenKey{}, token)
		c.pages.ServeHTTP(w, r.WithContext(ctx))
	}
}

// sameOrigin reports whether r's Origin, when the browser sent one, is
// the console's own.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

type tokenKey struct{}

// csrf is the form token of an operator's bearer token.
func (c *Console) csrf(token string) string {
	m := hmac.New(sha256.New, c.cfg.Key)
	m.Write([]byte("voiceroom console csrf\x00"))
	m.Write([]byte(token))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

// render executes one template with v; a failure (a bug) answers 500.
func (c *Console) render(w http.ResponseWriter, status int, name string, v *view) {
	var buf strings.Builder
	if err := c.tmpl.ExecuteTemplate(&buf, name, v); err != nil {
		c.log.Error("console template", "template", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(buf.String()))
}

// pathOf is u's path and query, where a form returns to.
func pathOf(u *url.URL) string {
	if u.RawQuery == "" {
		return u.Path
	}
	return u.Path + "?" + u.RawQuery
}

// who is what a token says of its holder, read to choose the pages and
// show the operator; the console never decides a permission by it (the
// API does, on every call).
type who struct {
	App      string
	Operator string
	// Platform marks a platform operator's token: the apps' pages, not an
	// app's.
	Platform bool
}

// claims reads who holds a token.
func claims(token string) who {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return who{}
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return who{}
	}
	var cl struct {
		AppCode string `json:"app_code"`
		Sub     string `json:"sub"`
		Role    string `json:"role"`
	}
	if json.Unmarshal(raw, &cl) != nil {
		return who{}
	}
	w := who{App: cl.AppCode, Operator: "admin", Platform: cl.Role == "platform"}
	if w.Platform {
		w.Operator = "platform"
	}
	if cl.Sub != "" {
		w.Operator += ":" + cl.Sub
	}
	return w
}
