// Package apps registers the apps one deployment serves and keeps their
// token signing keys, so that one app's backend can never act for
// another, and platform operators' power stays apart from any app's.
//
// # What an app has
//
// An app_code, a status (active or disabled), and its keys:
//
//   - HS256 keys, each with an id (the token header's kid) and a secret.
//     A key is made by a platform operator (`voiceroom apps create`,
//     `voiceroom apps keys rotate`, or the /platform routes), shown once,
//     and stored sealed (package seal, under VOICEROOM_APPS_SECRET_KEY).
//     A rotation makes a new key and gives the others a grace period
//     (24 h by default, 0 for a key that leaked); at most two keys verify
//     at once. Keys can also come from configuration
//     (VOICEROOM_APP_KEYS), for deployments that keep secrets in a
//     secret store of their own.
//   - An identity provider (a JWKS URL, an issuer, an audience and the
//     claim that names the app): the app's own RS256/ES256 user tokens.
//
// An app's key signs its users' tokens and its admins' tokens, which act
// within that app only. Platform operators have keys of their own
// (VOICEROOM_PLATFORM_KEYS), which no app holds.
//
// # How verification reads it
//
// A [Registry] is authtoken.Keys: it answers from a snapshot in memory,
// so verifying a token costs no MySQL read. [Store] is MySQL, the truth.
// A Registry checks it every RefreshInterval with one aggregate query and
// reloads only when the apps table moved (every change moves the changed
// app's updated_at_ms in the same transaction): a change made on any
// process is seen everywhere within that bound, and at once on the
// process that made it. A token that names a key the process does not
// know yet makes it check at once (rate-limited), so a new key works
// from its first use. If MySQL cannot be read, the last snapshot goes on
// serving. Identity providers' key sets are fetched by package keyfunc:
// at start, every hour, and on an unknown kid (rate-limited); a provider
// that is down leaves the keys fetched before in use, and a token whose
// key is not held is refused, never an error.
//
// # The single secret
//
// VOICEROOM_JWT_SECRET, the one key of earlier versions, verifies tokens
// without a kid only where the Registry is told to: for every app in
// development (VOICEROOM_DEV_SINGLE_SECRET), or for the registered active
// apps until the end of an upgrade window the operator sets
// (VOICEROOM_JWT_SECRET_UNTIL). The HTTP edge counts the requests it
// still authenticates (voiceroom_auth_secret_requests_total).
package apps
