package loadgen

import (
	"context"
	"fmt"
	"net/http"
)

// The gifts mixes: every command of a user in a room is a gift. With
// MixGiftsPK the load's rooms of each app are paired into PK battles
// first (startBattles), so every gift is a gift in a room at battle; with
// MixGifts none is. Alternated, they give a gift's cost at battle against
// one not at battle (docs/benchmarks.md).
const (
	MixGifts   = "gifts"
	MixGiftsPK = "gifts-pk"
)

// giftsOnly reports whether mix sends only gifts.
func giftsOnly(mix string) bool { return mix == MixGifts || mix == MixGiftsPK }

// startBattles pairs the load's rooms of each app two by two into PK
// battles of the longest duration: the first room's owner invites, the
// second's accepts. It returns how many battles run.
func (b *Bench) startBattles(ctx context.Context, w *world) (int, error) {
	n := 0
	for _, app := range b.cfg.Apps {
		rooms := w.byApp[app]
		for i := 0; i+1 < len(rooms); i += 2 {
			r, o := w.rooms[rooms[i]], w.rooms[rooms[i+1]]
			a := b.http.setupCall(ctx, http.MethodPost, "/api/v1/rooms/"+r.id+"/pk", "", r.hostToken,
				map[string]any{"opponent_room_id": o.id, "duration_seconds": 1800})
			var battle struct {
				BattleID string `json:"battle_id"`
			}
			if a.code == "" {
				if err := a.decode(&battle); err != nil {
					return n, fmt.Errorf("invite %s to a battle: %w", o.id, err)
				}
			}
			if a.code != "" || battle.BattleID == "" {
				return n, fmt.Errorf("invite %s to a battle: %s %s", o.id, a.code, a.message)
			}
			if a = b.http.setupCall(ctx, http.MethodPost, "/api/v1/pk/"+battle.BattleID+"/accept", "", o.hostToken, map[string]any{}); a.code != "" {
				return n, fmt.Errorf("accept battle %s: %s %s", battle.BattleID, a.code, a.message)
			}
			n++
		}
	}
	return n, nil
}
