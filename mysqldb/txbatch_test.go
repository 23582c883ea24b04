package mysqldb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"voiceroom/internal/testenv"
	"voiceroom/mysqldb"
)

// TestUpdateBatch: a transaction's batch goes with its begin and commit,
// each statement's insert id comes back, and a refused statement or a
// failing prepare leaves nothing written, the prepare's own writes
// included, and the connection back in the pool outside any transaction.
func TestUpdateBatch(t *testing.T) {
	db := testenv.NewDB(t)
	db.SetMaxOpenConns(1) // every step reuses the one connection
	ctx := context.Background()
	testenv.Exec(t, db, "CREATE TABLE ua (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL)",
		"CREATE TABLE ub (id BIGINT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO ub VALUES (1, 100)")
	inTransaction := func() int { return testenv.Scalar[int](t, db, "SELECT @@in_transaction") }

	ids, err := mysqldb.UpdateBatch(ctx, db, func(_ mysqldb.Querier, b *mysqldb.Batch) error {
		b.Add("INSERT INTO ua (v) VALUES (?), (?)", 1, 2)
		b.Add("UPDATE ub SET v = v + ? WHERE id = 1", 1)
		b.Add("INSERT INTO ua (v) VALUES (?)", 3)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || ids[0] != 1 || ids[1] != 0 || ids[2] != 3 {
		t.Fatalf("insert ids %v, want [1 0 3]", ids)
	}
	if n := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM ua"); n != 3 || inTransaction() != 0 {
		t.Fatalf("%d rows, in transaction %d", n, inTransaction())
	}

	// prepare locks and writes through q; the batch's second statement is refused.
	_, err = mysqldb.UpdateBatch(ctx, db, func(q mysqldb.Querier, b *mysqldb.Batch) error {
		rows, err := q.QueryContext(ctx, "SELECT v FROM ub WHERE id = 1 FOR UPDATE")
		if err != nil {
			return err
		}
		var v int
		for rows.Next() {
			if err := rows.Scan(&v); err != nil {
				return err
			}
		}
		if err := rows.Close(); err != nil || v != 101 {
			return fmt.Errorf("locked v %d: %v", v, err)
		}
		if _, err := q.ExecContext(ctx, "UPDATE ub SET v = ? WHERE id = 1", v*2); err != nil {
			return err
		}
		b.Add("INSERT INTO ua (v) VALUES (?)", 4)
		b.Add("INSERT INTO ub VALUES (1, 0)") // duplicate key
		b.Add("INSERT INTO ua (v) VALUES (?)", 5)
		return nil
	})
	if !mysqldb.IsDuplicate(err) || errors.Is(err, mysqldb.ErrOutcomeUnknown) {
		t.Fatalf("got %v, want the duplicate key error, outcome known", err)
	}
	if n, v := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM ua"), testenv.Scalar[int](t, db, "SELECT v FROM ub WHERE id = 1"); n != 3 || v != 101 || inTransaction() != 0 {
		t.Fatalf("after a refused batch: %d rows, v %d, in transaction %d", n, v, inTransaction())
	}

	// The same refusal in a batch that began its transaction itself.
	_, err = mysqldb.UpdateBatch(ctx, db, func(_ mysqldb.Querier, b *mysqldb.Batch) error {
		b.Add("INSERT INTO ua (v) VALUES (?)", 4)
		b.Add("INSERT INTO ub VALUES (1, 0)") // duplicate key
		return nil
	})
	if !mysqldb.IsDuplicate(err) || errors.Is(err, mysqldb.ErrOutcomeUnknown) {
		t.Fatalf("got %v, want the duplicate key error, outcome known", err)
	}
	if n := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM ua"); n != 3 || inTransaction() != 0 {
		t.Fatalf("after a refused batch of its own: %d rows, in transaction %d", n, inTransaction())
	}

	boom := errors.New("boom")
	_, err = mysqldb.UpdateBatch(ctx, db, func(q mysqldb.Querier, b *mysqldb.Batch) error {
		if _, err := q.ExecContext(ctx, "INSERT INTO ua (v) VALUES (6)"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want prepare's error", err)
	}
	if n := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM ua"); n != 3 || inTransaction() != 0 {
		t.Fatalf("after a failed prepare: %d rows, in transaction %d", n, inTransaction())
	}

	// An empty batch commits what prepare wrote.
	ids, err = mysqldb.UpdateBatch(ctx, db, func(q mysqldb.Querier, b *mysqldb.Batch) error {
		_, err := q.ExecContext(ctx, "INSERT INTO ua (v) VALUES (7)")
		return err
	})
	if err != nil || len(ids) != 0 {
		t.Fatalf("empty batch: %v, %v", ids, err)
	}
	if got := testenv.Scalar[string](t, db, "SELECT GROUP_CONCAT(v ORDER BY id) FROM ua"); got != "1,2,3,7" {
		t.Fatalf("rows %s", got)
	}
}

// TestUpdateBatchEndsWithItsContext: a batch stuck on a row lock ends
// when ctx does, with its outcome unknown, and its connection is not
// given back to the pool. The outcome is truly unknown: the server does
// not see the closed connection while it runs the query, so once the
// lock is free it may run the rest of it, COMMIT included.
func TestUpdateBatchEndsWithItsContext(t *testing.T) {
	db := testenv.NewDB(t)
	ctx := context.Background()
	testenv.Exec(t, db, "CREATE TABLE uc (id BIGINT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO uc VALUES (1, 0)")
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec("UPDATE uc SET v = 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = mysqldb.UpdateBatch(short, db, func(_ mysqldb.Querier, b *mysqldb.Batch) error {
		b.Add("UPDATE uc SET v = 2 WHERE id = 1")
		return nil
	})
	if !errors.Is(err, mysqldb.ErrOutcomeUnknown) {
		t.Fatalf("got %v, want an unknown outcome", err)
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Fatalf("returned after %v, not when its context ended", waited)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if v := testenv.Scalar[int](t, db, "SELECT v FROM uc WHERE id = 1"); v != 0 && v != 2 {
		t.Fatalf("v %d: neither the holder's rollback nor the cut batch", v)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := db.Stats().InUse; n != 0 {
			return fmt.Errorf("%d connections in use", n)
		}
		return nil
	})
}
