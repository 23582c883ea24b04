package gateway

import (
	"github.com/gofiber/fiber/v2"

	"voiceroom/imbridge"
)

// IMGuard answers Tencent IM callbacks (imbridge.Guard).
type IMGuard interface {
	Handle(q imbridge.CallbackQuery, body []byte) imbridge.CallbackReply
}

// maxCallbackBody bounds a callback body; Tencent's are a few hundred bytes.
const maxCallbackBody = 16 << 10

// IMCallbackRoutes returns the Mount of POST /im/callback, Tencent IM's
// third-party callback. Tencent reads its own JSON answer (never the
// envelope) and treats anything but HTTP 200 as a failed callback, so
// every request, bad ones included, is answered 200 with ErrorCode 0
// (allow) or 1 (deny); the guard authenticates it (Sign, RequestTime).
func IMCallbackRoutes(g IMGuard) Mount {
	return func(rt Routers) {
		rt.Public.Post("/im/callback", func(c *fiber.Ctx) error {
			var reply imbridge.CallbackReply
			if body := c.Body(); len(body) > maxCallbackBody {
				reply = imbridge.CallbackReply{ActionStatus: "OK", ErrorCode: 1, ErrorInfo: "body too large"}
			} else {
				reply = g.Handle(imbridge.CallbackQuery{
					SDKAppID:        c.Query("SdkAppid"),
					CallbackCommand: c.Query("CallbackCommand"),
					Sign:            c.Query("Sign"),
					RequestTime:     c.Query("RequestTime"),
				}, body)
			}
			return c.Status(fiber.StatusOK).JSON(reply)
		})
	}
}
