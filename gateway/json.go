package gateway

import (
	"encoding/json"

	gojson "github.com/goccy/go-json"
)

// encodeJSON is the JSONEncoder of both Fiber apps: every answer (OK,
// writeError, the IM callback's reply) is encoded here. goccy/go-json
// writes the bytes encoding/json writes for every answer of the API
// (HTML-escaped, invalid UTF-8 as U+FFFD, map keys sorted, json.RawMessage
// and MarshalJSON output compacted) with about a third less CPU for a busy
// room's view (BenchmarkEncodeRoomView), a sixth less inside a GET of it. It
// differs on floats only: one between 1e-10 and 1e-6 in magnitude is
// written 1e-07, not 1e-7, and a float32 infinity +Inf where encoding/json
// fails; no answer carries a float (TestAnswersCarryNoFloat).
func encodeJSON(v any) ([]byte, error) { return gojson.Marshal(v) }

// decodeJSON is the JSONDecoder of both Fiber apps (BodyParser and the
// like; the routes read bodies through Bind, which decodes with
// encoding/json too). Decoding stays with encoding/json: goccy/go-json
// accepts control characters in strings, keeps invalid UTF-8 as it came and
// names a type error's Go field, not its JSON name; sonic's type errors name
// no field. Bind's answers name that field
// (TestBindRefusesWhatEncodingJSONRefuses).
var decodeJSON = json.Unmarshal
