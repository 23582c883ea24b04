package mysqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"voiceroom/internal/testenv"
	"voiceroom/mysqldb"
)

func TestOpenCreatesDatabaseAndMigrateIsIdempotent(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MySQL")
	}
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = fmt.Sprintf("vrt_open_%d", time.Now().UnixNano())
	ctx := context.Background()
	log := testenv.Logger(t)
	db, err := mysqldb.Open(ctx, mysqldb.Config{DSN: cfg.FormatDSN()}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP DATABASE `" + cfg.DBName + "`"); err != nil {
			t.Errorf("drop test database: %v", err)
		}
		db.Close()
	})
	// Three processes starting together take turns; all succeed.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- mysqldb.Migrate(ctx, db, log)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM goose_db_version WHERE version_id > 0").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no migration recorded")
	}
	if err := mysqldb.Migrate(ctx, db, log); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if again := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM goose_db_version WHERE version_id > 0"); again != n {
		t.Fatalf("migrations recorded %d then %d", n, again)
	}
}

func TestOpenGivesUpOnUnreachableServer(t *testing.T) {
	start := time.Now()
	_, err := mysqldb.Open(context.Background(), mysqldb.Config{DSN: "root:@tcp(127.0.0.1:1)/x", ConnectTimeout: 500 * time.Millisecond}, testenv.Logger(t))
	if err == nil {
		t.Fatal("opened a server that is not there")
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("took %v to give up", time.Since(start))
	}
}

func TestParseDSNNeedsDatabase(t *testing.T) {
	if _, err := mysqldb.ParseDSN("root:@tcp(127.0.0.1:3306)/"); err == nil {
		t.Fatal("dsn without a database accepted")
	}
	if _, err := mysqldb.ParseDSN("root:@tcp(127.0.0.1:3306)/a`b"); err == nil {
		t.Fatal("database name with a backtick accepted")
	}
}

// TestUpdateRetriesDeadlock makes two transactions lock two rows in opposite
// orders; MySQL kills one with 1213 and Update runs it again.
func TestUpdateRetriesDeadlock(t *testing.T) {
	db := testenv.NewDB(t)
	ctx := context.Background()
	testenv.Exec(t, db, "CREATE TABLE dl (id INT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO dl VALUES (1, 0), (2, 0)")

	var attempts atomic.Int32
	var barrier sync.WaitGroup
	barrier.Add(2)
	var once [2]sync.Once
	run := func(i int, first, second int) error {
		return mysqldb.Update(ctx, db, func(tx *sql.Tx) error {
			attempts.Add(1)
			if _, err := tx.Exec("UPDATE dl SET v = v + 1 WHERE id = ?", first); err != nil {
				return err
			}
			once[i].Do(func() { barrier.Done(); barrier.Wait() }) // both hold their first row
			_, err := tx.Exec("UPDATE dl SET v = v + 1 WHERE id = ?", second)
			return err
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- run(0, 1, 2) }()
	go func() { errs <- run(1, 2, 1) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("update failed despite retry: %v", err)
		}
	}
	if attempts.Load() < 3 {
		t.Fatalf("%d attempts: no deadlock happened, the test proves nothing", attempts.Load())
	}
	if sum := testenv.Scalar[int](t, db, "SELECT SUM(v) FROM dl"); sum != 4 {
		t.Fatalf("sum %d, want 4: a retried transaction was applied twice or not at all", sum)
	}
}

func TestUpdateRollsBackOnError(t *testing.T) {
	db := testenv.NewDB(t)
	testenv.Exec(t, db, "CREATE TABLE rb (id INT PRIMARY KEY)")
	boom := errors.New("boom")
	err := mysqldb.Update(context.Background(), db, func(tx *sql.Tx) error {
		if _, err := tx.Exec("INSERT INTO rb VALUES (1)"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if n := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM rb"); n != 0 {
		t.Fatal("insert survived the rollback")
	}
	testenv.Exec(t, db, "INSERT INTO rb VALUES (1)")
	err = mysqldb.Update(context.Background(), db, func(tx *sql.Tx) error {
		_, err := tx.Exec("INSERT INTO rb VALUES (1)")
		return err
	})
	if !mysqldb.IsDuplicate(err) {
		t.Fatalf("IsDuplicate(%v) = false", err)
	}
}

// A transaction stuck on a row lock ends with its context, leaves no
// connection in use, and its server-side remains (the server does not see
// the client leave while it waits for a lock) give up their locks within
// the session's innodb_lock_wait_timeout.
func TestUpdateEndsWithItsContext(t *testing.T) {
	_, dsn := testenv.NewDBWithDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"innodb_lock_wait_timeout": "1"}
	db, err := mysqldb.Open(context.Background(), mysqldb.Config{DSN: cfg.FormatDSN()}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testenv.Exec(t, db, "CREATE TABLE probe (id INT PRIMARY KEY, v INT) ENGINE=InnoDB", "INSERT INTO probe VALUES (1, 0), (2, 0)")
	holder, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.Exec("SELECT v FROM probe WHERE id = 2 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	attempts := 0
	err = mysqldb.Update(ctx, db, func(tx *sql.Tx) error {
		attempts++
		if _, err := tx.ExecContext(ctx, "UPDATE probe SET v = v + 1 WHERE id = 1"); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE probe SET v = v + 1 WHERE id = 2")
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, mysqldb.ErrOutcomeUnknown) || attempts != 1 {
		t.Fatalf("update: %v after %d attempts; want the context's deadline, surely rolled back", err, attempts)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := db.Stats().InUse; n != 1 { // the holder's
			return fmt.Errorf("%d connections in use, want 1", n)
		}
		return nil
	})
	// Row 1 is free again once the abandoned transaction's lock wait ends,
	// though the holder still holds row 2.
	testenv.Eventually(t, 10*time.Second, func() error {
		_, err := db.Exec("UPDATE probe SET v = 10 WHERE id = 1")
		return err
	})
	var v int
	if err := db.QueryRow("SELECT v FROM probe WHERE id = 1").Scan(&v); err != nil || v != 10 {
		t.Fatalf("row 1: %d %v", v, err)
	}
}

func TestParseDSNBoundsLockWaits(t *testing.T) {
	for dsn, want := range map[string]string{
		"u:p@tcp(h:3306)/db":                             "5",
		"u:p@tcp(h:3306)/db?innodb_lock_wait_timeout=20": "20",
	} {
		cfg, err := mysqldb.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Params["innodb_lock_wait_timeout"]; got != want {
			t.Errorf("%s: innodb_lock_wait_timeout %q, want %q", dsn, got, want)
		}
	}
}

// A migration waits only for migrations of its own database: another
// database's lock held (another deployment or test on the same server)
// does not hold it up, while its own database's lock does.
func TestMigrateLocksOnlyItsDatabase(t *testing.T) {
	db := testenv.NewDB(t) // created and migrated
	ctx := context.Background()
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	hold := func(lock string) {
		t.Helper()
		var got int
		if err := holder.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", lock).Scan(&got); err != nil || got != 1 {
			t.Fatalf("GET_LOCK(%s) = %d, %v", lock, got, err)
		}
		t.Cleanup(func() { holder.ExecContext(context.Background(), "SELECT RELEASE_LOCK(?)", lock) })
	}
	hold(mysqldb.MigrationLock("another_" + name))
	if err := mysqldb.Migrate(ctx, db, testenv.Logger(t)); err != nil {
		t.Fatalf("with another database's migration lock held: %v", err)
	}
	// Its own lock held: a migration with a short deadline gives up waiting.
	hold(mysqldb.MigrationLock(name))
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := mysqldb.Migrate(short, db, testenv.Logger(t)); err == nil {
		t.Fatal("migrated while its own database's lock was held")
	}
}
