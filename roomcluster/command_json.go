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
	b := make([]byte, 0, 160+len(cmd.AppCode)+len(cmd.RoomID)+len(cmd.CommandID)+len(cmd.RequestID)+len(a.Title)+len(a.Description)+len(a.CoverURL))
	w := objectWriter{b: b}
	w.open()
	w.str("kind", string(cmd.Kind), true)
	w.str("app", cmd.AppCode, true)
	w.str("room", cmd.RoomID, false)
	w.str("cid", cmd.CommandID, false)
	w.boolean("ck", cmd.ClientKey)
	w.str("rid", cmd.RequestID, false)
	w.key("actor")
	w.open()
	w.int("user_id", cmd.Actor.UserID)
	w.boolean("admin", cmd.Actor.Admin)
	w.str("operator", cmd.Actor.Operator, false)
	w.close()
	w.int("now_ms", cmd.NowMs)
	w.key("args")
	w.open()
	w.str("title", a.Title, false)
	w.str("cover_url", a.CoverURL, false)
	w.str("description", a.Description, false)
	w.str("mode", a.Mode, false)
	w.int("seat_count", int64(a.SeatCount))
	w.str("room_short_id", a.ShortID, false)
	w.int("region_id", a.RegionID)
	w.int("seat_index", int64(a.SeatIndex))
	w.boolean("locked", a.Locked)
	w.boolean("muted", a.Muted)
	w.str("seat_mode", a.SeatMode, false)
	w.int("expires_at_ms", a.ExpiresAtMs)
	w.int("mute_seconds", a.MuteSeconds)
	w.int("target_user_id", a.TargetUserID)
	w.int("ban_seconds", a.BanSeconds)
	w.int("gift_id", a.GiftID)
	w.str("gift_name", a.GiftName, false)
	w.int("count", a.Count)
	w.int("price", a.Price)
	w.int("heat_per", a.HeatPer)
	w.str("password_hash", a.PasswordHash, false)
	w.boolean("password_given", a.PasswordGiven)
	w.str("reason", a.Reason, false)
	w.close()
	w.str("pw", cmd.Password, false)
	w.boolean("nv", cmd.NoView)
	w.close()
	return w.b, nil
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
	a := &cmd.Args
	var kind string
	r.open()
	r.str("kind", &kind, true)
	cmd.Kind = knownKind(kind)
	r.str("app", &cmd.AppCode, true)
	r.str("room", &cmd.RoomID, false)
	r.str("cid", &cmd.CommandID, false)
	r.boolean("ck", &cmd.ClientKey)
	r.str("rid", &cmd.RequestID, false)
	r.key("actor", true)
	r.open()
	r.int("user_id", &cmd.Actor.UserID)
	r.boolean("admin", &cmd.Actor.Admin)
	r.str("operator", &cmd.Actor.Operator, false)
	r.close()
	r.int("now_ms", &cmd.NowMs)
	r.key("args", true)
	r.open()
	r.str("title", &a.Title, false)
	r.str("cover_url", &a.CoverURL, false)
	r.str("description", &a.Description, false)
	r.str("mode", &a.Mode, false)
	r.smallInt("seat_count", &a.SeatCount)
	r.str("room_short_id", &a.ShortID, false)
	r.int("region_id", &a.RegionID)
	r.smallInt("seat_index", &a.SeatIndex)
	r.boolean("locked", &a.Locked)
	r.boolean("muted", &a.Muted)
	r.str("seat_mode", &a.SeatMode, false)
	r.int("expires_at_ms", &a.ExpiresAtMs)
	r.int("mute_seconds", &a.MuteSeconds)
	r.int("target_user_id", &a.TargetUserID)
	r.int("ban_seconds", &a.BanSeconds)
	r.int("gift_id", &a.GiftID)
	r.str("gift_name", &a.GiftName, false)
	r.int("count", &a.Count)
	r.int("price", &a.Price)
	r.int("heat_per", &a.HeatPer)
	r.str("password_hash", &a.PasswordHash, false)
	r.boolean("password_given", &a.PasswordGiven)
	r.str("reason", &a.Reason, false)
	r.close()
	r.str("pw", &cmd.Password, false)
	r.boolean("nv", &cmd.NoView)
	r.close()
	return r.ok && len(r.p) == 0
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
