package gateway

import (
	"encoding/json"

	gojson "github.com/goccy/go-json"
)

// encodeJSON is the JSONEncoder of both Fiber apps: every answer (OK,
// writeError, the IM callback's reply) is encoded here. goccy/go-json
// writes the bytes encoding/json writes for every answer of the API
// (HTML-escaped, invalid UTF-8 as U+FFFD, map keys sorted, json.RawMessage
// and MarshalJSON output compacted) in about half the time
// (BenchmarkEncodeRoomView). It differs in one place: a float64 below 1e-6
// or from 1e21 on is written 1e-07, not 1e-7; no answer carries a float
// (TestJSONEncoderMatchesEncodingJSON).
func encodeJSON(v any) ([]byte, error) { return gojson.Marshal(v) }

// decodeJSON is the JSONDecoder of both Fiber apps (BodyParser and the
// like; the routes read bodies through Bind). Decoding stays with
// encoding/json: the faster decoders accept what it refuses (control
// characters in strings) or report a wrong type without the JSON field
// name, and Bind's answers name that field.
var decodeJSON = json.Unmarshal
