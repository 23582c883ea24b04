package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// newHTTPClient returns the client of deliveries: no proxy (the policy
// judges the receiver's own addresses), no redirects followed, every
// connection dialled through the policy's guard.
func newHTTPClient(cfg Config) *http.Client {
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           cfg.Policy.dialer(cfg.Timeout).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   MaxConcurrency, // several endpoints may share a host: each keeps its connections
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.Timeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// result is what one attempt came to.
type result struct {
	outcome    string        // OutcomeDelivered, OutcomeFailed or OutcomeRejected
	status     int           // the HTTP status, 0 when none came
	retryAfter time.Duration // a 429's Retry-After, 0 when none
	err        string        // what failed, for the log, the history and the dead letter
	latency    time.Duration
}

// attempt POSTs body to url with the signed headers and sorts the answer:
// 2xx delivered; 408, 429, 5xx, any other status below 400 (a redirect,
// not followed), a timeout or a connection error failed (tried again);
// any other 4xx rejected. At most limit bytes of the answer are read.
func attempt(ctx context.Context, client *http.Client, url string, h http.Header, body []byte, timeout time.Duration, limit int, now func() time.Time) result {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return result{outcome: OutcomeRejected, err: "bad request: " + err.Error()}
	}
	req.Header = h
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return result{outcome: OutcomeFailed, err: transportError(err), latency: time.Since(start)}
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, int64(limit)))
	resp.Body.Close()
	r := result{status: resp.StatusCode, latency: time.Since(start)}
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		r.outcome = OutcomeDelivered
		return r
	case s == http.StatusTooManyRequests:
		r.outcome = OutcomeFailed
		r.retryAfter = retryAfter(resp.Header.Get("Retry-After"), now())
	case s == http.StatusRequestTimeout || s >= 500 || s < 400:
		r.outcome = OutcomeFailed
	default:
		r.outcome = OutcomeRejected
	}
	r.err = "HTTP " + strconv.Itoa(resp.StatusCode)
	if loc := resp.Header.Get("Location"); resp.StatusCode < 400 && loc != "" {
		r.err += ": redirect to " + excerpt([]byte(loc), 200) + " not followed"
	} else if len(head) > 0 {
		r.err += ": " + excerpt(head, 200)
	}
	return r
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, 1<<31)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// transportError says why no answer came, without the URL (which the
// log names anyway).
func transportError(err error) string {
	switch {
	case refusedAddress(err):
		var msg string
		for e := err; e != nil; e = errors.Unwrap(e) {
			if e != ErrAddressNotAllowed && errors.Is(e, ErrAddressNotAllowed) {
				msg = e.Error() // the deepest wrap: names the address
			}
		}
		return "refused: " + msg
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return fmt.Sprint(inner)
		}
	}
	return err.Error()
}

// excerpt is up to n bytes of b as one line of valid UTF-8.
func excerpt(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	s := strings.ToValidUTF8(string(b), "?")
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return strings.Join(strings.Fields(s), " ")
}
