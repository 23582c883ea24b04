package mysqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Error numbers of MySQL and MariaDB that callers sort on.
const (
	ErrNumDuplicateEntry = 1062
	ErrNumLockWait       = 1205
	ErrNumDeadlock       = 1213
)

// maxTxAttempts bounds how often Update and Retry run what deadlocked.
const maxTxAttempts = 5

// Update runs fn in a transaction and commits it. A deadlock (1213) or lock
// wait timeout (1205) rolls back and runs fn again, up to five times, so fn
// must be safe to repeat: it should only touch tx and values it recomputes.
// Any other error from fn rolls back and is returned as is.
//
// ctx bounds everything, retries included: every query of fn must take it
// (the driver then closes the connection of a query still running when ctx
// ends, and the server rolls its transaction back). Only the COMMIT itself
// is not interrupted (the driver takes no context for it; the DSN's read
// timeout bounds it). Every error means nothing was committed, except one
// wrapping ErrOutcomeUnknown.
func Update(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return Retry(ctx, func() error { return updateOnce(ctx, db, fn) })
}

// Retry runs fn again after a deadlock (1213) or lock wait timeout (1205),
// up to five times in all with a growing pause, as Update does for a
// transaction. It is for one statement run outside a transaction
// (autocommit), which the server rolls back whole when it deadlocks, so
// running it again is safe when the statement is. ctx bounds the retries.
func Retry(ctx context.Context, fn func() error) error {
	var err error
	for attempt := 1; attempt <= maxTxAttempts; attempt++ {
		err = fn()
		if err == nil || !IsRetryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not retried: %w: %w", ctx.Err(), err)
		case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
		}
	}
	return fmt.Errorf("retried %d times: %w", maxTxAttempts, err)
}

func updateOnce(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		if commitMayHaveHappened(err) {
			return fmt.Errorf("commit: %w: %w", ErrOutcomeUnknown, err)
		}
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// commitMayHaveHappened tells a failed COMMIT that the server may have
// carried out from one that it surely did not: an answer from the server (an
// error number) or a transaction that database/sql ended before sending
// COMMIT (its context ended first) is sure; a broken connection is not.
func commitMayHaveHappened(err error) bool {
	return ErrorNumber(err) == 0 && !errors.Is(err, sql.ErrTxDone) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// IsRetryable reports whether err is a deadlock or a lock wait timeout, after
// which the whole transaction may be run again.
func IsRetryable(err error) bool {
	n := ErrorNumber(err)
	return n == ErrNumDeadlock || n == ErrNumLockWait
}

// IsDuplicate reports whether err is a duplicate key error (1062).
func IsDuplicate(err error) bool { return ErrorNumber(err) == ErrNumDuplicateEntry }

// ErrorNumber returns the MySQL error number in err's chain, or 0.
func ErrorNumber(err error) uint16 {
	var merr *mysql.MySQLError
	if errors.As(err, &merr) {
		return merr.Number
	}
	return 0
}
