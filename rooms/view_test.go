package rooms

import (
	"encoding/json"
	"strings"
	"testing"
	"voiceroom/roomevent"
)

// TestSnapshotListsAreNeverNull: clients iterate gift_rank, online_users and
// seats without a null check, so an empty list is [] in JSON.
func TestSnapshotListsAreNeverNull(t *testing.T) {
	tests := []struct {
		name  string
		state *State
	}{
		{"fresh room", &State{AppCode: "app", RoomID: "app_r", Status: roomevent.StatusActive}},
		{"room with users and no gifts", room()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.state.View())
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "null") {
				t.Errorf("snapshot has a null: %s", b)
			}
			for _, key := range []string{`"gift_rank":[]`, `"seats":[`, `"online_users":[`, `"admin_user_ids":[]`, `"mic_invitations":[]`, `"chat_mutes":[]`} {
				if !strings.Contains(string(b), key) {
					t.Errorf("snapshot lacks %s: %s", key, b)
				}
			}
		})
	}
}
