package regions

import (
	"context"
	"database/sql"
	"fmt"
)

// stmtCache holds the prepared statements of the hot paths (hotStatements: a
// lookup miss, a profile write) for the life of the Service. Without it every
// parameterised statement is a prepare, an execute and a close: MySQL parses
// it each time and the round trips double, which at 1,000+ profile writes a
// second is most of the database's CPU. database/sql prepares each statement
// once per pooled connection, on first use there, and reuses it after.
//
// The statements are prepared when the Service is built, never inside a
// transaction: preparing on the pool needs a second connection, and
// transactions holding every connection while each waits for one more would
// wait for ever. Inside a transaction a statement is re-prepared on the
// transaction's own connection when that one has not seen it yet.
//
// The map is written only by newStmtCache, so reads need no lock.
type stmtCache struct {
	db *sql.DB
	m  map[string]*sql.Stmt
}

func newStmtCache(ctx context.Context, db *sql.DB, queries []string) (*stmtCache, error) {
	c := &stmtCache{db: db, m: make(map[string]*sql.Stmt, len(queries))}
	for _, q := range queries {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("prepare statements: %w", err)
		}
		c.m[q] = st
	}
	return c, nil
}

// close releases every statement.
func (c *stmtCache) close() {
	for _, st := range c.m {
		st.Close()
	}
}

// on returns a querier that runs the prepared statements inside tx, or on the
// pool when tx is nil, and any other statement as a plain query.
func (c *stmtCache) on(tx *sql.Tx) querier { return preparedQuerier{c: c, tx: tx} }

type preparedQuerier struct {
	c  *stmtCache
	tx *sql.Tx
}

var _ querier = preparedQuerier{}

func (q preparedQuerier) plain() querier {
	if q.tx != nil {
		return q.tx
	}
	return q.c.db
}

// stmt returns the prepared statement of query, bound to the transaction, or
// nil when query is not one of them.
func (q preparedQuerier) stmt(ctx context.Context, query string) *sql.Stmt {
	st := q.c.m[query]
	if st == nil || q.tx == nil {
		return st
	}
	// Closed when the transaction ends; the connection keeps the prepared
	// statement for the next transaction that runs on it.
	return q.tx.StmtContext(ctx, st)
}

func (q preparedQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.plain().QueryContext(ctx, query, args...)
}

func (q preparedQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.plain().QueryRowContext(ctx, query, args...)
}

func (q preparedQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := q.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.plain().ExecContext(ctx, query, args...)
}
