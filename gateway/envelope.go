package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

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
	return c.Status(fiber.StatusOK).JSON(Envelope{Code: "OK", Message: "ok", RequestID: RequestID(c), Data: data})
}

// writeError answers with the envelope of err's kind.
func writeError(c *fiber.Ctx, e *apperr.Error) error {
	setAnswerHeaders(c)
	c.Set("X-Request-Id", RequestID(c))
	return c.Status(httpStatus(e.Code)).JSON(Envelope{Code: string(e.Code), Message: e.Message, RequestID: RequestID(c), Data: e.Details})
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
