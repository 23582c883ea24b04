package roomcluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/internal/testenv"
	"voiceroom/roomcluster"
	"voiceroom/rooms"
)

// TestKVLeaseSemantics pins the JetStream KV behaviour the leases rely on,
// in the nats.go and nats-server versions of go.mod: Create only on a free
// key, Update only at the last revision, a renewal before expiry extends
// the lease, one after expiry is refused (even by the same writer), and an
// expired key is free for Create, with a marker watchers see.
func TestKVLeaseSemantics(t *testing.T) {
	js := testenv.NewJetStream(t).JetStream()
	ctx := context.Background()
	const ttl = time.Second
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "LEASE_SEMANTICS", History: 1, TTL: ttl, LimitMarkerTTL: ttl,
		Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, "p.1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()

	rev, err := kv.Create(ctx, "p.1", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "p.1", []byte("b")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("second Create: %v, want ErrKeyExists", err)
	}
	if _, err := kv.Update(ctx, "p.1", []byte("b"), rev+100); !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Fatalf("Update at a wrong revision: %v, want ErrKeyRevisionMismatch", err)
	}
	// Renewals every ttl/2 for 3 ttls keep the lease.
	for range 6 {
		time.Sleep(ttl / 2) // what is measured is the TTL itself
		if rev, err = kv.Update(ctx, "p.1", []byte("a"), rev); err != nil {
			t.Fatalf("renewal within the ttl: %v", err)
		}
	}
	// Unrenewed, it expires; the renewal that comes too late is refused.
	testenv.Eventually(t, 5*ttl, func() error {
		if _, err := kv.Get(ctx, "p.1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("get after expiry: %v", err)
		}
		return nil
	})
	if _, err := kv.Update(ctx, "p.1", []byte("a"), rev); !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Fatalf("renewal after expiry: %v, want ErrKeyRevisionMismatch", err)
	}
	// The watcher saw the expiry as a purge marker.
	sawExpiry := false
	for !sawExpiry {
		select {
		case e := <-w.Updates():
			sawExpiry = e != nil && e.Operation() == jetstream.KeyValuePurge
		case <-time.After(5 * time.Second):
			t.Fatal("no expiry marker seen by the watcher")
		}
	}
	// Free again: another node takes it at a higher revision (a new epoch).
	rev2, err := kv.Create(ctx, "p.1", []byte("b"))
	if err != nil || rev2 <= rev {
		t.Fatalf("Create after expiry: rev %d (old %d), %v", rev2, rev, err)
	}
}

// TestPausedNodeStopsServing: a node whose lease work stops (a process
// paused) stops serving on its own clock before its lease expires; another
// node takes the partitions after the expiry; the resumed node finds its
// renewals refused and serves nothing it lost, while the router answers
// from the new owner.
func TestPausedNodeStopsServing(t *testing.T) {
	cfg := roomcluster.Config{Partitions: 8, LeaseTTL: 2 * time.Second}
	h, a, r, ids := oneNodeWithRooms(t, cfg, 3)
	key := rooms.RoomKey{AppCode: testApp, RoomID: ids[0]}
	epoch, ok := a.node.Serving(key)
	if !ok {
		t.Fatal("a does not serve")
	}

	resume := roomcluster.PauseNode(a.node)
	b := h.startNode("b")
	// a stops serving before its lease can expire, so before b can take it.
	testenv.Eventually(t, 2*cfg.LeaseTTL, func() error {
		if _, ok := a.node.Serving(key); ok {
			return fmt.Errorf("a still serves")
		}
		return nil
	})
	if _, ok := b.node.Serving(key); ok {
		t.Fatal("b serves the room while a's lease may still be alive")
	}
	h.waitBalanced(r, b) // the leases expired and b took them
	res, err := r.Execute(context.Background(), &rooms.Command{Kind: rooms.KindJoinRoom, AppCode: testApp, RoomID: ids[0], CommandID: "after-pause",
		ClientKey: true, Actor: rooms.Actor{UserID: 50}})
	if err != nil || res.Node != b.node.ID() || res.Epoch <= epoch {
		t.Fatalf("join after the take-over: node %s epoch %d (a's was %d), %v; want b under a new epoch", res.Node, res.Epoch, epoch, err)
	}

	resume()
	// Resumed, a's renewals are refused and it does not serve; a command
	// that reaches it (as one queued before the pause would) is refused.
	if _, err := a.svc.Execute(context.Background(), &rooms.Command{Kind: rooms.KindJoinRoom, AppCode: testApp, RoomID: ids[0], CommandID: "stale",
		Actor: rooms.Actor{UserID: 51}}); !rooms.IsNotServing(err) {
		t.Fatalf("command on the resumed node: %v, want not serving", err)
	}
	// It is a live member again: the partitions rendezvous gives it come
	// back to it by a hand-over from b.
	h.waitBalanced(r, a, b)
}
