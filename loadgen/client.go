package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// client speaks the API's envelope over one shared connection pool.
type client struct {
	base string
	http *http.Client
}

func newClient(base string, conns int) *client {
	tr := &http.Transport{
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		MaxConnsPerHost:     0,
		IdleConnTimeout:     90 * time.Second,
	}
	return &client{base: strings.TrimRight(base, "/"), http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
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
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(a.raw, &env); err != nil {
		return err
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
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{code: "transport", message: err.Error()}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return answer{code: "transport", message: err.Error()}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{code: "transport", message: err.Error()}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return answer{status: resp.StatusCode, code: "transport", message: err.Error()}
	}
	if resp.StatusCode == http.StatusOK {
		return answer{status: resp.StatusCode, raw: raw}
	}
	var env struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	a := answer{status: resp.StatusCode, code: fmt.Sprintf("HTTP_%d", resp.StatusCode)}
	if json.Unmarshal(raw, &env) != nil {
		a.data = raw
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, nil
	}
	return resp.StatusCode, json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out)
}
