package docs

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/oasdiff/yaml"
)

// AsyncAPI is the text of asyncapi.yaml: the room event stream's contract
// (AsyncAPI 3), for teams that add their own consumers.
//
//go:embed asyncapi.yaml
var AsyncAPI []byte

// asyncDoc is the part of asyncapi.yaml CheckEvent reads.
type asyncDoc struct {
	Channels struct {
		RoomEvents struct {
			Messages map[string]ref `json:"messages"`
		} `json:"roomEvents"`
	} `json:"channels"`
	Components struct {
		Messages map[string]struct {
			Name    string `json:"name"`
			Payload ref    `json:"payload"`
		} `json:"messages"`
		Schemas map[string]*schema `json:"schemas"`
	} `json:"components"`
}

type ref struct {
	Ref string `json:"$ref"`
}

// schema is the subset of JSON Schema asyncapi.yaml uses.
type schema struct {
	Ref                  string             `json:"$ref"`
	Type                 string             `json:"type"`
	Required             []string           `json:"required"`
	Properties           map[string]*schema `json:"properties"`
	AdditionalProperties *bool              `json:"additionalProperties"`
	Items                *schema            `json:"items"`
	AllOf                []*schema          `json:"allOf"`
	Const                any                `json:"const"`
	Enum                 []any              `json:"enum"`
}

var (
	asyncOnce   sync.Once
	asyncParsed *asyncDoc
	asyncErr    error
)

func loadAsyncAPI() (*asyncDoc, error) {
	asyncOnce.Do(func() {
		var d asyncDoc
		if err := yaml.Unmarshal(AsyncAPI, &d); err != nil {
			asyncErr = fmt.Errorf("asyncapi.yaml: %w", err)
			return
		}
		asyncParsed = &d
	})
	return asyncParsed, asyncErr
}

// EventTypes returns the event types asyncapi.yaml documents on the room
// events channel, sorted.
func EventTypes() ([]string, error) {
	d, err := loadAsyncAPI()
	if err != nil {
		return nil, err
	}
	var out []string
	for name := range d.Channels.RoomEvents.Messages {
		out = append(out, name)
	}
	slices.Sort(out)
	return out, nil
}

// CheckEvent checks one event as ROOM_EVENTS carries it (the envelope's
// JSON) against asyncapi.yaml: its type must be documented and every field
// must be documented, of the documented type, and present when required.
// It is what keeps the document true in tests; it is not a runtime check.
func CheckEvent(envelope []byte) error {
	d, err := loadAsyncAPI()
	if err != nil {
		return err
	}
	var head struct {
		EventType string `json:"event_type"`
	}
	if err := json.Unmarshal(envelope, &head); err != nil {
		return fmt.Errorf("event: %w", err)
	}
	msg, ok := d.Components.Messages[head.EventType]
	if !ok {
		return fmt.Errorf("event type %q is not documented", head.EventType)
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(envelope)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("event: %w", err)
	}
	return d.check(&schema{Ref: msg.Payload.Ref}, v, head.EventType)
}

// check validates v against s; path names where in the event v is.
func (d *asyncDoc) check(s *schema, v any, path string) error {
	if s.Ref != "" {
		name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/")
		target := d.Components.Schemas[name]
		if !ok || target == nil {
			return fmt.Errorf("%s: unresolved $ref %q", path, s.Ref)
		}
		s = target
	}
	for _, sub := range s.AllOf {
		if err := d.check(sub, v, path); err != nil {
			return err
		}
	}
	if s.Const != nil && fmt.Sprint(v) != fmt.Sprint(s.Const) {
		return fmt.Errorf("%s: %v, want %v", path, v, s.Const)
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		return fmt.Errorf("%s: %v is not one of %v", path, v, s.Enum)
	}
	switch s.Type {
	case "":
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an object", path, v)
		}
		for _, name := range s.Required {
			if _, ok := obj[name]; !ok {
				return fmt.Errorf("%s: required field %q is missing", path, name)
			}
		}
		for name, fv := range obj {
			ps, ok := s.Properties[name]
			if !ok {
				if s.AdditionalProperties != nil && !*s.AdditionalProperties {
					return fmt.Errorf("%s: field %q is not documented", path, name)
				}
				continue
			}
			if err := d.check(ps, fv, path+"."+name); err != nil {
				return err
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an array", path, v)
		}
		for i, item := range arr {
			if s.Items != nil {
				if err := d.check(s.Items, item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: %T, want a string", path, v)
		}
	case "integer":
		n, ok := v.(json.Number)
		if _, err := n.Int64(); !ok || err != nil {
			return fmt.Errorf("%s: %v, want an integer", path, v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: %T, want a boolean", path, v)
		}
	default:
		return fmt.Errorf("%s: schema type %q is not supported by CheckEvent", path, s.Type)
	}
	return nil
}
