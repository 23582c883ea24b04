package gateway

import (
	"crypto/sha256"
	"time"

	"voiceroom/internal/memo"
)

// verifiedTokens remembers the tokens the authenticator accepted, so a
// client sending the same bearer token on every request pays the JWT parse
// and signature check once, not per request (it was a tenth of the list
// query's server time). A token is the same string signed by the same key,
// so its verdict can change only by time or by the keys: an entry is used
// only until the verdict's end (the token's exp plus the parser's leeway,
// or its key's end of grace when sooner), and only while the keys'
// generation is the one it was accepted under (a key retired or revoked,
// an app disabled: every token is checked in full again). Only accepted
// tokens are kept; a forged or edited token is a different string and is
// always checked. It holds at most memo.DefaultBound tokens and starts
// over when full. A token is kept by its SHA-256, not as the string: the
// map holds an entry per user online, and a token is several times the
// 32 bytes of its digest.
type verifiedTokens struct {
	m memo.Map[[sha256.Size]byte, verifiedToken]
}

type verifiedToken struct {
	p     Principal
	gen   uint64
	until time.Time
}

// get returns the principal of token if it was accepted under generation
// gen and its verdict still holds at now.
func (v *verifiedTokens) get(token string, gen uint64, now time.Time) (Principal, bool) {
	e, ok := v.m.Get(sha256.Sum256([]byte(token)))
	if !ok || e.gen != gen || !now.Before(e.until) {
		return Principal{}, false
	}
	return e.p, true
}

// put remembers a token accepted under generation gen until until.
func (v *verifiedTokens) put(token string, p Principal, gen uint64, until time.Time) {
	v.m.Put(sha256.Sum256([]byte(token)), verifiedToken{p: p, gen: gen, until: until})
}
