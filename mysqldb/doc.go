// Package mysqldb opens voiceroom's MySQL (or MariaDB) pool, creating the
// database when it is missing, applies the embedded migrations of
// deploy/migrations, and runs write transactions through a closure that is
// retried on deadlock.
//
// MySQL is the source of truth: every other store is derived from it.
package mysqldb
