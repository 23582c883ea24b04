// Package authtoken is voiceroom's bearer token: the JWT claims, issuing a
// token and verifying one, with the HS256 secret the server is configured
// with (VOICEROOM_JWT_SECRET).
//
// A token names an app (app_code, the only place a request's app comes
// from), a user (sub, a decimal user id; admin tokens may leave it out), a
// role ("admin" or none) and an expiry (exp, required). [Issue] signs one
// (`voiceroom token`, the load generator, the demo, tests); a [Verifier]
// checks one (the HTTP edge, package gateway, which maps its errors to
// UNAUTHENTICATED answers and decides what each route requires). Only
// HS256 is accepted, and exp and nbf are allowed [Leeway] of clock skew.
//
// The package knows nothing of HTTP, so the tools that only sign tokens do
// not depend on the server's edge.
package authtoken
