// Package apiclient calls voiceroom's HTTP API (docs/openapi.yaml) and
// reads its envelope: {code, message, request_id, data}. The demo
// (cmd/voiceroom), the operators' console (over the server's in-process
// RoundTripper) and the load generator all speak to the API through it.
//
// A Client sends a Request (method, path, bearer token, Idempotency-Key,
// JSON body) and reads the answer whole, within MaxAnswerBytes. Call
// decodes the envelope: an answer other than 200 with code OK is an
// *Error carrying the envelope's code, message and request id (a route
// the server lacks is also ErrRouteNotFound), an answer that is no
// envelope is a plain error, and an OK answer's data is decoded into the
// caller's value. Send stops at the bytes, for a caller that reads only
// some answers (the load generator's commands never decode a success);
// Answer.Envelope decodes them later. Get fetches a document outside the
// envelope (/readyz, /metrics, the IM emulator's inspection routes).
//
// The package holds no state besides its configuration: tokens are the
// caller's (authtoken issues them), and nothing is retried.
package apiclient
