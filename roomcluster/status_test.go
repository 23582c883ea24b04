package roomcluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/internal/testenv"
	"voiceroom/roomcluster"
	"voiceroom/rooms"
)

// idleHost is a rooms service with no rooms: what a node drives when only
// its leases matter.
type idleHost struct{}

func (idleHost) Release(context.Context, func(rooms.RoomKey) bool) int         { return 0 }
func (idleHost) Recover(context.Context, int, []int, func(rooms.RoomKey) bool) {}

// statusNode is a rooms node without rooms; stop shuts it down gracefully.
type statusNode struct {
	node *roomcluster.Node
	stop func()
}

func startStatusNode(tb testing.TB, js jetstream.JetStream, cfg roomcluster.Config, host string, cells int) statusNode {
	tb.Helper()
	m, err := roomcluster.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n, err := roomcluster.NewNode(ctx, js, cfg, host, idleHost{}, func() int { return cells }, slog.New(slog.DiscardHandler), m)
	if err != nil {
		cancel()
		tb.Fatalf("node %s: %v", host, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := n.Run(ctx); err != nil {
			tb.Errorf("node %s: %v", host, err)
		}
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	tb.Cleanup(stop)
	select {
	case <-n.Ready():
	case <-time.After(10 * time.Second):
		tb.Fatalf("node %s not ready", host)
	}
	return statusNode{node: n, stop: stop}
}

// TestSnapshot: Snapshot reads P, the member records and every lease
// without creating anything, and follows a graceful leave.
func TestSnapshot(t *testing.T) {
	js := testenv.NewJetStream(t).JetStream()
	ctx := context.Background()
	cfg := roomcluster.Config{Partitions: 16, LeaseTTL: 2 * time.Second}

	if _, err := roomcluster.Snapshot(ctx, js); !errors.Is(err, roomcluster.ErrNoDeployment) {
		t.Fatalf("before any node: %v, want ErrNoDeployment", err)
	}
	for _, b := range []string{roomcluster.ConfigBucket, roomcluster.LeaseBucket, roomcluster.MemberBucket} {
		if _, err := js.KeyValue(ctx, b); !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Errorf("bucket %s after a Snapshot: %v, want none (Snapshot creates nothing)", b, err)
		}
	}

	a := startStatusNode(t, js, cfg, "host-a", 3)
	b := startStatusNode(t, js, cfg, "host-b", 5)
	var st roomcluster.Status
	testenv.Eventually(t, 30*time.Second, func() error {
		var err error
		if st, err = roomcluster.Snapshot(ctx, js); err != nil {
			return err
		}
		held, free := st.Held()
		if free != 0 || len(held) != 2 || held[a.node.ID()] == 0 || held[b.node.ID()] == 0 {
			return fmt.Errorf("held %v, %d free; want all 16 over both nodes", held, free)
		}
		for _, m := range st.Members {
			if m.Partitions != held[m.Node] {
				return fmt.Errorf("member %s reports %d partitions, the leases say %d", m.Node, m.Partitions, held[m.Node])
			}
		}
		return nil
	})
	if st.Partitions != 16 || len(st.Owners) != 16 || st.LeaseTTL != 2*time.Second {
		t.Errorf("P %d, %d owners, lease ttl %v; want 16, 16, 2s", st.Partitions, len(st.Owners), st.LeaseTTL)
	}
	if len(st.Members) != 2 {
		t.Fatalf("members %+v, want both nodes", st.Members)
	}
	want := map[string]roomcluster.Member{
		a.node.ID(): {Host: "host-a", Cells: 3},
		b.node.ID(): {Host: "host-b", Cells: 5},
	}
	for i, m := range st.Members {
		w, ok := want[m.Node]
		if !ok || m.Host != w.Host || m.Cells != w.Cells || m.StartedAt == 0 {
			t.Errorf("member %+v, want one of %v with its start time", m, want)
		}
		if i > 0 && st.Members[i-1].Node >= m.Node {
			t.Errorf("members not sorted by id: %+v", st.Members)
		}
	}

	// A graceful leave deletes the record and the leases; the other node
	// takes them at once.
	a.stop()
	testenv.Eventually(t, 30*time.Second, func() error {
		st, err := roomcluster.Snapshot(ctx, js)
		if err != nil {
			return err
		}
		held, free := st.Held()
		if len(st.Members) != 1 || st.Members[0].Node != b.node.ID() || free != 0 || held[b.node.ID()] != 16 {
			return fmt.Errorf("members %+v, held %v, %d free; want %s alone with all 16", st.Members, held, free, b.node.ID())
		}
		return nil
	})
}

// TestSnapshotAfterJetStreamLostTheBuckets: the lease and member buckets
// live in memory; while no node has recreated them every partition is
// free, and P (file storage) is still known.
func TestSnapshotAfterJetStreamLostTheBuckets(t *testing.T) {
	js := testenv.NewJetStream(t).JetStream()
	ctx := context.Background()
	cfg := roomcluster.Config{Partitions: 8, LeaseTTL: 2 * time.Second}
	n := startStatusNode(t, js, cfg, "host-a", 0)
	n.stop()
	for _, b := range []string{roomcluster.LeaseBucket, roomcluster.MemberBucket} {
		if err := js.DeleteKeyValue(ctx, b); err != nil {
			t.Fatalf("delete %s: %v", b, err)
		}
	}
	st, err := roomcluster.Snapshot(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if held, free := st.Held(); st.Partitions != 8 || free != 8 || len(held) != 0 || len(st.Members) != 0 || st.LeaseTTL != 0 {
		t.Errorf("%+v (held %v, %d free), want P 8, every partition free, no member, no ttl", st, held, free)
	}
}
