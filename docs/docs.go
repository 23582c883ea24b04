package docs

import _ "embed"

// OpenAPI is the text of openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
