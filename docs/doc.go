// Package docs holds the HTTP API's OpenAPI 3 document, docs/openapi.yaml,
// the contract of every route: its parameters, bodies, results and error
// codes; and the room event stream's AsyncAPI 3 document,
// docs/asyncapi.yaml, the contract other consumers of ROOM_EVENTS read.
// CheckEvent checks an event against it; the package's tests check every
// event type's golden event and that it documents exactly the types the
// code emits.
//
// Guarantees: the document `voiceroom serve` answers at /openapi.yaml (and
// shows at /docs) is this file, byte for byte, embedded in the binary; and
// it matches the server, because cmd/voiceroom's TestOpenAPIMatchesServer
// drives every route of a running server and fails when a route is served
// but not documented (or the reverse), when a request or response disagrees
// with the document, or when a documented status is never answered.
package docs
