// Package mysqldb opens voiceroom's MySQL (or MariaDB) pool, creating the
// database when it is missing, applies the embedded migrations of
// deploy/migrations, and runs write transactions through a closure that is
// retried on deadlock.
//
// Every query takes the caller's context, and Update's retries end with it.
// When a context ends mid-query the driver closes the connection (the pool
// replaces it) and the server rolls the transaction back once it notices;
// the session's innodb_lock_wait_timeout (5s unless the DSN sets one)
// bounds how long an abandoned transaction can still wait for, and hold,
// row locks. An error from Update means nothing was committed, unless it
// wraps ErrOutcomeUnknown (the COMMIT went unanswered).
//
// A Batch sends several statements in one query, so a transaction pays
// one round trip for all of them rather than one each; UpdateBatch sends
// a transaction's batch together with its begin and commit, which makes
// a group commit one round trip. Its outcome is unknown when ctx ends
// while that query is out, since the COMMIT travels with it.
//
// MySQL is the source of truth: every other store is derived from it.
package mysqldb
