// Package migrations holds voiceroom's numbered SQL migrations, embedded in
// the binary. mysqldb.Migrate applies them in order and records each one.
//
// Rules for a new migration: the next free number, a `-- +goose Up` section,
// and `app_code` as the first column of every key that serves a query made on
// behalf of an app. Never edit a migration that has landed; add a new one.
package migrations

import "embed"

// FS holds the *.sql files of this directory.
//
//go:embed *.sql
var FS embed.FS
