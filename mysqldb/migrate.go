package mysqldb

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pressly/goose/v3"

	"voiceroom/deploy/migrations"
)

// migrationLock names the MySQL named lock that serialises the migrations
// of processes starting at the same time against one database. Named locks
// are server-wide, so the name carries the database's: deployments (and
// tests) on other databases of the same server do not wait for each other.
// MySQL refuses names over 64 characters; a longer one is hashed.
func migrationLock(database string) string {
	name := "voiceroom_migrate:" + database
	if len(name) > 64 {
		sum := sha256.Sum256([]byte(database))
		name = "voiceroom_migrate:" + hex.EncodeToString(sum[:16])
	}
	return name
}

// Migrate applies the pending embedded migrations in order and records each
// one in goose_db_version. Processes that start together take turns through a
// named lock; the wait for it is bounded by ctx and 25 seconds (below the read timeout).
func Migrate(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	var database sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&database); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	lock := migrationLock(database.String)
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 25)", lock).Scan(&got); err != nil {
		return fmt.Errorf("migrate: take lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return errors.New("migrate: another process held the migration lock for 25s")
	}
	defer func() {
		// A fresh context: the lock must be released even when ctx ended.
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.ExecContext(rctx, "SELECT RELEASE_LOCK(?)", lock)
	}()

	provider, err := goose.NewProvider(goose.DialectMySQL, db, migrations.FS,
		goose.WithDisableGlobalRegistry(true),
		// Branches land in any order: a migration numbered below the newest
		// applied one is applied too, not refused.
		goose.WithAllowOutofOrder(true))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		log.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	return nil
}
