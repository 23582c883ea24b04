package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"voiceroom/mysqldb"
)

// MySQLDSN returns the server DSN tests use, without a database name.
func MySQLDSN() string {
	if dsn := os.Getenv("VOICEROOM_TEST_MYSQL_DSN"); dsn != "" {
		return dsn
	}
	return "root:@tcp(127.0.0.1:3306)/"
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

// NewDB creates a database of its own for the test, applies the migrations and
// returns a pool on it. The database is dropped when the test ends. The test is
// skipped under -short and fails if MySQL cannot be reached.
func NewDB(tb testing.TB) *sql.DB {
	db, _ := NewDBWithDSN(tb)
	return db
}

// NewDBWithDSN is NewDB that also returns the DSN of the new database, for
// code under test that opens its own pool.
func NewDBWithDSN(tb testing.TB) (*sql.DB, string) {
	tb.Helper()
	return newDBOn(tb, MySQLDSN(), "VOICEROOM_TEST_MYSQL_DSN")
}

// newDBOn is NewDBWithDSN on the server of serverDSN, which the variable
// named envVar sets.
func newDBOn(tb testing.TB, serverDSN, envVar string) (*sql.DB, string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs MySQL; skipped with -short")
	}
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		tb.Fatalf("%s: %v", envVar, err)
	}
	cfg.DBName = dbName(tb.Name())
	dsn := cfg.FormatDSN()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := mysqldb.Open(ctx, mysqldb.Config{DSN: dsn, ConnectTimeout: 10 * time.Second}, log)
	if err != nil {
		tb.Fatalf("open test database: %v (is MySQL running? deploy/services.sh starts it)", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+cfg.DBName+"`"); err != nil {
			tb.Errorf("drop test database %s: %v", cfg.DBName, err)
		}
		db.Close()
	})
	if err := mysqldb.Migrate(ctx, db, log); err != nil {
		tb.Fatalf("migrate test database: %v", err)
	}
	return db, dsn
}

// dbName makes a unique, legal database name from a test name.
func dbName(testName string) string {
	name := unsafeName.ReplaceAllString(strings.ToLower(testName), "_")
	if len(name) > 36 {
		name = name[:36]
	}
	return "vrt_" + strings.Trim(name, "_") + "_" + randomHex(6)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Scalar returns the one value of a one-row, one-column query (a COUNT(*),
// a SUM, a column of one row), failing the test if the query fails or
// finds no row: a read whose error were dropped would leave the zero value,
// which an assertion could take for the answer.
func Scalar[T any](tb testing.TB, db *sql.DB, query string, args ...any) T {
	tb.Helper()
	var v T
	if err := db.QueryRow(query, args...).Scan(&v); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return v
}

// Exec runs statements on db in order, failing the test at the first
// that fails: a test's tables and rows.
func Exec(tb testing.TB, db *sql.DB, statements ...string) {
	tb.Helper()
	for _, q := range statements {
		if _, err := db.Exec(q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}
