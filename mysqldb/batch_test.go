package mysqldb_test

import (
	"context"
	"database/sql"
	"testing"

	"voiceroom/internal/testenv"
	"voiceroom/mysqldb"
)

// TestBatchRunsInOrderAndStopsAtTheFirstError sends statements in one
// query: they run in order (a later one sees an earlier one's rows), the
// result is the last statement's, and a failing statement stops the rest
// with its own error, leaving the transaction to roll back.
func TestBatchRunsInOrderAndStopsAtTheFirstError(t *testing.T) {
	db := testenv.NewDB(t)
	ctx := context.Background()
	testenv.Exec(t, db, "CREATE TABLE ba (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL)",
		"CREATE TABLE bb (id BIGINT PRIMARY KEY, n INT NOT NULL)")

	var rows mysqldb.Rows
	for v := range 3 {
		rows.Add("(?)", v)
	}
	var b mysqldb.Batch
	b.AddRows("INSERT INTO ba (v) VALUES ", &rows, "")
	b.AddRows("INSERT INTO ba (v) VALUES ", &mysqldb.Rows{}, "") // no tuple: no statement
	b.Add("INSERT INTO bb (id, n) SELECT LAST_INSERT_ID(), COUNT(*) FROM ba WHERE v < ?", 2)
	if b.Len() != 2 {
		t.Fatalf("%d statements, want 2", b.Len())
	}
	var res sql.Result
	err := mysqldb.Update(ctx, db, func(tx *sql.Tx) error {
		var err error
		res, err = b.Exec(ctx, tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Errorf("rows affected %d, want the last statement's 1", n)
	}
	if got := testenv.Scalar[int](t, db, "SELECT n FROM bb WHERE id = (SELECT MIN(id) FROM ba)"); got != 2 {
		t.Errorf("second statement counted %d rows, want 2: it did not see the first's", got)
	}

	var failing mysqldb.Batch
	failing.Add("INSERT INTO ba (v) VALUES (?)", 10)
	failing.Add("INSERT INTO bb (id, n) VALUES ((SELECT MIN(id) FROM ba), 0)") // duplicate
	failing.Add("INSERT INTO ba (v) VALUES (?)", 11)
	err = mysqldb.Update(ctx, db, func(tx *sql.Tx) error {
		_, err := failing.Exec(ctx, tx)
		return err
	})
	if !mysqldb.IsDuplicate(err) {
		t.Fatalf("got %v, want the second statement's duplicate key error", err)
	}
	if n := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM ba WHERE v >= 10"); n != 0 {
		t.Fatalf("%d rows of the failed batch stayed", n)
	}

	var empty mysqldb.Batch
	if res, err := empty.Exec(ctx, db); res != nil || err != nil {
		t.Fatalf("empty batch: %v, %v", res, err)
	}
}

// TestRowsExec runs one multi-row statement, head, tuples and tail; no
// tuple sends nothing.
func TestRowsExec(t *testing.T) {
	db := testenv.NewDB(t)
	ctx := context.Background()
	testenv.Exec(t, db, "CREATE TABLE rx (id BIGINT PRIMARY KEY, n INT NOT NULL)")
	if res, err := (&mysqldb.Rows{}).Exec(ctx, db, "INSERT INTO rx (id, n) VALUES ", ""); res != nil || err != nil {
		t.Fatalf("no tuple: %v %v, want nothing sent", res, err)
	}
	for range 2 {
		var rows mysqldb.Rows
		for id := range 3 {
			rows.Add("(?, 1)", id)
		}
		if _, err := rows.Exec(ctx, db, "INSERT INTO rx (id, n) VALUES ", " ON DUPLICATE KEY UPDATE n = n + VALUES(n)"); err != nil {
			t.Fatal(err)
		}
	}
	if got := testenv.Scalar[int](t, db, "SELECT SUM(n) FROM rx"); got != 6 {
		t.Errorf("sum %d, want 6: three rows, each written twice", got)
	}
}

func TestPlaceholders(t *testing.T) {
	for n, want := range map[int]string{-1: "", 0: "", 1: "?", 3: "?,?,?"} {
		if got := mysqldb.Placeholders(n); got != want {
			t.Errorf("Placeholders(%d) = %q, want %q", n, got, want)
		}
	}
}
