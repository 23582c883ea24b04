package imbridge

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
)

// DefaultDomain is Tencent IM's REST domain in mainland China.
const DefaultDomain = "https://console.tim.qq.com"

// Application is one Tencent IM application: where to call it and as whom.
type Application struct {
	// SDKAppID is the application's id. Required.
	SDKAppID int64 `json:"sdkappid"`
	// Admin is the App administrator identifier the REST calls use and
	// messages come from. Required.
	Admin string `json:"admin"`
	// SecretKey signs UserSigs. Required; never logged.
	SecretKey string `json:"secret_key"`
	// CallbackToken authenticates Tencent's callbacks (Sign); empty skips
	// the check.
	CallbackToken string `json:"callback_token"`
	// Domain is the REST base URL, e.g. https://adminapisgp.im.qcloud.com,
	// or an http:// emulator address. Default DefaultDomain.
	Domain string `json:"domain,omitempty"`
}

// String shows the application without its secret key or callback token.
func (a Application) String() string {
	return fmt.Sprintf("sdkappid=%d admin=%s domain=%s", a.SDKAppID, a.Admin, a.domain())
}

func (a Application) domain() string {
	if a.Domain == "" {
		return DefaultDomain
	}
	return strings.TrimRight(a.Domain, "/")
}

// Validate reports a missing or malformed field, named.
func (a Application) Validate() error {
	switch {
	case a.SDKAppID <= 0:
		return fmt.Errorf("sdkappid %d: must be positive", a.SDKAppID)
	case a.Admin == "" || len(a.Admin) > 32:
		return fmt.Errorf("admin %q: want 1..32 bytes", a.Admin)
	case a.SecretKey == "":
		return fmt.Errorf("secret_key: required")
	}
	u, err := url.Parse(a.domain())
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("domain %q: want an http(s) URL", a.Domain)
	}
	return nil
}

// Apps maps app_codes to their Tencent applications: an app's own entry,
// else the default. The zero Apps serves nobody.
type Apps struct {
	// Default serves every app without an entry of its own; nil for none.
	Default *Application
	// ByApp holds apps' own applications, by app_code.
	ByApp map[string]Application
}

// ParseApps reads the VOICEROOM_TIM_APPS file format: a JSON object from
// app_code to {sdkappid, admin, secret_key, callback_token, domain?}.
func ParseApps(data []byte) (map[string]Application, error) {
	var m map[string]Application
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("parse apps: %w", err)
	}
	for code, a := range m {
		if code == "" {
			return nil, fmt.Errorf("parse apps: empty app_code")
		}
		if err := a.Validate(); err != nil {
			return nil, fmt.Errorf("parse apps: app %s: %w", code, err)
		}
	}
	return m, nil
}

// LoadAppsFile reads and parses an apps file.
func LoadAppsFile(path string) (map[string]Application, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read apps file: %w", err)
	}
	return ParseApps(data)
}

// Configured reports whether any app has a Tencent application.
func (a Apps) Configured() bool { return a.Default != nil || len(a.ByApp) > 0 }

// For returns the Tencent application of appCode, or ErrNoApplication.
func (a Apps) For(appCode string) (Application, error) {
	if app, ok := a.ByApp[appCode]; ok {
		return app, nil
	}
	if a.Default != nil {
		return *a.Default, nil
	}
	return Application{}, fmt.Errorf("app %s: %w", appCode, ErrNoApplication)
}

// Tokens returns the callback tokens of the applications with sdkAppID,
// and whether any application has that id.
func (a Apps) Tokens(sdkAppID int64) (tokens []string, known bool) {
	add := func(app Application) {
		if app.SDKAppID != sdkAppID {
			return
		}
		known = true
		if app.CallbackToken != "" {
			tokens = append(tokens, app.CallbackToken)
		}
	}
	if a.Default != nil {
		add(*a.Default)
	}
	codes := make([]string, 0, len(a.ByApp))
	for c := range a.ByApp {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		add(a.ByApp[c])
	}
	return tokens, known
}

// Applications returns every distinct application (by sdkappid), default
// first.
func (a Apps) Applications() []Application {
	var out []Application
	seen := map[int64]bool{}
	if a.Default != nil {
		out = append(out, *a.Default)
		seen[a.Default.SDKAppID] = true
	}
	codes := make([]string, 0, len(a.ByApp))
	for c := range a.ByApp {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for _, c := range codes {
		if app := a.ByApp[c]; !seen[app.SDKAppID] {
			seen[app.SDKAppID] = true
			out = append(out, app)
		}
	}
	return out
}
