package webhooks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"voiceroom/webhooks"
)

// TestPrepareRestored: with the key the secrets were sealed with, every
// endpoint passes (a rotated one's previous secret too) and the backlog
// cursors and starts of the old stream move to the new stream's start; with another
// key it names an endpoint, wraps ErrSealedSecret, and changes nothing.
func TestPrepareRestored(t *testing.T) {
	h := newHarness(t)
	live := h.create("app1", "http://127.0.0.1:1/live")
	backlog := h.create("app2", "http://127.0.0.1:1/backlog")
	window := time.Hour
	if _, err := h.endpoints.RotateSecret(context.Background(), "app2", backlog.ID, &window); err != nil {
		t.Fatal(err)
	}
	// The old deployment's sink had the second endpoint reading its
	// backlog from sequence 52,000 of the old ROOM_EVENTS.
	if _, err := h.db.Exec(`UPDATE webhook_endpoints SET cursor_seq = 52000, start_seq = 52001 WHERE endpoint_id = ?`, backlog.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.Exec(`UPDATE webhook_endpoints SET start_seq = NULL WHERE endpoint_id = ?`, live.ID); err != nil {
		t.Fatal(err)
	}
	seq := func(column string, id int64) any {
		var c *int64
		if err := h.db.QueryRow(`SELECT `+column+` FROM webhook_endpoints WHERE endpoint_id = ?`, id).Scan(&c); err != nil {
			t.Fatal(err)
		}
		if c == nil {
			return nil
		}
		return *c
	}
	cursor := func(id int64) any { return seq("cursor_seq", id) }

	other, err := webhooks.NewSealer(append(make([]byte, webhooks.KeySize-1), 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := webhooks.PrepareRestored(context.Background(), h.db, other); !errors.Is(err, webhooks.ErrSealedSecret) {
		t.Fatalf("another key: %v, want ErrSealedSecret", err)
	}
	if c := cursor(backlog.ID); c != int64(52000) {
		t.Fatalf("a refused restore moved the cursor to %v", c)
	}

	rep, err := webhooks.PrepareRestored(context.Background(), h.db, h.sealer)
	if err != nil {
		t.Fatal(err)
	}
	if want := (webhooks.RestoreReport{Endpoints: 2, CursorsReset: 1}); rep != want {
		t.Fatalf("report %+v, want %+v", rep, want)
	}
	if c := cursor(backlog.ID); c != int64(1) {
		t.Errorf("backlog cursor %v, want 1 (the new stream's start)", c)
	}
	if c := seq("start_seq", backlog.ID); c != int64(1) {
		t.Errorf("start %v, want 1 (the new stream's start)", c)
	}
	if c, s := cursor(live.ID), seq("start_seq", live.ID); c != nil || s != nil {
		t.Errorf("live endpoint's cursor %v and start %v, want none", c, s)
	}
}
