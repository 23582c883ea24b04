// Package docs holds the HTTP API's OpenAPI 3 document, docs/openapi.yaml,
// embedded so that `voiceroom serve` answers it at /openapi.yaml and shows
// it at /docs. The document is the contract: cmd/voiceroom's
// TestOpenAPIMatchesServer drives every route of a running server and
// fails when a request, a response or the route list disagrees with it.
package docs

import _ "embed"

// OpenAPI is the text of openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
