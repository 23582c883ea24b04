package testenv

import (
	"io"
	"net/http"
	"testing"
)

// Fetch sends a request without a body to url, with headers given as
// name, value pairs, and returns the answer's status, headers and body. A
// request that gets no answer fails the test.
func Fetch(tb testing.TB, method, url string, headers ...string) (int, http.Header, string) {
	tb.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, string(body)
}
