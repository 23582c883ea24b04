// Package console is the operators' console: web pages, served by `serve`
// under /console, for the people who run regions, lists and rooms without
// curl (countries and regions, users' regions, pins and hides, bans and
// the audit trail, dead letters and the outbox, activities: their
// creation, live board, a task's completions, settlement and payouts), and
// for platform
// operators, who register apps and manage their keys.
//
// # It has no powers of its own
//
// Every page reads and every form acts through the admin API
// (docs/openapi.yaml, /admin/v1, or /platform/v1 for platform operators)
// with the operator's own token, through package apiclient over an
// http.RoundTripper that gateway.ConsoleRoutes hands it: the request runs
// through the same Fiber app, middleware and routes as a request from
// curl, in process, without a socket. Authentication, the admin role,
// the token's app_code, the rate limit, every check and every error
// message are the API's, so the console cannot do or see more than the
// token could with curl, and what it shows after an error is the API's
// message. The console only renders answers and turns forms into API
// requests; it keeps no state, reads no database and holds no secret but
// the key it signs its form tokens with.
//
// # The token
//
// The operator pastes an app's admin token (`voiceroom token --app APP
// --role admin`) or a platform operator's token (`voiceroom token
// --platform`) into the sign-in form. The console shows what that token
// may see: an app's sections for an app's admin, the apps' page for a
// platform operator. It reads the token's claims only to choose the pages
// (a page for the other kind of token says so and calls nothing); every
// permission is the API's. The console's script (assets/console.js, served from the
// binary) keeps it in the tab's sessionStorage, which no other tab or site
// can read and which ends with the tab, and sends it as
// Authorization: Bearer on each request it makes for a page, which it
// fetches with the header X-Console. The token never goes in a URL, a
// cookie or a form field, and nothing logs it (the gateway logs method and
// path only). A navigation without the header (a reload, a bookmark) gets
// the page's empty shell, and the script fetches the content. A token the
// API refuses (401, or 403 for a user's token) signs the tab out.
//
// # The browser's side
//
// Pages are server-rendered html/template (contextual escaping); the one
// script and the style sheet are embedded in the binary (no CDN, no build
// step), and every answer carries a Content-Security-Policy that allows
// only them (no inline script or style, no other origin, no framing),
// X-Frame-Options: DENY, Referrer-Policy: no-referrer and Cache-Control:
// no-store. Forgery: a form's POST is taken only with the X-Console
// header, which a page of another origin cannot send without a CORS
// preflight that /console never grants, with a same-origin Origin when the
// browser sends one, and with the form's csrf field, an HMAC of the
// operator's token that another site cannot compute; and even then it acts
// only with the token the tab holds.
//
// Actions that are hard to undo (a ban, a close, a region rebuild, a
// replay, disabling a region or a country, an activity's cancel, settle
// now and settlement re-run) answer a confirmation first
// and act on its second POST. Lists are paged with the API's cursors.
package console
