package gateway

import (
	"sync"
	"time"
)

// verifiedTokens remembers the tokens the authenticator accepted, so a
// client sending the same bearer token on every request pays the JWT parse
// and HMAC check once, not per request (it was a tenth of the list query's
// server time). A token is the same string signed by the same secret, so
// its verdict cannot change, except by time: an entry is used only until
// the token's exp (plus the parser's leeway), and then the token is
// checked in full again (and refused as expired). Only accepted tokens
// are kept; a forged or edited token is a different string and is always
// checked. It holds at most maxVerifiedTokens tokens and starts over when
// full.
type verifiedTokens struct {
	mu sync.Mutex
	m  map[string]verifiedToken
}

type verifiedToken struct {
	p     Principal
	until time.Time
}

const maxVerifiedTokens = 100_000

// get returns the principal of token if it was accepted and is still
// unexpired at now.
func (v *verifiedTokens) get(token string, now time.Time) (Principal, bool) {
	v.mu.Lock()
	e, ok := v.m[token]
	v.mu.Unlock()
	if !ok || !now.Before(e.until) {
		return Principal{}, false
	}
	return e.p, true
}

// put remembers an accepted token until until.
func (v *verifiedTokens) put(token string, p Principal, until time.Time) {
	v.mu.Lock()
	if v.m == nil || len(v.m) >= maxVerifiedTokens {
		v.m = make(map[string]verifiedToken, 1024)
	}
	v.m[token] = verifiedToken{p: p, until: until}
	v.mu.Unlock()
}
