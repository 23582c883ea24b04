package voiceroom

// RoomKey identifies a room across apps. It is the unit of ordering: the
// events of one room are committed, published and consumed in room_version
// order, while different rooms never wait for each other. Every place that
// keeps per-room order (the room cells, the outbox fast path and relay, the
// consume loop) keys it by RoomKey.
type RoomKey struct {
	AppCode string
	RoomID  string
}

// String returns "<app_code>.<room_id>", the form used where the key must be
// a string (hashing onto handler queues). Neither part holds a '.', so it is
// unambiguous.
func (k RoomKey) String() string { return k.AppCode + "." + k.RoomID }

// Hash is Hash(k.String()), without building the string.
func (k RoomKey) Hash() uint32 {
	return hashMore(hashMore(hashMore(fnvOffset, k.AppCode), "."), k.RoomID)
}

// RoomIDMax is the longest room_id, the size of the room_id columns
// (VARCHAR(96)). A room id is "<app_code>_<uuid>", at most
// AppCodeMax + 1 + 36 = 69 bytes; the rest is headroom.
const RoomIDMax = 96

// Hash is FNV-1a (32 bits) of s, without allocating: what spreads rooms
// over the consume loop's workers and over the rooms nodes' partitions.
// Both depend on its values staying as they are.
func Hash(s string) uint32 { return hashMore(fnvOffset, s) }

const fnvOffset = uint32(2166136261)

// hashMore goes on hashing s after h.
func hashMore(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}
