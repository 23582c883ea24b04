package gateway

import (
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/cors"
)

// CORS: web pages inside the apps (event pages, say) call /api from a
// browser, on an origin the operator lists (Config.CORSOrigins). The policy
// allows exactly what the API uses: the methods of the /api routes, the
// request headers of docs/openapi.yaml, and the response headers a client
// reads. Credentials (cookies) stay off: the API authenticates with a
// bearer token only. /admin has no CORS policy at all, so no browser page
// of another origin can call it.
var (
	corsAllowHeaders  = []string{fiber.HeaderAuthorization, fiber.HeaderContentType, "Idempotency-Key", "X-Request-Id"}
	corsExposeHeaders = []string{"X-Request-Id", "Idempotent-Replayed"}
)

// corsMaxAge is how long, in seconds, a browser may reuse a preflight's
// answer (browsers cap it: Chromium at 2 hours).
const corsMaxAge = 600

// newCORS is the /api group's CORS middleware for origins and methods. A
// preflight (OPTIONS with Access-Control-Request-Method) is answered 204
// here, before authentication; a preflight or request from an origin not
// listed gets no Access-Control-Allow-Origin, so the browser refuses it.
func newCORS(origins, methods []string) fiber.Handler {
	return cors.New(cors.Config{
		AllowOrigins:     strings.Join(origins, ","),
		AllowMethods:     strings.Join(methods, ","),
		AllowHeaders:     strings.Join(corsAllowHeaders, ","),
		ExposeHeaders:    strings.Join(corsExposeHeaders, ","),
		AllowCredentials: false,
		MaxAge:           corsMaxAge,
	})
}

// apiMethods returns the methods of app's routes under /api, sorted,
// without the HEAD twins Fiber adds to every GET.
func apiMethods(app *fiber.App) []string {
	var out []string
	for _, r := range app.GetRoutes(true) {
		if r.Method != fiber.MethodHead && strings.HasPrefix(r.Path, "/api/") && !slices.Contains(out, r.Method) {
			out = append(out, r.Method)
		}
	}
	slices.Sort(out)
	return out
}

// checkOrigin accepts an origin as a browser sends it in its Origin
// header: scheme://host[:port], http or https, lowercase scheme, and
// nothing else (no path, not even "/", no query, no user, no wildcard).
func checkOrigin(o string) error {
	if strings.Contains(o, "*") {
		return errors.New("no wildcards: list each origin")
	}
	u, err := url.Parse(o)
	if err != nil {
		return errors.New("want scheme://host[:port]")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || o != u.Scheme+"://"+u.Host {
		return errors.New("want http(s)://host[:port], without path, query or user")
	}
	return nil
}
