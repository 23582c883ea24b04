package testenv

import (
	"context"
	"runtime"
	"testing"
)

func TestNewDBAppliesMigrations(t *testing.T) {
	db := NewDB(t)
	var n int
	err := db.QueryRowContext(context.Background(),
		"SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN ('rooms','room_outbox','users','regions','countries','room_list_entries','room_region_pins','room_snapshots','room_command_log')").Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 9 {
		t.Fatalf("found %d of the 9 foundation tables", n)
	}
}

func TestDBNameIsLegalAndUnique(t *testing.T) {
	a, b := dbName("TestX/sub case-1"), dbName("TestX/sub case-1")
	if a == b {
		t.Fatalf("two calls gave the same name %q", a)
	}
	if len(a) > 64 {
		t.Fatalf("name %q longer than MySQL allows", a)
	}
}

func TestScalarFailsOnAnError(t *testing.T) {
	db := NewDB(t)
	if n := Scalar[int](t, db, "SELECT COUNT(*) FROM room_outbox WHERE status = ?", "pending"); n != 0 {
		t.Fatalf("count of an empty table = %d", n)
	}
	for _, q := range []string{"SELECT COUNT(*) FROM no_such_table", "SELECT id FROM room_outbox WHERE id = 1"} {
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() { // Fatalf ends the goroutine, as it ends a test
			defer close(done)
			Scalar[int](r, db, q)
		}()
		<-done
		if !r.failed {
			t.Errorf("Scalar(%q) did not fail the test", q)
		}
	}
}

// recorder is a testing.TB whose Fatalf records the failure and ends the
// calling goroutine, without failing the real test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(string, ...any) {
	r.failed = true
	runtime.Goexit()
}
