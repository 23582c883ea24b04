package mysqldb

import (
	"context"
	"database/sql"
	"slices"
)

// freshChunk bounds the rows of one InsertFresh statement.
const freshChunk = 500

// InsertFresh writes a row per distinct key into table's seen-set with
// INSERT IGNORE (columns names its columns, tuple a row's placeholders,
// args a key's values), and reports which keys' rows were new (the others
// were there: counted before). It writes them in the order compare gives
// (the table's primary key order), so every writer takes the rows' locks
// in one order and two never deadlock on them. Each chunk of rows is one
// INSERT; when it finds rows there already (a redelivery) it is undone to
// a savepoint and written row by row, to tell which. keys is not changed.
func InsertFresh[K comparable](ctx context.Context, tx *sql.Tx, table, columns, tuple string, keys []K, compare func(a, b K) int, args func(K) []any) (map[K]bool, error) {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, compare)
	keys = slices.Compact(keys)
	fresh := make(map[K]bool, len(keys))
	insert := `INSERT IGNORE INTO ` + table + ` (` + columns + `) VALUES `
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), freshChunk)]
		keys = keys[len(chunk):]
		if len(chunk) > 1 {
			if _, err := tx.ExecContext(ctx, `SAVEPOINT insert_fresh`); err != nil {
				return nil, err
			}
		}
		var rows Rows
		for _, k := range chunk {
			rows.Add(tuple, args(k)...)
		}
		res, err := rows.Exec(ctx, tx, insert, "")
		if err != nil {
			return nil, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, err
		}
		if n == int64(len(chunk)) {
			for _, k := range chunk {
				fresh[k] = true
			}
			continue
		}
		if len(chunk) == 1 {
			continue // there already
		}
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT insert_fresh`); err != nil {
			return nil, err
		}
		for _, k := range chunk {
			res, err := tx.ExecContext(ctx, insert+tuple, args(k)...)
			if err != nil {
				return nil, err
			}
			one, err := res.RowsAffected()
			if err != nil {
				return nil, err
			}
			fresh[k] = one == 1
		}
	}
	return fresh, nil
}
