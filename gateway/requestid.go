package gateway

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/gofiber/fiber/v2"
)

const localRequestID = "voiceroom.request_id"

// maxRequestIDLen bounds a client-supplied X-Request-Id.
const maxRequestIDLen = 64

// requestIDMiddleware takes a sane X-Request-Id or makes one, stores it and
// echoes it in the response header.
func requestIDMiddleware(c *fiber.Ctx) error {
	id := c.Get("X-Request-Id")
	if !saneRequestID(id) {
		id = newRequestID()
	}
	c.Locals(localRequestID, id)
	c.Set("X-Request-Id", id)
	return c.Next()
}

// RequestID returns the request's id, making one if the middleware has not run
// (errors raised before routing, such as a body over the limit).
func RequestID(c *fiber.Ctx) string {
	if id, ok := c.Locals(localRequestID).(string); ok {
		return id
	}
	id := newRequestID()
	c.Locals(localRequestID, id)
	return id
}

// saneRequestID accepts 1..64 characters of [A-Za-z0-9._:-].
func saneRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9',
			ch == '.', ch == '_', ch == ':', ch == '-':
		default:
			return false
		}
	}
	return true
}

func newRequestID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "req_" + hex.EncodeToString(b)
}
