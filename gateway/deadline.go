package gateway

import (
	"context"

	"github.com/gofiber/fiber/v2"
)

// deadlineMiddleware gives each request a context that ends RequestTimeout
// after it arrived. Handlers pass c.UserContext() to everything they wait
// on, so a request never outlives its deadline: what is still waiting then
// gives up, and the request answers UNAVAILABLE.
func (s *Server) deadlineMiddleware(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.RequestTimeout)
	defer cancel()
	c.SetUserContext(ctx)
	return c.Next()
}
