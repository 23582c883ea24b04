package gateway

import (
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/internal/testenv"
)

func TestDocsRoutesServeTheDocumentAndThePage(t *testing.T) {
	spec := []byte("openapi: 3.0.3\ninfo: {title: t, version: \"1\"}\npaths: {}\n")
	reg := prometheus.NewRegistry()
	s, err := New(Config{Addr: "127.0.0.1:0", JWTSecret: testSecret}, (&testenv.LogBuffer{}).JSONLogger(), reg, reg, nil, DocsRoutes(spec))
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string, string) {
		t.Helper()
		resp, err := s.App().Test(httptest.NewRequest("GET", path, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: read body: %v", path, err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
	}

	if status, ct, body := get("/openapi.yaml"); status != 200 || ct != "application/yaml" || body != string(spec) {
		t.Fatalf("/openapi.yaml: %d %q %q", status, ct, body)
	}
	status, ct, page := get("/docs")
	if status != 200 || !strings.HasPrefix(ct, "text/html") || !strings.Contains(page, "/openapi.yaml") {
		t.Fatalf("/docs: %d %q\n%s", status, ct, page)
	}
	// The page's script comes from the binary, not a CDN.
	if !strings.Contains(page, `src="/docs/swagger-ui-bundle.js"`) {
		t.Fatalf("/docs does not load its script from /docs/:\n%s", page)
	}
	if status, _, body := get("/docs/swagger-ui-bundle.js"); status != 200 || len(body) < 1000 {
		t.Fatalf("/docs/swagger-ui-bundle.js: %d, %d bytes", status, len(body))
	}
}

func TestRoutesListsEveryRouteOnce(t *testing.T) {
	s, _ := newTestServer(t)
	routes := s.Routes()
	for _, want := range []Route{
		{Method: "GET", Path: "/healthz"}, {Method: "GET", Path: "/readyz"},
		{Method: "POST", Path: "/api/v1/echo"}, {Method: "GET", Path: "/admin/v1/whoami"},
	} {
		if !slices.Contains(routes, want) {
			t.Errorf("Routes() lacks %v: %v", want, routes)
		}
	}
	// The public routes only: metrics are the operators' listener's.
	if slices.Contains(routes, Route{Method: "GET", Path: "/metrics"}) {
		t.Errorf("Routes() lists /metrics, which only the operators' listener serves: %v", routes)
	}
	for i, r := range routes {
		if r.Method == "HEAD" {
			t.Errorf("Routes() lists Fiber's HEAD twin %v", r)
		}
		if i > 0 && routes[i-1] == r {
			t.Errorf("Routes() lists %v twice", r)
		}
	}
}
