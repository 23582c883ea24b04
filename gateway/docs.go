package gateway

import (
	"sort"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/swaggest/swgui/v5emb"
)

// DocsRoutes returns the Mount of the API reference, unauthenticated:
// GET /openapi.yaml answers spec (the OpenAPI document) and GET /docs a
// Swagger UI page that reads it. The page's scripts and styles are embedded
// in the binary (swgui's v5emb), so it needs no CDN.
func DocsRoutes(spec []byte) Mount {
	ui := adaptor.HTTPHandler(v5emb.New("voiceroom HTTP API", "/openapi.yaml", "/docs/"))
	return func(r Routers) {
		r.Public.Get("/openapi.yaml", func(c *fiber.Ctx) error {
			c.Set(fiber.HeaderContentType, "application/yaml")
			return c.Status(fiber.StatusOK).Send(spec)
		})
		r.Public.Get("/docs", ui)
		r.Public.Get("/docs/*", ui)
	}
}

// Route is one route the server serves.
type Route struct {
	Method string
	// Path is Fiber's pattern, with :name parameters and * wildcards.
	Path string
}

// Routes returns the routes the server serves, sorted by path and method,
// without the HEAD twins Fiber adds to every GET and without middleware.
// The OpenAPI test compares them with the document.
func (s *Server) Routes() []Route {
	seen := map[Route]bool{}
	var out []Route
	for _, r := range s.app.GetRoutes(true) {
		rt := Route{Method: r.Method, Path: r.Path}
		if r.Method == fiber.MethodHead || seen[rt] {
			continue
		}
		seen[rt] = true
		out = append(out, rt)
	}
	sort.Slice(out, func(i, j int) bool {
		if c := strings.Compare(out[i].Path, out[j].Path); c != 0 {
			return c < 0
		}
		return out[i].Method < out[j].Method
	})
	return out
}
