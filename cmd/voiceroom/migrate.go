package main

import (
	"context"

	"voiceroom/mysqldb"
)

// migrate applies pending migrations and exits.
func migrate(ctx context.Context) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	log := newLogger(cfg)
	db, err := mysqldb.Open(ctx, mysqldb.Config{DSN: cfg.MySQLDSN, MaxOpenConns: 4, ConnectTimeout: cfg.MySQLConnectWait}, log)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := mysqldb.Migrate(ctx, db, log); err != nil {
		return err
	}
	log.Info("migrations up to date")
	return nil
}
