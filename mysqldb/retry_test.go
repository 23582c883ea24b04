package mysqldb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"voiceroom/mysqldb"
)

// TestRetry: a deadlock or lock wait runs the statement again, any other
// error or success ends at once, and five deadlocks in a row give up.
func TestRetry(t *testing.T) {
	deadlock := fmt.Errorf("upsert: %w", &mysql.MySQLError{Number: mysqldb.ErrNumDeadlock})
	lockWait := &mysql.MySQLError{Number: mysqldb.ErrNumLockWait}
	other := errors.New("syntax")
	for _, tc := range []struct {
		name  string
		errs  []error // what each attempt returns; nil after the list
		calls int
		want  error
	}{
		{"success", nil, 1, nil},
		{"deadlock then success", []error{deadlock}, 2, nil},
		{"lock wait, deadlock, then success", []error{lockWait, deadlock}, 3, nil},
		{"other error", []error{other}, 1, other},
		{"five deadlocks", []error{deadlock, deadlock, deadlock, deadlock, deadlock, deadlock}, 5, deadlock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := mysqldb.Retry(context.Background(), func() error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if calls != tc.calls || !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("%d calls, err %v; want %d calls, %v", calls, err, tc.calls, tc.want)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	err := mysqldb.Retry(ctx, func() error { calls++; return deadlock })
	if calls != 1 || !errors.Is(err, context.Canceled) || !errors.Is(err, deadlock) {
		t.Fatalf("ended ctx: %d calls, %v", calls, err)
	}
}
