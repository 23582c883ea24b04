package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// DefaultMaxAnswerBytes is Client.MaxAnswerBytes when zero.
const DefaultMaxAnswerBytes = 4 << 20

// ErrRouteNotFound is matched (errors.Is) by the *Error of an answer of a
// server that has no such route: a feature of another build.
var ErrRouteNotFound = errors.New("route not found on this server")

// Client calls the API. Its fields are read on every call and must not
// change while calls are under way; a Client is safe for concurrent use.
type Client struct {
	// BaseURL is put before every Request.Path ("http://127.0.0.1:8080");
	// empty sends the path as it is (a RoundTripper that serves paths).
	BaseURL string
	// HTTP sends the requests; nil is http.DefaultClient. Its Transport
	// may be an in-process RoundTripper.
	HTTP *http.Client
	// MaxAnswerBytes bounds the answer read; a longer one is cut there
	// (and then fails to decode). Default DefaultMaxAnswerBytes.
	MaxAnswerBytes int64
	// UseNumber makes Call decode the data's numbers into an interface
	// value (any, map[string]any) as json.Number, not float64.
	UseNumber bool
}

// Request is one call of the API.
type Request struct {
	Method string
	// Path is the route with its query ("/api/v1/rooms?limit=20").
	Path string
	// Token is the bearer token; none when empty.
	Token string
	// IdempotencyKey is the Idempotency-Key header; none when empty.
	IdempotencyKey string
	// Body is sent as JSON; no body when nil.
	Body any
}

// Answer is the server's answer to one request: its status and body,
// read whole.
type Answer struct {
	Status int
	Body   []byte
}

// Envelope is the API's answer envelope.
type Envelope struct {
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	RequestID string          `json:"request_id"`
	Data      json.RawMessage `json:"data"`
}

// Envelope decodes the answer's envelope; ok is false when the body is
// not one (a proxy's page, a cut answer).
func (a Answer) Envelope() (env Envelope, ok bool) {
	return env, json.Unmarshal(a.Body, &env) == nil
}

// Error is an answer of the API other than 200 with code OK: its status
// and its envelope's code, message and request id, as the server said
// them.
type Error struct {
	Method, Path string
	Status       int
	Code         string
	Message      string
	RequestID    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, e.Code, e.Message)
}

// Is makes errors.Is(err, ErrRouteNotFound) true for the server's answer
// to a route it does not have (404, "route not found").
func (e *Error) Is(target error) bool {
	return target == ErrRouteNotFound && e.Status == http.StatusNotFound && e.Message == "route not found"
}

// IsCode reports whether err is an *Error with the envelope code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Send sends r and reads the answer. Its error is the transport's (no
// answer, or one that could not be read); any status is an Answer.
func (c *Client) Send(ctx context.Context, r Request) (Answer, error) {
	var rd io.Reader
	if r.Body != nil {
		b, err := json.Marshal(r.Body)
		if err != nil {
			return Answer{}, fmt.Errorf("encode %s %s: %w", r.Method, r.Path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, c.BaseURL+r.Path, rd)
	if err != nil {
		return Answer{}, fmt.Errorf("%s %s: %w", r.Method, r.Path, err)
	}
	if r.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	if r.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", r.IdempotencyKey)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("%s %s: %w", r.Method, r.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, c.maxAnswer()))
	if err != nil {
		return Answer{Status: resp.StatusCode}, fmt.Errorf("%s %s: read answer: %w", r.Method, r.Path, err)
	}
	return Answer{Status: resp.StatusCode, Body: raw}, nil
}

// Call sends r and decodes the data of an OK answer into out (when out is
// not nil and the answer has data). Any other answer is an *Error, or a
// plain error when it is not the envelope.
func (c *Client) Call(ctx context.Context, r Request, out any) error {
	a, err := c.Send(ctx, r)
	if err != nil {
		return err
	}
	env, ok := a.Envelope()
	if !ok {
		return fmt.Errorf("%s %s: %d, not the JSON envelope: %.200s", r.Method, r.Path, a.Status, a.Body)
	}
	if a.Status != http.StatusOK || env.Code != "OK" {
		return &Error{Method: r.Method, Path: r.Path, Status: a.Status, Code: env.Code, Message: env.Message, RequestID: env.RequestID}
	}
	if out == nil || len(env.Data) == 0 {
		return nil
	}
	if c.UseNumber {
		dec := json.NewDecoder(bytes.NewReader(env.Data))
		dec.UseNumber()
		err = dec.Decode(out)
	} else {
		err = json.Unmarshal(env.Data, out)
	}
	if err != nil {
		return fmt.Errorf("%s %s: decode data: %w", r.Method, r.Path, err)
	}
	return nil
}

// Get fetches url outside the envelope (health, metrics, the IM
// emulator) and answers its status and at most limit bytes of its body.
func (c *Client) Get(ctx context.Context, url string, limit int64) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	return resp.StatusCode, b, err
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP == nil {
		return http.DefaultClient
	}
	return c.HTTP
}

func (c *Client) maxAnswer() int64 {
	if c.MaxAnswerBytes <= 0 {
		return DefaultMaxAnswerBytes
	}
	return c.MaxAnswerBytes
}
