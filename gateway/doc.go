// Package gateway is voiceroom's HTTP edge (Fiber v2): the response envelope
// and request ids of API.md, JWT authentication for /api and /admin, the one
// table that maps error kinds to envelope codes and HTTP statuses, body limits,
// panic recovery, health, readiness and Prometheus metrics.
//
// Each domain's routes live in a file of their own here (regions.go, rooms.go,
// ...) and are handed to New as a Mount, so the domain packages never import
// Fiber and the server never needs to know which domains exist.
package gateway
