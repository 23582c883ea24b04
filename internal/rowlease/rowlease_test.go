package rowlease_test

import (
	"context"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/internal/rowlease"
	"voiceroom/internal/testenv"
)

var cols = rowlease.Columns{Table: "leases", Key: "id", Owner: "owner", Until: "until_ms", Where: "state = ?"}

// TestTake: a free row is taken, its holder renews it, another process
// is refused until the lease lapses and then takes it over; the end never
// moves back (a holder whose clock is behind), and the caller's condition
// keeps rows out.
func TestTake(t *testing.T) {
	db := testenv.NewDB(t)
	testenv.Exec(t, db, `CREATE TABLE leases (id BIGINT PRIMARY KEY, owner VARCHAR(64) NOT NULL DEFAULT '',
		until_ms BIGINT NOT NULL DEFAULT 0, state VARCHAR(16) NOT NULL)`,
		`INSERT INTO leases (id, state) VALUES (1, 'open'), (2, 'closed')`)
	ctx := context.Background()
	clock := testenv.NewClock(time.UnixMilli(1_000_000))
	a := rowlease.NewHolder(cols, "a", 10*time.Second, clock.Now)
	b := rowlease.NewHolder(cols, "b", 10*time.Second, clock.Now)
	take := func(h *rowlease.Holder, id int64, want bool) {
		t.Helper()
		held, err := h.Take(ctx, db, id, "open")
		if err != nil || held != want {
			t.Fatalf("take %d: %v %v, want %v", id, held, err, want)
		}
	}
	row := func() (string, int64) {
		var owner string
		var until int64
		if err := db.QueryRow(`SELECT owner, until_ms FROM leases WHERE id = 1`).Scan(&owner, &until); err != nil {
			t.Fatal(err)
		}
		return owner, until
	}

	take(a, 1, true)
	if o, u := row(); o != "a" || u != 1_010_000 || !a.Holds(o, u) || b.Holds(o, u) {
		t.Fatalf("after a's take: %q until %d", o, u)
	}
	take(b, 1, false)
	take(a, 2, false) // the condition leaves it out
	// A renewal in the same millisecond still changes the row (end + 1),
	// so it counts as held.
	take(a, 1, true)
	if _, u := row(); u != 1_010_001 {
		t.Fatalf("renewed until %d, want 1010001", u)
	}
	clock.Advance(11 * time.Second)
	if o, u := row(); a.Holds(o, u) {
		t.Fatal("a lapsed lease still held")
	}
	take(b, 1, true)
	if o, u := row(); o != "b" || u != 1_021_000 {
		t.Fatalf("after b's takeover: %q until %d", o, u)
	}
	// b's clock behind: its renewal does not move the end back.
	behind := rowlease.NewHolder(cols, "b", 10*time.Second, func() time.Time { return clock.Now().Add(-5 * time.Second) })
	if held, err := behind.Take(ctx, db, int64(1), "open"); err != nil || !held {
		t.Fatalf("renew with a clock behind: %v %v", held, err)
	}
	if _, u := row(); u != 1_021_001 {
		t.Fatalf("until %d after a renewal by a clock behind, want 1021001", u)
	}
}

func TestCheckConfig(t *testing.T) {
	for _, tc := range []struct {
		owner       string
		lease, tick time.Duration
		field       string
	}{
		{"p1", 30 * time.Second, 5 * time.Second, ""},
		{"", 30 * time.Second, 5 * time.Second, "Owner"},
		{string(make([]byte, 65)), 30 * time.Second, 5 * time.Second, "Owner"},
		{"p1", 500 * time.Millisecond, 100 * time.Millisecond, "Lease"},
		{"p1", 2 * time.Hour, time.Second, "Lease"},
		{"p1", 30 * time.Second, 0, "Tick"},
		{"p1", 30 * time.Second, 16 * time.Second, "Tick"},
	} {
		err := rowlease.CheckConfig("w", tc.owner, tc.lease, tc.tick)
		if got := apperr.ConfigFieldOf(err); got != tc.field || (tc.field == "") != (err == nil) {
			t.Errorf("%q %v %v: %v (field %q), want field %q", tc.owner, tc.lease, tc.tick, err, got, tc.field)
		}
	}
}
