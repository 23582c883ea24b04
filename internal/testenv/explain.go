package testenv

import (
	"database/sql"
	"testing"
)

// Explain returns the rows of EXPLAIN q (the query plan), each by column
// name; an error fails the test.
func Explain(tb testing.TB, db *sql.DB, q string, args ...any) []map[string]string {
	tb.Helper()
	rows, err := db.Query("EXPLAIN "+q, args...)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		tb.Fatal(err)
	}
	var plan []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			tb.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		plan = append(plan, row)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return plan
}
