package roomcluster

import (
	"encoding/json"
	"strconv"

	"voiceroom/internal/plainjson"
	"voiceroom/rooms"
)

// encodeCommand is cmd's JSON, byte for byte what json.Marshal makes of
// it, written without reflection for the commands a router ships most
// (every field a scalar). A command with UpdateRoomInfo's fields, a PK or
// a sweep's users goes through encoding/json.
func encodeCommand(cmd *rooms.Command) ([]byte, error) {
	a := &cmd.Args
	if a.Info != nil || a.PK != nil || a.UserIDs != nil {
		return json.Marshal(cmd)
	}
	w := objectWriter{b: make([]byte, 0, 160+len(cmd.AppCode)+len(cmd.RoomID)+len(cmd.CommandID)+len(cmd.RequestID)+
		len(a.Title)+len(a.Description)+len(a.CoverURL))}
	for i := range commandFields {
		f := &commandFields[i]
		switch {
		case f.name == "{":
			w.open()
		case f.name == "}":
			w.close()
		case f.str != nil:
			w.str(f.name, *f.str(cmd), f.required)
		case f.int != nil:
			w.int(f.name, *f.int(cmd))
		case f.small != nil:
			w.int(f.name, int64(*f.small(cmd)))
		case f.bool != nil:
			w.boolean(f.name, *f.bool(cmd))
		default: // an object's key: "{" follows
			w.key(f.name)
		}
	}
	return w.b, nil
}

// commandField is one member of a rooms.Command's JSON, in json.Marshal's
// order, with the field it holds; "{" and "}" open and close an object,
// and a name with no field is an object's key.
type commandField struct {
	name     string
	required bool // written even when empty (no omitempty)
	str      func(*rooms.Command) *string
	int      func(*rooms.Command) *int64
	small    func(*rooms.Command) *int
	bool     func(*rooms.Command) *bool
}

// commandFields are the members encodeCommand writes and readCommand
// reads. Kind is read apart (knownKind).
var commandFields = []commandField{
	{name: "{"},
	{name: "kind", required: true, str: func(c *rooms.Command) *string { return (*string)(&c.Kind) }},
	{name: "app", required: true, str: func(c *rooms.Command) *string { return &c.AppCode }},
	{name: "room", str: func(c *rooms.Command) *string { return &c.RoomID }},
	{name: "cid", str: func(c *rooms.Command) *string { return &c.CommandID }},
	{name: "ck", bool: func(c *rooms.Command) *bool { return &c.ClientKey }},
	{name: "rid", str: func(c *rooms.Command) *string { return &c.RequestID }},
	{name: "actor", required: true},
	{name: "{"},
	{name: "user_id", int: func(c *rooms.Command) *int64 { return &c.Actor.UserID }},
	{name: "admin", bool: func(c *rooms.Command) *bool { return &c.Actor.Admin }},
	{name: "operator", str: func(c *rooms.Command) *string { return &c.Actor.Operator }},
	{name: "}"},
	{name: "now_ms", int: func(c *rooms.Command) *int64 { return &c.NowMs }},
	{name: "args", required: true},
	{name: "{"},
	{name: "title", str: func(c *rooms.Command) *string { return &c.Args.Title }},
	{name: "cover_url", str: func(c *rooms.Command) *string { return &c.Args.CoverURL }},
	{name: "description", str: func(c *rooms.Command) *string { return &c.Args.Description }},
	{name: "mode", str: func(c *rooms.Command) *string { return &c.Args.Mode }},
	{name: "seat_count", small: func(c *rooms.Command) *int { return &c.Args.SeatCount }},
	{name: "room_short_id", str: func(c *rooms.Command) *string { return &c.Args.ShortID }},
	{name: "region_id", int: func(c *rooms.Command) *int64 { return &c.Args.RegionID }},
	{name: "seat_index", small: func(c *rooms.Command) *int { return &c.Args.SeatIndex }},
	{name: "locked", bool: func(c *rooms.Command) *bool { return &c.Args.Locked }},
	{name: "muted", bool: func(c *rooms.Command) *bool { return &c.Args.Muted }},
	{name: "seat_mode", str: func(c *rooms.Command) *string { return &c.Args.SeatMode }},
	{name: "expires_at_ms", int: func(c *rooms.Command) *int64 { return &c.Args.ExpiresAtMs }},
	{name: "mute_seconds", int: func(c *rooms.Command) *int64 { return &c.Args.MuteSeconds }},
	{name: "target_user_id", int: func(c *rooms.Command) *int64 { return &c.Args.TargetUserID }},
	{name: "ban_seconds", int: func(c *rooms.Command) *int64 { return &c.Args.BanSeconds }},
	{name: "gift_id", int: func(c *rooms.Command) *int64 { return &c.Args.GiftID }},
	{name: "gift_name", str: func(c *rooms.Command) *string { return &c.Args.GiftName }},
	{name: "count", int: func(c *rooms.Command) *int64 { return &c.Args.Count }},
	{name: "price", int: func(c *rooms.Command) *int64 { return &c.Args.Price }},
	{name: "heat_per", int: func(c *rooms.Command) *int64 { return &c.Args.HeatPer }},
	{name: "password_hash", str: func(c *rooms.Command) *string { return &c.Args.PasswordHash }},
	{name: "password_given", bool: func(c *rooms.Command) *bool { return &c.Args.PasswordGiven }},
	{name: "reason", str: func(c *rooms.Command) *string { return &c.Args.Reason }},
	{name: "}"},
	{name: "pw", str: func(c *rooms.Command) *string { return &c.Password }},
	{name: "nv", bool: func(c *rooms.Command) *bool { return &c.NoView }},
	{name: "}"},
}

// objectWriter appends JSON objects' members, leaving out the empty
// values of omitempty fields as encoding/json does.
type objectWriter struct {
	b     []byte
	first bool // no member yet in the object being written
}

func (w *objectWriter) open()  { w.b, w.first = append(w.b, '{'), true }
func (w *objectWriter) close() { w.b, w.first = append(w.b, '}'), false }

func (w *objectWriter) key(k string) {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *objectWriter) str(k, v string, always bool) {
	if v != "" || always {
		w.key(k)
		w.b = plainjson.AppendString(w.b, v)
	}
}

func (w *objectWriter) int(k string, v int64) {
	if v != 0 {
		w.key(k)
		w.b = strconv.AppendInt(w.b, v, 10)
	}
}

func (w *objectWriter) boolean(k string, v bool) {
	if v {
		w.key(k)
		w.b = append(w.b, "true"...)
	}
}

// decodeCommand reads a routed command: without reflection when data has
// the exact shape encodeCommand writes, with strings that need no
// unescaping; through encoding/json otherwise (any other writer, such as
// a router of another release).
func decodeCommand(data []byte, cmd *rooms.Command) error {
	if readCommand(data, cmd) {
		return nil
	}
	*cmd = rooms.Command{}
	return json.Unmarshal(data, cmd)
}

// readCommand reads data in encodeCommand's shape; false for anything
// else (cmd is then partly written).
func readCommand(data []byte, cmd *rooms.Command) bool {
	r := objectReader{p: data, ok: true}
	for i := range commandFields {
		f := &commandFields[i]
		switch {
		case f.name == "{":
			r.open()
		case f.name == "}":
			r.close()
		case f.str != nil:
			r.str(f.name, f.str(cmd), f.required)
		case f.int != nil:
			r.int(f.name, f.int(cmd))
		case f.small != nil:
			r.smallInt(f.name, f.small(cmd))
		case f.bool != nil:
			r.boolean(f.name, f.bool(cmd))
		default:
			r.key(f.name, f.required)
		}
		if !r.ok {
			return false
		}
	}
	cmd.Kind = knownKind(string(cmd.Kind))
	return len(r.p) == 0
}

// knownKind returns the constant of a command kind, so a decoded command
// does not hold a copy of it.
func knownKind(k string) rooms.Kind {
	switch rooms.Kind(k) {
	case rooms.KindJoinRoom:
		return rooms.KindJoinRoom
	case rooms.KindLeaveRoom:
		return rooms.KindLeaveRoom
	case rooms.KindHeartbeat:
		return rooms.KindHeartbeat
	case rooms.KindSendGift:
		return rooms.KindSendGift
	}
	return rooms.Kind(k)
}

// objectReader reads the members objectWriter writes, in its order: a
// member left out is one omitted as empty. ok turns false at the first
// byte that is not of that shape.
type objectReader struct {
	p     []byte
	ok    bool
	first bool
}

func (r *objectReader) lit(s string) bool {
	if !r.ok {
		return false
	}
	q, ok := plainjson.Skip(r.p, s)
	if ok {
		r.p = q
	}
	return ok
}

func (r *objectReader) open() {
	r.ok = r.lit("{")
	r.first = true
}

func (r *objectReader) close() {
	r.ok = r.lit("}")
	r.first = false
}

// key reads member k's name, reporting whether it is next; a required
// member that is not next ends the read.
func (r *objectReader) key(k string, required bool) bool {
	if !r.ok {
		return false
	}
	p := r.p
	if !r.first {
		if p, r.ok = plainjson.Skip(p, ","); !r.ok {
			// The object's end, or not our shape: close decides.
			r.ok = !required
			return false
		}
	}
	if len(p) < len(k)+3 || p[0] != '"' || string(p[1:1+len(k)]) != k || p[1+len(k)] != '"' || p[2+len(k)] != ':' {
		r.ok = !required
		return false
	}
	r.p, r.first = p[len(k)+3:], false
	return true
}

func (r *objectReader) str(k string, dst *string, required bool) {
	if r.key(k, required) {
		*dst, r.p, r.ok = plainjson.String(r.p)
	}
}

func (r *objectReader) int(k string, dst *int64) {
	if r.key(k, false) {
		*dst, r.p, r.ok = plainjson.Int(r.p)
	}
}

func (r *objectReader) smallInt(k string, dst *int) {
	var v int64
	r.int(k, &v)
	*dst = int(v)
}

func (r *objectReader) boolean(k string, dst *bool) {
	if r.key(k, false) {
		*dst, r.p, r.ok = plainjson.Bool(r.p)
	}
}
