package mysqldb_test

import (
	"cmp"
	"context"
	"slices"
	"testing"

	"voiceroom/internal/testenv"
	"voiceroom/mysqldb"
)

// TestInsertFresh: keys given out of order and twice, some of them
// written before (a redelivery), in chunks of more than one row: each
// distinct key's row is there once, exactly the keys written before are
// reported not fresh, and the caller's slice is left as it was.
func TestInsertFresh(t *testing.T) {
	db := testenv.NewDB(t)
	ctx := context.Background()
	testenv.Exec(t, db, "CREATE TABLE seen (a BIGINT NOT NULL, e VARCHAR(16) NOT NULL, PRIMARY KEY (a, e))")
	testenv.Exec(t, db, "INSERT INTO seen (a, e) VALUES (1, 'x'), (2, 'y')")
	type key struct {
		a int64
		e string
	}
	keys := []key{{2, "z"}, {1, "x"}, {2, "y"}, {1, "w"}, {2, "z"}, {1, "x"}, {3, "a"}}
	given := slices.Clone(keys)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	fresh, err := mysqldb.InsertFresh(ctx, tx, "seen", "a, e", "(?, ?)", keys,
		func(x, y key) int { return cmp.Or(cmp.Compare(x.a, y.a), cmp.Compare(x.e, y.e)) },
		func(k key) []any { return []any{k.a, k.e} })
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	want := map[key]bool{{1, "w"}: true, {1, "x"}: false, {2, "y"}: false, {2, "z"}: true, {3, "a"}: true}
	if len(fresh) != len(want) {
		t.Errorf("%d keys reported, want the %d distinct ones: %v", len(fresh), len(want), fresh)
	}
	for k, w := range want {
		if got, ok := fresh[k]; !ok || got != w {
			t.Errorf("key %v: fresh %v (reported %v), want %v", k, got, ok, w)
		}
	}
	if n := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM seen"); n != 5 {
		t.Errorf("%d rows, want 5", n)
	}
	if !slices.Equal(keys, given) {
		t.Errorf("the caller's keys changed: %v, was %v", keys, given)
	}
}
