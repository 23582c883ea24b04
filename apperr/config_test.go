package apperr

import (
	"errors"
	"strings"
	"testing"
)

func TestConfigChecks(t *testing.T) {
	sentinel := errors.New("invalid config")
	checks := NewConfigChecks(sentinel)
	checks.Check(true, "Fine", "never")
	if checks.Err() != nil {
		t.Fatalf("no failed check: %v", checks.Err())
	}
	checks.Check(false, "Batch", "want 1..10, got %d", 0)
	checks.Check(false, "Timeout", "must be positive")
	err := checks.Err()
	if !errors.Is(err, sentinel) || ConfigFieldOf(err) != "Batch" {
		t.Fatalf("err %v: want the sentinel and the first field", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "Batch: want 1..10, got 0") || !strings.Contains(msg, "Timeout: must be positive") {
		t.Fatalf("both fields must be reported: %q", msg)
	}
}
