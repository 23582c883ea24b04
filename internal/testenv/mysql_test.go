package testenv

import (
	"context"
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
