package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// api calls the admin API with an operator's token.
type api struct {
	rt http.RoundTripper
}

// APIError is an answer of the API other than OK: its status and its
// envelope's code, message and request id, shown to the operator as
// they are.
type APIError struct {
	Status    int
	Code      string
	Message   string
	RequestID string
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// refused reports whether the API refused the token itself: the tab
// signs out.
func (e *APIError) refused() bool {
	return e.Status == http.StatusUnauthorized || (e.Status == http.StatusForbidden && e.Code == "PERMISSION_DENIED")
}

// maxAnswerBytes bounds an answer the console reads.
const maxAnswerBytes = 8 << 20

// do sends method path with body as JSON (none when nil) and token, and
// decodes the envelope's data into out (when not nil; numbers stay
// json.Number). A non-OK envelope is an *APIError.
func (a *api) do(ctx context.Context, token, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		return fmt.Errorf("request %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.rt.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	var env struct {
		Code      string          `json:"code"`
		Message   string          `json:"message"`
		RequestID string          `json:"request_id"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("%s %s: answer %d is not the envelope", method, path, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK || env.Code != "OK" {
		return &APIError{Status: resp.StatusCode, Code: env.Code, Message: env.Message, RequestID: env.RequestID}
	}
	if out == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(env.Data))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode data: %w", method, path, err)
	}
	return nil
}
