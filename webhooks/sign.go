package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
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
