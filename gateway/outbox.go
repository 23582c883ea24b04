package gateway

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"

	"voiceroom/apperr"
	"voiceroom/outboxrelay"
)

// OutboxReader reads the outbox of one app; *outboxrelay.Inspector is one.
type OutboxReader interface {
	Report(ctx context.Context, appCode string) (outboxrelay.Report, error)
}

// outboxTimeout bounds the queries of one GET /admin/v1/outbox.
const outboxTimeout = 5 * time.Second

// OutboxRoutes returns the Mount of GET /admin/v1/outbox: for the admin token's
// app, the pending count, the oldest pending age, the pending rows with the
// most retries and the rows the relay cannot decode. The outbox is shared
// by every app, but an admin token speaks for one, so nothing of another
// app is shown; the relay-wide backlog is in the room_outbox_* metrics.
func OutboxRoutes(r OutboxReader) Mount {
	return func(rt Routers) {
		rt.Admin.Get("/v1/outbox", func(c *fiber.Ctx) error {
			ctx, cancel := context.WithTimeout(c.UserContext(), outboxTimeout)
			defer cancel()
			report, err := r.Report(ctx, PrincipalOf(c).AppCode)
			if err != nil {
				return apperr.Wrap(apperr.Unavailable, "outbox unavailable", err)
			}
			return OK(c, report)
		})
	}
}
