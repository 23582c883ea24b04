package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"

	"voiceroom/apperr"
)

// Envelope is the body of every response, errors included (docs/openapi.yaml,
// schema Envelope).
type Envelope struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
	Data      any    `json:"data"`
}

// OK answers 200 with data in the envelope.
func OK(c *fiber.Ctx, data any) error {
	return writeJSON(c, fiber.StatusOK, Envelope{Code: "OK", Message: "ok", RequestID: RequestID(c), Data: data})
}

// writeError answers with the envelope of err's kind.
func writeError(c *fiber.Ctx, e *apperr.Error) error {
	setAnswerHeaders(c)
	c.Set("X-Request-Id", RequestID(c))
	return writeJSON(c, httpStatus(e.Code), Envelope{Code: string(e.Code), Message: e.Message, RequestID: RequestID(c), Data: e.Details})
}

// writeJSON answers status with v as JSON, the bytes json.Marshal makes.
// Fiber's Ctx.JSON marshals into a new slice per answer, a seventh of
// all bytes voiceroom allocated under the bench; here v is encoded into
// a pooled buffer and copied into the response's own (pooled) body.
func writeJSON(c *fiber.Ctx, status int, v any) error {
	a := answerBuffers.Get().(*answerBuffer)
	defer a.release()
	if err := a.enc.Encode(v); err != nil {
		return err
	}
	body := a.buf.Bytes()
	c.Status(status)
	c.Response().SetBody(body[:len(body)-1]) // Encode ends with a newline; Marshal does not
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	return nil
}

// answerBuffer is writeJSON's buffer with its encoder, which escapes
// HTML as json.Marshal does.
type answerBuffer struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// maxPooledAnswer bounds the buffers kept for reuse: a rare large answer
// (a long list) does not pin its memory.
const maxPooledAnswer = 64 << 10

var answerBuffers = sync.Pool{New: func() any {
	a := &answerBuffer{}
	a.enc = json.NewEncoder(&a.buf)
	return a
}}

func (a *answerBuffer) release() {
	if a.buf.Cap() > maxPooledAnswer {
		return
	}
	a.buf.Reset()
	answerBuffers.Put(a)
}

// Bind decodes the JSON body into v. An empty body leaves v as it is; a body
// that is not JSON, holds a value of the wrong type or trailing data is
// INVALID_ARGUMENT, naming the field when it can. Unknown fields are ignored
// so that clients may send more than a route reads (a forged region_id, say).
func Bind(c *fiber.Ctx, v any) error {
	body := c.Body()
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if ct := c.Get(fiber.HeaderContentType); ct != "" && !strings.HasPrefix(strings.ToLower(ct), fiber.MIMEApplicationJSON) {
		return apperr.New(apperr.InvalidArgument, "content type must be application/json")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return apperr.Invalid(te.Field, "must be a %s", te.Type.String())
		}
		return apperr.New(apperr.InvalidArgument, "malformed JSON body")
	}
	if dec.More() {
		return apperr.New(apperr.InvalidArgument, "malformed JSON body: trailing data")
	}
	return nil
}
