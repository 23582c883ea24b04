package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"voiceroom/mysqldb"
)

// migrate applies pending migrations and exits.
func migrate(ctx context.Context) error {
	_, log, db, err := oneShot(ctx)
	if err != nil {
		return err
	}
	db.Close()
	log.Info("migrations up to date")
	return nil
}

// oneShot is the start of a one-shot command: the configuration, its
// logger, and a small migrated pool (openMigrated) the caller closes.
func oneShot(ctx context.Context) (config, *slog.Logger, *sql.DB, error) {
	cfg, err := loadConfig()
	if err != nil {
		return cfg, nil, nil, err
	}
	log := newLogger(cfg)
	db, err := openMigrated(ctx, cfg, log)
	return cfg, log, db, err
}

// openMigrated opens a small pool for a one-shot command and applies the
// pending migrations.
func openMigrated(ctx context.Context, cfg config, log *slog.Logger) (*sql.DB, error) {
	mcfg := cfg.mysql()
	mcfg.MaxOpenConns = 4 // one-shot: a small pool
	db, err := mysqldb.Open(ctx, mcfg, log)
	if err != nil {
		return nil, fmt.Errorf("VOICEROOM_MYSQL_DSN: %w", err)
	}
	if err := mysqldb.Migrate(ctx, db, log); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}
