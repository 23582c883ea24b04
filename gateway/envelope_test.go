package gateway

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// TestWriteJSONWritesWhatMarshalWrites: an answer's body is byte for
// byte json.Marshal's (HTML escaped, no trailing newline), with its
// status and content type, answer after answer on reused buffers,
// a large one included.
func TestWriteJSONWritesWhatMarshalWrites(t *testing.T) {
	values := []any{
		Envelope{Code: "OK", Message: "ok", RequestID: "r1", Data: map[string]any{"title": "<b>&'\"\u2028</b>", "n": 1.5, "ok": true}},
		Envelope{Code: "NOT_FOUND", Message: "room not found", RequestID: "r2"},
		Envelope{Code: "OK", Message: "ok", Data: strings.Repeat("x", 2*maxPooledAnswer)},
		Envelope{Code: "OK", Message: "ok", Data: []int{1, 2, 3}},
	}
	app := fiber.New()
	app.Get("/:i", func(c *fiber.Ctx) error {
		i, _ := c.ParamsInt("i")
		return writeJSON(c, 200+i, values[i])
	})
	for round := range 2 {
		for i, v := range values {
			resp, err := app.Test(httptest.NewRequest("GET", "/"+string(rune('0'+i)), nil), -1)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want, _ := json.Marshal(v)
			if string(got) != string(want) {
				t.Errorf("round %d, value %d: body\n%.200s\nwant\n%.200s", round, i, got, want)
			}
			if resp.StatusCode != 200+i || resp.Header.Get("Content-Type") != fiber.MIMEApplicationJSON {
				t.Errorf("round %d, value %d: status %d, content type %q", round, i, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		}
	}
	c := app.AcquireCtx(&fasthttp.RequestCtx{})
	defer app.ReleaseCtx(c)
	if err := writeJSON(c, 200, func() {}); err == nil {
		t.Error("a value JSON cannot hold was written")
	}
}
