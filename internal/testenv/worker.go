package testenv

import (
	"context"
	"testing"
)

// Start runs a component's Run in the background until the test ends,
// then cancels its context, waits for it to return and fails the test if
// it returned an error.
func Start(tb testing.TB, run func(context.Context) error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("run: %v", err)
		}
	})
}
