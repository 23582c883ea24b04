package imbridge

import "testing"

// TestMuteTimeOf: the seconds left, rounded up, 0 for a lift or a mute
// already over, at most Tencent's 0xFFFFFFFF.
func TestMuteTimeOf(t *testing.T) {
	const now = 1_800_000_000_000
	for _, tc := range []struct {
		name    string
		untilMs int64
		want    int64
	}{
		{"lifted", 0, 0},
		{"over", now - 1, 0},
		{"ends now", now, 0},
		{"a millisecond left", now + 1, 1},
		{"a second left", now + 1000, 1},
		{"a second and a millisecond left", now + 1001, 2},
		{"90.5 s left", now + 90_500, 91},
		{"beyond for ever", now + (MaxMuteTime+10)*1000, MaxMuteTime},
	} {
		if got := muteTimeOf(tc.untilMs, now); got != tc.want {
			t.Errorf("%s: muteTimeOf(%d, %d) = %d, want %d", tc.name, tc.untilMs, now, got, tc.want)
		}
	}
}
