package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"voiceroom/imbridge"
	"voiceroom/outboxrelay"
	"voiceroom/roomlist"
	"voiceroom/rooms"
)

// answerTypes are the types the routes answer with (the results of the
// domains' interfaces, walked by TestAnswersCarryNoFloat) and those the
// gateway builds itself.
func answerTypes() []reflect.Type {
	var types []reflect.Type
	for _, it := range []reflect.Type{
		reflect.TypeFor[Rooms](), reflect.TypeFor[Regions](), reflect.TypeFor[RoomList](), reflect.TypeFor[Pins](),
		reflect.TypeFor[Hides](), reflect.TypeFor[Wallet](), reflect.TypeFor[OutboxReader](),
	} {
		for i := range it.NumMethod() {
			m := it.Method(i).Type
			for j := range m.NumOut() {
				if out := m.Out(j); out != reflect.TypeFor[error]() {
					types = append(types, out)
				}
			}
		}
	}
	return append(types, reflect.TypeFor[rooms.Gift](), reflect.TypeFor[DeadLetterPage](), reflect.TypeFor[ReplayResponse](),
		reflect.TypeFor[imbridge.CallbackReply](), reflect.TypeFor[Envelope]())
}

// TestJSONEncoderMatchesEncodingJSON: encodeJSON writes what encoding/json
// writes for the answers, the awkward strings, maps and raw JSON included.
func TestJSONEncoderMatchesEncodingJSON(t *testing.T) {
	awkward := "<b>Tom & Jerry</b> \u2028\u2029 \x01\x7f \xff\xfe bad UTF-8, \"quoted\" \\ / é 中"
	view := benchView()
	v := view.Data.(rooms.View)
	v.Title, v.Description, v.CoverURL = awkward, awkward, "https://cdn.example.com/c.jpg?a=1&b=<2>"
	five := uint64(5)
	values := []any{
		view,
		Envelope{Code: "OK", Message: "ok", RequestID: awkward, Data: v},
		Envelope{Code: "OK", Message: "ok", RequestID: "r", Data: nil},
		Envelope{Code: "OK", Message: "ok", RequestID: "r", Data: rooms.View{}},
		Envelope{Code: "OK", Message: "ok", RequestID: "r", Data: fiber.Map{"user_id": int64(42), "balance": int64(-7), "app_code": "app1", "name": awkward}},
		Envelope{Code: "OK", Message: "ok", RequestID: "r", Data: fiber.Map{"pin_id": int64(3), "status": "removed"}},
		Envelope{Code: "OK", Message: "ok", RequestID: "r", Data: fiber.Map{"hides": []roomlist.Hide{{}, {}}, "pins": []roomlist.Pin(nil)}},
		// An error's details: a map here, JSON already when a router passed
		// the error on from another node (roomcluster).
		Envelope{Code: "ALREADY_EXISTS", Message: awkward, RequestID: "r", Data: map[string]string{"room_id": "app1_<x>&", "z": "1", "a": "2"}},
		Envelope{Code: "ALREADY_EXISTS", Message: "m", RequestID: "r", Data: json.RawMessage(`{"room_id":"app1_\u003cx\u003e"}`)},
		// An audit entry's values as the database hands them back: the
		// migration's JSON_OBJECT rows carry blanks.
		Envelope{Code: "OK", Message: "ok", RequestID: "r", Data: rooms.AuditPage{Items: []rooms.AuditEntry{
			{AuditID: 1, Reason: awkward, Before: json.RawMessage(`{"visible_region_id": 3, "note": "<&>"}`), After: json.RawMessage("{\n \"visible_region_id\" : 4 }")},
			{AuditID: 2, Before: json.RawMessage(`null`)},
		}, NextCursor: "2"}},
		Envelope{Code: "OK", Message: "ok", RequestID: "r", Data: DeadLetterPage{Items: []DeadLetter{{Seq: 1, Reason: awkward}}, Next: &five}},
		Envelope{Code: "OK", Message: "ok", RequestID: "r", Data: outboxrelay.Report{}},
		imbridge.CallbackReply{ActionStatus: "OK", ErrorCode: 1, ErrorInfo: awkward},
	}
	for _, typ := range answerTypes() {
		values = append(values, Envelope{Code: "OK", Data: reflect.New(typ).Elem().Interface()})
	}
	for i, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("value %d: encoding/json: %v", i, err)
		}
		got, err := encodeJSON(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("value %d (%T): encodeJSON %v\n got %s\nwant %s", i, v, err, got, want)
		}
	}
}

// TestAnswersCarryNoFloat: the one output in which encodeJSON differs from
// encoding/json is a float's exponent (1e-07 for 1e-7), so no answer may
// carry a float, nor a value whose type only running shows (any), but
// Envelope.Data, whose values are the other answer types.
func TestAnswersCarryNoFloat(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		if seen[typ] {
			return
		}
		seen[typ] = true
		switch typ.Kind() {
		case reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
			t.Errorf("%s is a %s: encodeJSON writes some floats unlike encoding/json (see encodeJSON)", path, typ)
		case reflect.Interface:
			if path != "Envelope.Data" {
				t.Errorf("%s is an interface: its values are not checked here", path)
			}
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(path+"[]", typ.Elem())
		case reflect.Map:
			walk(path+"{}", typ.Elem())
		case reflect.Struct:
			for i := range typ.NumField() {
				f := typ.Field(i)
				if !f.IsExported() || f.Tag.Get("json") == "-" {
					continue
				}
				walk(typ.Name()+"."+f.Name, f.Type)
			}
		}
	}
	for _, typ := range answerTypes() {
		walk(typ.String(), typ)
	}
	if !seen[reflect.TypeFor[rooms.View]()] || len(seen) < 20 {
		t.Fatalf("walked %d types, rooms.View among them: %v", len(seen), seen[reflect.TypeFor[rooms.View]()])
	}
}

// TestBindRefusesWhatEncodingJSONRefuses pins the decoding that stays with
// encoding/json (decodeJSON): the same 400 and field for each bad body.
func TestBindRefusesWhatEncodingJSONRefuses(t *testing.T) {
	s, _ := newTestServer(t)
	user := mustToken(t, "app1", 42, "", time.Hour)
	tests := []struct{ name, body, message string }{
		{"control character", "{\"name\":\"a\x07b\"}", "malformed JSON body"},
		{"float for an int", `{"count":1.5}`, "count: must be a int"},
		{"huge int", `{"count":99999999999999999999}`, "count: must be a int"},
		{"string for an int", `{"count":"1"}`, "count: must be a int"},
		{"single quotes", `{'name':'a'}`, "malformed JSON body"},
		{"trailing data", `{} {}`, "malformed JSON body: trailing data"},
		{"unterminated", `{"name":"a`, "malformed JSON body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, env, _ := do(t, s, "POST", "/api/v1/echo", user, tt.body)
			if status != 400 || env.Code != "INVALID_ARGUMENT" || !strings.HasPrefix(env.Message, tt.message) {
				t.Fatalf("%d %s %q, want 400 INVALID_ARGUMENT %q", status, env.Code, env.Message, tt.message)
			}
		})
	}
	// Invalid UTF-8 in a string is read as U+FFFD, as encoding/json reads it.
	status, env, _ := do(t, s, "POST", "/api/v1/echo", user, "{\"name\":\"a\xffb\"}")
	data, _ := env.Data.(map[string]any)
	if status != 200 || data["name"] != "a\ufffdb" {
		t.Fatalf("invalid UTF-8: %d %v", status, env.Data)
	}
}
