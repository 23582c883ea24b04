package mysqldb

import (
	"context"
	"database/sql"
	"strings"
)

// A Batch is statements sent to MySQL in one round trip: one query of
// several statements, which the pools ParseDSN configures allow
// (multiStatements). The server runs them in order and stops at the
// first that fails; Exec then returns that statement's error, and the
// statements after it did not run. In a transaction the ones before it
// stay done until the rollback, as with separate statements.
//
// A group commit used to pay a round trip (a write and a read on each
// side, a wake of the server's thread) per statement; a Batch pays one
// for all of them. Parameters are interpolated on the client, as for
// every statement of these pools, so a Batch holds no statement text
// from outside.
type Batch struct {
	sql  strings.Builder
	args []any
	n    int
}

// Add appends one statement and its arguments. query must be a single
// statement without a trailing semicolon.
func (b *Batch) Add(query string, args ...any) {
	b.begin()
	b.sql.WriteString(query)
	b.args = append(b.args, args...)
}

// AddRows appends one multi-row statement: head, the n tuples of rows,
// then tail. It adds nothing when rows holds no tuple.
func (b *Batch) AddRows(head string, rows *Rows, tail string) {
	if rows.n == 0 {
		return
	}
	b.begin()
	b.sql.WriteString(head)
	b.sql.WriteString(rows.sql.String())
	b.sql.WriteString(tail)
	b.args = append(b.args, rows.args...)
}

func (b *Batch) begin() {
	if b.n > 0 {
		b.sql.WriteString(";\n")
	}
	b.n++
}

// Len is the number of statements in b.
func (b *Batch) Len() int { return b.n }

// Exec sends b's statements in one query on ex (a *sql.Tx, *sql.Conn or
// *sql.DB of these pools). The result's RowsAffected and LastInsertId are
// those of the last statement. An empty batch sends nothing and returns
// a nil result.
func (b *Batch) Exec(ctx context.Context, ex Execer) (sql.Result, error) {
	if b.n == 0 {
		return nil, nil
	}
	return ex.ExecContext(ctx, b.sql.String(), b.args...)
}

// Rows accumulates the VALUES tuples of a multi-row statement.
type Rows struct {
	sql  strings.Builder
	args []any
	n    int
}

// Add appends one tuple (its placeholders, e.g. "(?, ?)") with its
// arguments.
func (r *Rows) Add(tuple string, args ...any) {
	if r.n > 0 {
		r.sql.WriteByte(',')
	}
	r.sql.WriteString(tuple)
	r.args = append(r.args, args...)
	r.n++
}

// Len is the number of tuples in r.
func (r *Rows) Len() int { return r.n }

// Exec runs the one multi-row statement head, r's tuples, tail on ex. An
// r without tuples sends nothing and returns a nil result.
func (r *Rows) Exec(ctx context.Context, ex Execer, head, tail string) (sql.Result, error) {
	var b Batch
	b.AddRows(head, r, tail)
	return b.Exec(ctx, ex)
}

// Placeholders is n placeholders for an IN list or a row, "?,?,?" ("" for
// n < 1).
func Placeholders(n int) string {
	if n < 1 {
		return ""
	}
	return strings.Repeat(",?", n)[1:]
}
