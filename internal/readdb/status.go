package readdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
)

// errNotReplicating is a replica whose lag is NULL: a replication thread
// is stopped (or broke on an error), so its data ages without bound.
var errNotReplicating = errors.New("not replicating (Seconds_Behind_Master is NULL: a replication thread is stopped)")

// errNotAReplica is a server that shows no replication status at all.
var errNotAReplica = errors.New("not a replica (SHOW REPLICA STATUS shows nothing)")

// readLag returns a replica's lag as the server reports it. SHOW REPLICA
// STATUS is MariaDB 10.5+'s and MySQL 8.0.22+'s name (MySQL 8.4 knows no
// other); older servers answer only SHOW SLAVE STATUS.
func readLag(ctx context.Context, db *sql.DB) (time.Duration, error) {
	rows, err := db.QueryContext(ctx, "SHOW REPLICA STATUS")
	var merr *mysql.MySQLError
	if errors.As(err, &merr) && merr.Number == 1064 { // a syntax error: an older server
		rows, err = db.QueryContext(ctx, "SHOW SLAVE STATUS")
	}
	if err != nil {
		return 0, fmt.Errorf("read replication status: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, fmt.Errorf("read replication status: %w", err)
	}
	at := -1
	for i, c := range cols {
		if c == "Seconds_Behind_Master" || c == "Seconds_Behind_Source" {
			at = i
		}
	}
	if at < 0 {
		return 0, fmt.Errorf("read replication status: no Seconds_Behind_Master column in %d columns", len(cols))
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("read replication status: %w", err)
		}
		return 0, errNotAReplica
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return 0, fmt.Errorf("read replication status: %w", err)
	}
	if !vals[at].Valid {
		return 0, errNotReplicating
	}
	secs, err := strconv.ParseInt(vals[at].String, 10, 64)
	if err != nil || secs < 0 {
		return 0, fmt.Errorf("read replication status: Seconds_Behind_Master %q", vals[at].String)
	}
	return time.Duration(secs) * time.Second, nil
}
