package roomlist

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"

	"voiceroom/internal/memo"
)

// cursor is the position of a chain of pages. It travels to the client
// signed (HMAC-SHA256 over its JSON) and bound to the app, region, tab and
// query it was issued for: a cursor edited, forged, or presented by a user
// of another app or region is rejected as a whole.
type cursor struct {
	App    string `json:"a"`
	Region int64  `json:"r"`
	Tab    string `json:"t"`
	Query  string `json:"q,omitempty"` // hash of the search query
	// Frozen is the frozen order the chain walks (0: none, walk the live
	// order from Key/ID) and Off the next position in it.
	Frozen uint64 `json:"f,omitempty"`
	Off    int    `json:"o,omitempty"`
	// Key and ID are the last room returned, in the tab's order; Pinned
	// says it came from the pinned section.
	Key    int64  `json:"k"`
	ID     string `json:"i"`
	Pinned bool   `json:"p,omitempty"`
}

// queryHash binds a cursor to its search query without carrying it.
func queryHash(q string) string {
	if q == "" {
		return ""
	}
	h := sha256.Sum256([]byte(q))
	return base64.RawURLEncoding.EncodeToString(h[:9])
}

// signer signs and checks cursors.
type signer struct{ key []byte }

func (s signer) mac(body string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

func (s signer) encode(c cursor) string {
	raw, _ := json.Marshal(c) // a plain struct: never fails
	body := base64.RawURLEncoding.EncodeToString(raw)
	return body + "." + s.mac(body)
}

// decode verifies and decodes a cursor; any fault is errBadCursor.
func (s signer) decode(text string) (cursor, error) {
	var c cursor
	if len(text) > maxCursorBytes {
		return c, errBadCursor
	}
	body, sig, ok := strings.Cut(text, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(s.mac(body))) {
		return c, errBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || json.Unmarshal(raw, &c) != nil || c.Off < 0 {
		return cursor{}, errBadCursor
	}
	return c, nil
}

// verifiedCursors remembers the cursors a signer accepted, so a cursor
// that many callers present (the next page of a popular list) is checked
// and decoded once, not per request. A cursor's verdict cannot change: it
// is the same text under the same key. Only accepted cursors are kept (a
// forged or edited one is another text and is always checked); at most
// memo.DefaultBound, starting over when full.
type verifiedCursors struct {
	m memo.Map[string, cursor]
}

// decode is s.decode, remembered.
func (v *verifiedCursors) decode(s signer, text string) (cursor, error) {
	if c, ok := v.m.Get(text); ok {
		return c, nil
	}
	c, err := s.decode(text)
	if err != nil {
		return c, err
	}
	v.m.Put(text, c)
	return c, nil
}
