package roomcluster

import (
	"voiceroom"
	"voiceroom/roomevent"
)

// Partition returns the partition of a room among n: FNV-1a of the room's
// IM GroupId (itself a function of app_code and room_id) modulo n. Hashing
// the GroupId rather than the pair lets the IM join-group callback, which
// knows only the GroupId, find the room's owner like a command does.
func Partition(appCode, roomID string, n int) int {
	return PartitionOfGroup(roomevent.IMGroupID(appCode, roomID), n)
}

// PartitionOfGroup returns the partition of the room whose IM GroupId is
// groupID.
func PartitionOfGroup(groupID string, n int) int { return int(voiceroom.Hash(groupID) % uint32(n)) }

// score is a node's rendezvous weight for partition p: the live node with
// the highest score owns p, so a node joining or leaving moves only the
// partitions it wins or held (about 1/N of them).
func score(node string, p int) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(node); i++ {
		h ^= uint64(node[i])
		h *= 1099511628211
	}
	for v := uint64(p) + 1; v > 0; v >>= 8 {
		h ^= v & 0xff
		h *= 1099511628211
	}
	// FNV's last bytes mix poorly into the high bits; finish like
	// splitmix64 so that scores of one partition compare fairly.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// desiredOwner returns the node among live that should own p ("" when
// live is empty).
func desiredOwner(live []string, p int) string {
	var best string
	var bestScore uint64
	for _, n := range live {
		if s := score(n, p); best == "" || s > bestScore || (s == bestScore && n > best) {
			best, bestScore = n, s
		}
	}
	return best
}
