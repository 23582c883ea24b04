package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery. The first three are Standard Webhooks 1.0's,
// so a receiver can verify with that standard's libraries in any language.
const (
	// HeaderID is the delivery's id: the same on every attempt of one
	// delivery, so a receiver can drop a repeat.
	HeaderID = "webhook-id"
	// HeaderTimestamp is the attempt's Unix time in seconds, signed: a
	// receiver refuses one too far from its clock (a replay).
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature is "v1,<base64 HMAC-SHA256>" of id.timestamp.body,
	// one per valid secret, separated by spaces (two during a rotation).
	HeaderSignature = "webhook-signature"
	// HeaderEventIDs lists the delivered events' ids, comma-separated, in
	// order.
	HeaderEventIDs = "Voiceroom-Event-Ids"
)

// signature returns the value of HeaderSignature for the given keys.
func signature(keys [][]byte, id string, ts int64, body []byte) string {
	var b strings.Builder
	t := strconv.FormatInt(ts, 10)
	for i, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(t))
		mac.Write([]byte{'.'})
		mac.Write(body)
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return b.String()
}

// sign sets the signed headers of one attempt made at now.
func sign(h http.Header, keys [][]byte, id string, now time.Time, body []byte) {
	ts := now.Unix()
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, signature(keys, id, ts, body))
}

// Sign sets the signed headers of a delivery with id and body as the
// sink sends them at now, with secret (whsec_...): for tools that play
// the sender against a receiver (the bench's ceiling, tests).
func Sign(h http.Header, secret, id string, now time.Time, body []byte) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	sign(h, [][]byte{key}, id, now, body)
	return nil
}

// Verify checks a delivery as a receiver would: a signature in h that
// secret (whsec_...) makes over webhook-id, webhook-timestamp and body,
// and a timestamp within tolerance of now. (A receiver in another
// language uses the Standard Webhooks library of its own; docs/webhooks.md
// shows the same check in a few lines of Go.)
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return fmt.Errorf("%s: %w", HeaderTimestamp, err)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%s %d: %v from now", HeaderTimestamp, ts, d)
	}
	want := signature([][]byte{key}, h.Get(HeaderID), ts, body)
	for _, sig := range strings.Fields(h.Get(HeaderSignature)) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("no signature of this secret")
}
