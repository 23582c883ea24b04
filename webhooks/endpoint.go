package webhooks

import (
	"context"
	"slices"
	"strings"

	"voiceroom/apperr"
	"voiceroom/roomevent"
)

// MaxEndpointsPerApp bounds the endpoints of one app.
const MaxEndpointsPerApp = 5

// maxEventTypes bounds the event types an endpoint names.
const maxEventTypes = 64

// Endpoint is a webhook endpoint as admins see it: never its secret.
type Endpoint struct {
	// ID is the endpoint's id, unique across apps.
	ID int64 `json:"webhook_id"`
	// URL is where deliveries go.
	URL string `json:"url"`
	// EventTypes are the event types it wants, empty for every type
	// (types added later included).
	EventTypes []string `json:"event_types"`
	// Enabled is false while the endpoint is paused, by an admin or
	// automatically (see PausedReason); its backlog waits meanwhile.
	Enabled bool `json:"enabled"`
	// PausedReason says who paused it and why; empty while enabled.
	PausedReason string `json:"paused_reason"`
	// PausedAtMs is when it was paused, 0 while enabled.
	PausedAtMs int64 `json:"paused_at_ms"`
	// PreviousSecretUntilMs is, after a rotation, until when the previous
	// secret still signs (each delivery then carries both signatures); 0
	// when only the current secret signs.
	PreviousSecretUntilMs int64 `json:"previous_secret_until_ms"`
	// CreatedBy is the admin who created it.
	CreatedBy   string `json:"created_by"`
	CreatedAtMs int64  `json:"created_at_ms"`
	UpdatedAtMs int64  `json:"updated_at_ms"`
}

// WithSecret is an Endpoint with its signing secret, answered once: at
// creation and at a rotation.
type WithSecret struct {
	Endpoint
	// Secret is the signing secret, whsec_ and the base64 of the key.
	Secret string `json:"secret"`
}

// wants reports whether the endpoint wants events of type t.
func (e *Endpoint) wants(t string) bool {
	return len(e.EventTypes) == 0 || slices.Contains(e.EventTypes, t)
}

// NewEndpoint is what an admin gives to create an endpoint.
type NewEndpoint struct {
	URL        string
	EventTypes []string
}

// Patch is what an admin may change; nil fields stay.
type Patch struct {
	URL        *string
	EventTypes *[]string
	// Enabled false pauses (reason: the operator), true resumes: the
	// endpoint gets its backlog first, then the new events.
	Enabled *bool
}

// checkEventTypes returns types without repeats, each a type of the event
// contract; empty means every type. Errors are INVALID_ARGUMENT naming
// event_types.
func checkEventTypes(types []string) ([]string, error) {
	if len(types) > maxEventTypes {
		return nil, apperr.Invalid("event_types", "at most %d", maxEventTypes)
	}
	out := make([]string, 0, len(types))
	for _, t := range types {
		if _, ok := roomevent.Lookup(t); !ok {
			return nil, apperr.Invalid("event_types", "%q is not an event type (see docs/events.md)", t)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// checkNew validates and normalises n under p.
func (n NewEndpoint) check(ctx context.Context, p Policy) (NewEndpoint, error) {
	u, err := p.CheckURL(ctx, n.URL)
	if err != nil {
		return n, err
	}
	types, err := checkEventTypes(n.EventTypes)
	if err != nil {
		return n, err
	}
	return NewEndpoint{URL: u, EventTypes: types}, nil
}

// typesWithin reports whether an endpoint wanting types wants nothing
// that one wanting of does not (empty: every type).
func typesWithin(types, of []string) bool {
	if len(of) == 0 {
		return true
	}
	if len(types) == 0 {
		return false
	}
	for _, t := range types {
		if !slices.Contains(of, t) {
			return false
		}
	}
	return true
}

func joinTypes(types []string) string { return strings.Join(types, ",") }

func splitTypes(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}
