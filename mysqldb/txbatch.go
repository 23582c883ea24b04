package mysqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Execer runs a statement: a *sql.Tx, *sql.Conn, *sql.DB or Querier.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Querier runs statements in a transaction: a *sql.Tx, or the one
// UpdateBatch hands its prepare.
type Querier interface {
	Execer
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// UpdateBatch runs one transaction that ends in a Batch, in as few round
// trips as it can. prepare fills b; it may read or write through q
// first (to lock rows, say), which begins the transaction with its own
// round trip. Then b goes in one query between START TRANSACTION (unless
// prepare began it) and COMMIT, so that a transaction whose prepare only
// builds b costs one round trip where Update costs one per statement
// plus two.
//
// It returns the insert id each of b's statements reported (0 for those
// that made none), in b's order. Deadlocks and lock wait timeouts roll
// back and run prepare again, with an empty b, as Update does; any other
// error from prepare or from b rolls back and is returned. Every error
// means nothing was committed, except one wrapping ErrOutcomeUnknown: the
// query that held COMMIT got no answer.
//
// ctx bounds everything, the retries included, as in Update. Unlike
// Update's COMMIT, the query that holds the COMMIT is interrupted when
// ctx ends: its statements may wait on row locks, and a write stuck past
// its commands' deadlines must end with them. Its outcome is then
// unknown (ErrOutcomeUnknown): the server notices the closed connection
// only once the query ends, so it may still run the COMMIT, after a lock
// it waited for is released.
func UpdateBatch(ctx context.Context, db *sql.DB, prepare func(q Querier, b *Batch) error) (insertIDs []int64, err error) {
	err = Retry(ctx, func() error {
		var err error
		insertIDs, err = updateBatchOnce(ctx, db, prepare)
		return err
	})
	return insertIDs, err
}

func updateBatchOnce(ctx context.Context, db *sql.DB, prepare func(q Querier, b *Batch) error) ([]int64, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer conn.Close()
	q := &lazyTx{conn: conn}
	var b Batch
	if err := prepare(q, &b); err != nil {
		q.rollback()
		return nil, err
	}
	head := "START TRANSACTION;\n"
	if q.begun {
		head = ""
	}
	var tail string
	if b.n > 0 {
		tail = ";\n"
	}
	tail += "COMMIT"
	if err := ctx.Err(); err != nil {
		q.rollback()
		return nil, err // nothing sent
	}
	ids, err := execAll(ctx, conn, head+b.sql.String()+tail, b.args)
	switch {
	case err == nil:
		if head != "" {
			ids = ids[1:]
		}
		if len(ids) < b.n {
			return nil, fmt.Errorf("commit: %w: %d results for %d statements", ErrOutcomeUnknown, len(ids), b.n)
		}
		return ids[:b.n], nil
	case ErrorNumber(err) != 0:
		// The server refused a statement and ran none after it: the
		// COMMIT did not run, and the batch's own START TRANSACTION (or
		// prepare's) left a transaction open.
		q.abort()
		return nil, err
	default:
		q.discard()
		return nil, fmt.Errorf("commit: %w: %w", ErrOutcomeUnknown, err)
	}
}

// lazyTx is UpdateBatch's Querier: its first statement begins the
// transaction.
type lazyTx struct {
	conn  *sql.Conn
	begun bool
}

func (t *lazyTx) begin(ctx context.Context) error {
	if t.begun {
		return nil
	}
	if _, err := t.conn.ExecContext(ctx, "START TRANSACTION"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	t.begun = true
	return nil
}

func (t *lazyTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.conn.ExecContext(ctx, query, args...)
}

func (t *lazyTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.conn.QueryContext(ctx, query, args...)
}

// rollbackTimeout bounds the ROLLBACK after a failed transaction.
const rollbackTimeout = 5 * time.Second

// rollback ends the transaction prepare's statements began, if any.
func (t *lazyTx) rollback() {
	if t.begun {
		t.abort()
	}
}

// abort rolls back whatever transaction the connection holds; a
// connection that cannot roll back is not given back to the pool.
func (t *lazyTx) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
	defer cancel()
	if _, err := t.conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.discard()
	}
}

// discard closes the connection instead of giving it back to the pool.
func (t *lazyTx) discard() {
	t.conn.Raw(func(any) error { return driver.ErrBadConn })
}

// execAll runs query, which may hold several statements, and returns the
// insert id of each. database/sql's Result keeps only the last
// statement's, so this goes to the driver's connection.
func execAll(ctx context.Context, conn *sql.Conn, query string, args []any) (ids []int64, err error) {
	err = conn.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		check, ok2 := dc.(driver.NamedValueChecker)
		if !ok || !ok2 {
			return errors.New("not a mysql driver connection")
		}
		nvs := make([]driver.NamedValue, len(args))
		for i, a := range args {
			nvs[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
			if err := check.CheckNamedValue(&nvs[i]); err != nil {
				return fmt.Errorf("argument %d: %w", i+1, err)
			}
		}
		res, err := ex.ExecContext(ctx, query, nvs)
		if err != nil {
			return err
		}
		ids = res.(mysql.Result).AllLastInsertIds()
		return nil
	})
	return ids, err
}
