package webhooks

import "voiceroom/bus"

// Payload is a delivery's body, {"events":[...]}: consecutive events of
// one room, in order, each the envelope ROOM_EVENTS holds
// (docs/asyncapi.yaml). A receiver in Go decodes a verified body into it
// and drops the event ids it has handled.
type Payload struct {
	Events []bus.Envelope `json:"events"`
}
