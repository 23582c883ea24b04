package gateway

import (
	"strings"

	"github.com/gofiber/fiber/v2"
)

// answerHeaders sets the headers every public answer carries (see
// setAnswerHeaders) before the request goes on.
func answerHeaders(c *fiber.Ctx) error {
	setAnswerHeaders(c)
	return c.Next()
}

// setAnswerHeaders sets X-Content-Type-Options: nosniff on every answer, so
// that a browser never runs a body as another type than the one declared,
// and Cache-Control: no-store on /api, /admin and /platform, whose answers (errors
// included) carry a user's or an operator's data that no browser or proxy
// may keep. /docs and /openapi.yaml stay cacheable. The error handler calls
// it too, for errors raised before any middleware ran (a body too large).
func setAnswerHeaders(c *fiber.Ctx) {
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	if private(c.Path()) {
		c.Set(fiber.HeaderCacheControl, "no-store")
	}
}

// privatePrefixes are the route groups whose answers carry a principal's
// data.
var privatePrefixes = [...]string{"/api", "/admin", "/platform"}

// private reports whether path reaches the /api, /admin or /platform group's
// middleware: Fiber matches a group's prefix case-insensitively and as a
// plain prefix.
func private(path string) bool {
	for _, p := range privatePrefixes {
		if len(path) >= len(p) && strings.EqualFold(path[:len(p)], p) {
			return true
		}
	}
	return false
}
