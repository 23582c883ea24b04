package authtoken_test

import (
	"context"
	"testing"
	"time"

	"voiceroom/authtoken"
)

// BenchmarkVerify is one full verification (no cache): the single secret
// (development's mode and the upgrade window), and an app's key named by
// kid among 1000 apps' keys.
func BenchmarkVerify(b *testing.B) {
	now := time.Now()
	keys := &testKeys{apps: map[string]map[string]testKey{}, secret: testSecret}
	for i := range 1000 {
		app := "app" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		keys.apps[app] = map[string]testKey{app + "-k1": {secret: []byte("an-app-key-0123456789-" + app)}}
	}
	keys.apps["bench"] = map[string]testKey{"bench-k1": {secret: testSecret}}
	v := authtoken.NewVerifier(keys, func() time.Time { return now })
	ctx := context.Background()
	for name, k := range map[string]authtoken.Key{"single-secret": {Secret: testSecret}, "app-key": {ID: "bench-k1", Secret: testSecret}} {
		tok, err := k.Issue("bench", 42, "", time.Hour, now)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
