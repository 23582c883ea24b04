package gateway

import (
	"time"

	"voiceroom/internal/memo"
)

// verifiedTokens remembers the tokens the authenticator accepted, so a
// client sending the same bearer token on every request pays the JWT parse
// and HMAC check once, not per request (it was a tenth of the list query's
// server time). A token is the same string signed by the same secret, so
// its verdict cannot change, except by time: an entry is used only until
// the token's exp (plus the parser's leeway), and then the token is
// checked in full again (and refused as expired). Only accepted tokens
// are kept; a forged or edited token is a different string and is always
// checked. It holds at most memo.DefaultBound tokens and starts over when
// full.
type verifiedTokens struct {
	m memo.Map[string, verifiedToken]
}

type verifiedToken struct {
	p     Principal
	until time.Time
}

// get returns the principal of token if it was accepted and is still
// unexpired at now.
func (v *verifiedTokens) get(token string, now time.Time) (Principal, bool) {
	e, ok := v.m.Get(token)
	if !ok || !now.Before(e.until) {
		return Principal{}, false
	}
	return e.p, true
}

// put remembers an accepted token until until.
func (v *verifiedTokens) put(token string, p Principal, until time.Time) {
	v.m.Put(token, verifiedToken{p: p, until: until})
}
