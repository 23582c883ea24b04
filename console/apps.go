package console

import (
	"fmt"
	"net/http"
	"net/url"
)

// appsPage: the registered apps, their keys and identity providers, for
// platform operators (GET /platform/v1/apps).
func (c *Console) appsPage(k *call) error {
	k.v.Title, k.v.Section = "Apps and their keys", "apps"
	var d map[string]any
	err := k.get("/platform/v1/apps", nil, &d)
	k.v.Data = d
	return err
}

// newKeyFlash is what the operator reads after a key is made: its secret,
// shown this once.
func newKeyFlash(what string, out map[string]any) string {
	nk, _ := out["new_key"].(map[string]any)
	return fmt.Sprintf("%s Key %v, secret %v — shown this once: give it to the app's backend, which signs HS256 tokens with header kid %v.",
		what, nk["key_id"], nk["secret"], nk["key_id"])
}

func (c *Console) createApp(k *call) (string, error) {
	app := formText(k.r, "app_code")
	var out map[string]any
	if err := k.send(http.MethodPost, "/platform/v1/apps", map[string]any{"app_code": app}, &out); err != nil {
		return "", err
	}
	return newKeyFlash(fmt.Sprintf("App %s registered.", app), out), nil
}

// confirmAppStatus asks before an app is disabled: every token of it is
// refused.
func confirmAppStatus(k *call) string {
	if formText(k.r, "status") != "disabled" {
		return ""
	}
	return fmt.Sprintf("Disable app %s? Every token of it is refused, its users' and its admins', until it is enabled again.", k.r.PathValue("app"))
}

func (c *Console) setAppStatus(k *call) (string, error) {
	app, status := k.r.PathValue("app"), formText(k.r, "status")
	if err := k.send(http.MethodPatch, "/platform/v1/apps/"+url.PathEscape(app), map[string]any{"status": status}, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("App %s is %s.", app, status), nil
}

// confirmRotate asks before a key is made: the app's current key then
// stops after the grace period.
func confirmRotate(k *call) string {
	grace := formText(k.r, "grace_seconds")
	if grace == "" {
		grace = "the default grace period (VOICEROOM_AUTH_KEY_GRACE)"
	} else {
		grace += " seconds"
	}
	return fmt.Sprintf("Give app %s a new key? Its current key keeps verifying for %s, then stops.", k.r.PathValue("app"), grace)
}

func (c *Console) rotateKey(k *call) (string, error) {
	app := k.r.PathValue("app")
	body := map[string]any{}
	if k.r.PostForm.Get("grace_seconds") != "" {
		g, err := formInt(k.r, "grace_seconds", 0)
		if err != nil {
			return "", err
		}
		body["grace_seconds"] = g
	}
	var out map[string]any
	if err := k.send(http.MethodPost, "/platform/v1/apps/"+url.PathEscape(app)+"/keys/rotate", body, &out); err != nil {
		return "", err
	}
	return newKeyFlash(fmt.Sprintf("App %s has a new key.", app), out), nil
}

// confirmRevoke asks before a key stops at once.
func confirmRevoke(k *call) string {
	return fmt.Sprintf("Revoke key %s of app %s now? Every token it signed is refused from then on.", k.r.PathValue("kid"), k.r.PathValue("app"))
}

func (c *Console) revokeKey(k *call) (string, error) {
	app, kid := k.r.PathValue("app"), k.r.PathValue("kid")
	if err := k.send(http.MethodDelete, "/platform/v1/apps/"+url.PathEscape(app)+"/keys/"+url.PathEscape(kid), nil, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("Key %s of app %s revoked.", kid, app), nil
}
