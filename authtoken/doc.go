// Package authtoken is voiceroom's bearer token: the JWT claims, issuing a
// token and verifying one.
//
// A token names an app (app_code, the only place a request's app comes
// from), a user (sub, a decimal user id; admin tokens may leave it out), a
// role ("admin" or none) and an expiry (exp, required). Its header's kid
// names the key that signed it. A platform operator's token has the role
// "platform" and no app_code: it acts on apps, never inside one.
//
// [Key.Issue] signs a token with an HS256 key (`voiceroom token`, the load
// generator, the demo, tests); a [Verifier] checks one against [Keys] (the
// HTTP edge, package gateway, which maps its errors to UNAUTHENTICATED
// answers and decides what each route requires). What verifies what:
//
//   - HS256 with a kid: the key of that id of the app the token claims,
//     and nothing else (a key of another app does not verify it). The key
//     must be usable now: not past its grace period, its app not disabled.
//   - HS256 without a kid: the single secret (VOICEROOM_JWT_SECRET), only
//     where Keys accept it for that app (development, or the upgrade
//     window).
//   - HS256 with role "platform": the platform operators' key of that kid.
//   - RS256 or ES256: the app's identity provider (a JWKS URL): the
//     token's iss picks the provider, its configured claim must name the
//     provider's app, its aud must hold the provider's audience, and the
//     provider's key set must hold the kid. Such tokens are user tokens;
//     their role claim is ignored.
//
// Every other token is refused with ErrInvalid, and a refusal never says
// which of these checks failed. exp and nbf are allowed [Leeway] of
// clock skew.
//
// The package knows nothing of HTTP or MySQL, so the tools that only sign
// tokens do not depend on the server's edge.
package authtoken
