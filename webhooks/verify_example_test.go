package webhooks_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The receiver's check, as docs/webhooks.md gives it (TestVerifySnippetInDocs
// keeps the two the same); the tests' receivers verify every delivery
// with it.

// readme:verify:begin

// verify checks a voiceroom webhook: the signature of id.timestamp.body
// with the endpoint's secret (whsec_...), and a timestamp within five
// minutes of now, so a recorded delivery cannot be replayed later.
func verify(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(t, 0)).Abs() > 5*time.Minute {
		return errors.New("bad or stale webhook-timestamp")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("no valid signature")
}

// readme:verify:end
