// Package gateway is voiceroom's HTTP edge (Fiber v2): the response envelope
// and request ids of the API (docs/openapi.yaml, the contract), JWT
// authentication for /api, /admin and /platform (the token itself is
// package authtoken's: gateway verifies, never issues; an app's tokens
// reach /api and /admin, a platform operator's only /platform: auth.go),
// the one table that maps error kinds to envelope codes and HTTP statuses,
// body limits, panic recovery, health, readiness and Prometheus metrics.
//
// A Server has two listeners. The public one (Config.Addr) serves the
// routes mounted below, /healthz and /readyz, and nothing else: /metrics
// and /debug/pprof are unknown routes there (404 in the envelope). The
// operators' one (Config.OpsAddr, off when empty) serves /metrics, /healthz,
// /readyz and, with Config.Pprof, /debug/pprof, unauthenticated, for
// loopback or a private network (ops.go). Both share one readiness, start
// with Listen and Serve, and stop with Shutdown, public first.
//
// Every answer carries X-Content-Type-Options: nosniff, and every answer
// under /api and /admin Cache-Control: no-store (headers.go). CORS is off
// unless Config.CORSOrigins lists origins; then /api, never /admin, answers
// those origins' preflights before authentication (cors.go).
//
// Each domain's routes live in a file of their own here behind a
// constructor named for the domain that takes the small interface of the
// domain's service it uses, declared beside it, and returns a Mount handed
// to New, so the domain packages never import Fiber and the server never
// needs to know which domains exist. The constructors, by audience
// (TestDocNamesEveryRouteConstructor keeps this list whole):
//
//   - an app's users and admins, under /api and /admin: RoomRoutes (rooms.go,
//     with hosting.go and moderation.go), RoomListRoutes (rooms_list.go),
//     RankRoutes (ranks.go), RegionRoutes (regions.go), WalletRoutes
//     (wallet.go), ActivityRoutes (activities.go: the definitions, and the
//     activities a user's region sees), PKRoutes (pk.go: PK battles
//     between two rooms), ActivityBoardRoutes (activity_board.go: boards
//     and a task's progress; an operator's board and a task's completion
//     counts);
//   - an app's operators, under /admin: HideRoutes (hides.go), OutboxRoutes
//     (outbox.go), DLQRoutes (dlq.go), WebhookRoutes (webhooks.go),
//     ActivitySettlementRoutes (activity_settlement.go: settle now, re-run,
//     payouts);
//   - the platform's operators, under /platform: PlatformRoutes
//     (platform.go: the apps, their keys and identity providers);
//   - Tencent IM, on /im/callback: IMCallbackRoutes (imcallback.go),
//     answered in Tencent's own JSON, never the envelope;
//   - the operators' console at /console: ConsoleRoutes (console.go, below);
//   - the API's document at /openapi.yaml and /docs: DocsRoutes (docs.go,
//     below).
//
// A handler binds and checks the request, calls the service with the
// request's context and the token's app_code, and returns its error as is:
// errors.go maps the apperr kind to the envelope.
//
// The rate limiter costs O(1) per request (ratelimit.go).
//
// ConsoleRoutes mounts the operators' console (package console) under
// /console and binds a Loopback to the server's own app: the console's
// calls of the /admin routes run through the same middleware and routes
// as any client's, in process (console.go).
//
// DocsRoutes serves the OpenAPI document at /openapi.yaml and a Swagger UI
// page at /docs, both from the binary; Server.Routes lists what the server
// serves, so that cmd/voiceroom's OpenAPI test fails on any route the
// document lacks.
package gateway
