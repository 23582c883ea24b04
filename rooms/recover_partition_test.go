package rooms

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/pressly/goose/v3"

	"voiceroom/deploy/migrations"
	"voiceroom/internal/testenv"
)

// TestRecoverListsPartitionsFromTheIndex: a takeover lists the rooms with
// users of its partitions from the rooms rows' group_hash, and finds every
// one of them: rooms the code created, rooms created before migration
// 00021 (filled by it with the code's hash, including ids that are not IM
// GroupIds), and a row an older release writes during an upgrade
// (group_hash 0), while rooms without users are not listed.
func TestRecoverListsPartitionsFromTheIndex(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	withUsers := map[[2]string]bool{}
	for i := range 24 {
		v := e.create(t, "app", int64(100+i))
		e.mustDo(t, "app", v.RoomID, KindJoinRoom, int64(500+i), Args{})
		withUsers[[2]string{"app", v.RoomID}] = true
	}
	e.create(t, "app", 99) // no user: never listed

	// Rooms created before the migration: the schema of 00020, rows in it,
	// then 00021 again.
	provider, err := goose.NewProvider(goose.DialectMySQL, e.db, migrations.FS, goose.WithDisableGlobalRegistry(true), goose.WithAllowOutofOrder(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.DownTo(ctx, 20); err != nil {
		t.Fatal(err)
	}
	old := [][2]string{{"app", "app_before_1"}, {"app", "has.dot"}, {"app", "vr-looks-hashed"}, {"other", "x"},
		{"app", "a_very_long_room_id_that_is_more_than_48_bytes_long_0123456789"}}
	for i, k := range old {
		if _, err := e.db.ExecContext(ctx, `INSERT INTO rooms (app_code, room_id, room_short_id, owner_user_id, status, visible_region_id,
			mode, room_version, online_count, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, 'active', 1, 'voice', 1, 2, 1, 1)`,
			k[0], k[1], fmt.Sprint("old", i), 900+i); err != nil {
			t.Fatal(err)
		}
		withUsers[k] = true
	}
	if _, err := provider.Up(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := e.db.QueryContext(ctx, `SELECT app_code, room_id, group_hash FROM rooms`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k [2]string
		var h uint32
		if err := rows.Scan(&k[0], &k[1], &h); err != nil {
			t.Fatal(err)
		}
		if want := groupHash(k[0], k[1]); h != want {
			t.Errorf("room %v: group_hash %d, want the code's %d", k, h, want)
		}
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	// A row of an older release, written after the migration.
	testenv.Exec(t, e.db, `INSERT INTO rooms (app_code, room_id, room_short_id, owner_user_id, status, visible_region_id,
		mode, room_version, online_count, created_at_ms, updated_at_ms) VALUES ('app', 'late_1', 'late', 999, 'active', 1, 'voice', 1, 1, 1, 1)`)
	withUsers[[2]string{"app", "late_1"}] = true

	const n = 8
	for p := range n {
		want := map[[2]string]bool{}
		for k := range withUsers {
			if int(groupHash(k[0], k[1])%n) == p {
				want[k] = true
			}
		}
		listed, err := e.svc.store.roomsOfPartitions(ctx, n, []int{p}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		got := map[[2]string]bool{}
		for _, k := range listed {
			if int(groupHash(k[0], k[1])%n) == p { // Recover's match
				got[k] = true
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("partition %d of %d: listed %v, want %v", p, n, slices.Collect(maps.Keys(got)), slices.Collect(maps.Keys(want)))
		}
	}
	var plan struct{ key string }
	row := e.db.QueryRowContext(ctx, `EXPLAIN SELECT app_code, room_id FROM rooms WHERE status = 'active' AND online_count > 0
		AND (group_hash = 0 OR group_hash % 8 IN (1, 2)) LIMIT 1000`)
	cols := make([]any, 10)
	vals := make([]*string, 10)
	for i := range cols {
		cols[i] = &vals[i]
	}
	if err := row.Scan(cols...); err != nil {
		t.Fatal(err)
	}
	if vals[5] != nil {
		plan.key = *vals[5]
	}
	if plan.key != "idx_rooms_recover" {
		t.Errorf("the takeover's list uses key %q, want idx_rooms_recover", plan.key)
	}
}
