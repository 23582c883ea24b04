package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"voiceroom/apiclient"
)

// client speaks the API's envelope over one shared connection pool.
type client struct {
	api  apiclient.Client
	http *http.Client
}

func newClient(base string, conns int) *client {
	tr := &http.Transport{
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		MaxConnsPerHost:     0,
		IdleConnTimeout:     90 * time.Second,
	}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	return &client{api: apiclient.Client{BaseURL: strings.TrimRight(base, "/"), HTTP: hc}, http: hc}
}

// answer is one response: code is "" on success, else the envelope's code
// (or "HTTP_<status>" when the body is not an envelope, "transport" when
// there was no answer).
type answer struct {
	status  int
	code    string
	message string
	// raw is a 200 answer's body, undecoded: the load's commands never
	// read it, and decoding every answer was a tenth of the bench's own
	// CPU (which an in-process run counts as voiceroom's). decode reads
	// its data.
	raw  []byte
	data json.RawMessage // a failed answer's data
}

// decode decodes the data of the answer into out.
func (a answer) decode(out any) error {
	if a.raw == nil {
		return json.Unmarshal(a.data, out)
	}
	env, ok := apiclient.Answer{Body: a.raw}.Envelope()
	if !ok {
		return fmt.Errorf("answer %d is not the envelope", a.status)
	}
	return json.Unmarshal(env.Data, out)
}

// server reports whether a failure is the server's rather than the rules'.
func (a answer) server() bool { return a.code == "transport" || a.status >= 500 }

func (c *client) do(ctx context.Context, method, path, token string, body any) answer {
	return c.doKey(ctx, method, path, token, "", body)
}

// setupCall is doKey for the setup's requests, which come faster than a
// target's per-user rate limit may allow (one admin credits every user): a
// RATE_LIMITED answer is retried after a pause, for at most a minute.
// Every setup request is safe to repeat (credits and creates carry keys).
func (c *client) setupCall(ctx context.Context, method, path, key, token string, body any) answer {
	deadline := time.Now().Add(time.Minute)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		a := c.doKey(ctx, method, path, token, key, body)
		if a.code != "RATE_LIMITED" || time.Now().After(deadline) {
			return a
		}
		select {
		case <-ctx.Done():
			return a
		case <-time.After(wait):
		}
	}
}

// doKey is do with an Idempotency-Key (none when key is empty).
func (c *client) doKey(ctx context.Context, method, path, token, key string, body any) answer {
	ans, err := c.api.Send(ctx, apiclient.Request{Method: method, Path: path, Token: token, IdempotencyKey: key, Body: body})
	if err != nil {
		return answer{status: ans.Status, code: "transport", message: err.Error()}
	}
	if ans.Status == http.StatusOK {
		return answer{status: ans.Status, raw: ans.Body}
	}
	a := answer{status: ans.Status, code: fmt.Sprintf("HTTP_%d", ans.Status)}
	env, ok := ans.Envelope()
	if !ok {
		a.data = ans.Body
		return a
	}
	a.data, a.message = env.Data, env.Message
	if env.Code != "" && env.Code != "OK" {
		a.code = env.Code
	}
	return a
}

// getJSON fetches a plain JSON document (the emulator's inspection routes).
func (c *client) getJSON(ctx context.Context, url string, out any) (int, error) {
	status, raw, err := c.api.Get(ctx, url, 16<<20)
	if err != nil || status != http.StatusOK {
		return status, err
	}
	return status, json.Unmarshal(raw, out)
}
