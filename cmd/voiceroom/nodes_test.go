package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/internal/testenv"
	"voiceroom/roomcluster"
	"voiceroom/rooms"
)

// idleRooms is a rooms service with no rooms, for nodes whose leases are
// all a test looks at.
type idleRooms struct{}

func (idleRooms) Release(context.Context, func(rooms.RoomKey) bool) int         { return 0 }
func (idleRooms) Recover(context.Context, int, []int, func(rooms.RoomKey) bool) {}

// newTestRoomsNode runs a rooms node without rooms on js until the test
// ends, reporting cells loaded cells.
func newTestRoomsNode(tb testing.TB, js jetstream.JetStream, cfg roomcluster.Config, host string, cells int) *roomcluster.Node {
	tb.Helper()
	m, err := roomcluster.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n, err := roomcluster.NewNode(ctx, js, cfg, host, idleRooms{}, func() int { return cells }, slog.New(slog.DiscardHandler), m)
	if err != nil {
		cancel()
		tb.Fatalf("rooms node %s: %v", host, err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	return n
}

// mustWriteNodes runs writeNodes and answers what it printed.
func mustWriteNodes(tb testing.TB, js jetstream.JetStream, opts nodesOptions) string {
	tb.Helper()
	var out bytes.Buffer
	if err := writeNodes(context.Background(), &out, js, opts, time.Now()); err != nil {
		tb.Fatalf("nodes %+v: %v", opts, err)
	}
	return out.String()
}

// TestNodesPrintsTheCluster: what `voiceroom nodes` prints of two rooms
// nodes on a real JetStream, as a table, with --partitions and as JSON.
func TestNodesPrintsTheCluster(t *testing.T) {
	js := testenv.NewJetStream(t).JetStream()
	var none bytes.Buffer
	err := writeNodes(context.Background(), &none, js, nodesOptions{}, time.Now())
	if !errors.Is(err, roomcluster.ErrNoDeployment) || !strings.Contains(err.Error(), "VOICEROOM_NATS_URL") {
		t.Fatalf("before any rooms node: %v, want ErrNoDeployment naming VOICEROOM_NATS_URL", err)
	}

	cfg := roomcluster.Config{Partitions: 16, LeaseTTL: 2 * time.Second}
	a := newTestRoomsNode(t, js, cfg, "host-a", 3)
	b := newTestRoomsNode(t, js, cfg, "host-b", 5)
	ids := map[string]string{a.ID(): "host-a", b.ID(): "host-b"}
	var rep nodesReport
	testenv.Eventually(t, 30*time.Second, func() error {
		rep = nodesReport{}
		if err := json.Unmarshal([]byte(mustWriteNodes(t, js, nodesOptions{json: true, partitions: true})), &rep); err != nil {
			return err
		}
		leases := 0
		for _, n := range rep.Nodes {
			if n.Partitions != n.Leases || n.Leases == 0 {
				return fmt.Errorf("node %s: %d partitions by its record, %d leases", n.Node, n.Partitions, n.Leases)
			}
			leases += n.Leases
		}
		if len(rep.Nodes) != 2 || leases != 16 || rep.Free != 0 {
			return fmt.Errorf("%+v: want both nodes holding all 16", rep)
		}
		return nil
	})
	if rep.Partitions != 16 || rep.LeaseTTLSeconds != 2 || len(rep.Owners) != 16 {
		t.Errorf("json: P %d, lease ttl %vs, %d owners; want 16, 2, 16", rep.Partitions, rep.LeaseTTLSeconds, len(rep.Owners))
	}
	for _, n := range rep.Nodes {
		if ids[n.Node] != n.Host || !n.IsMember || n.StartedAt == 0 || (n.Host == "host-a") != (n.Cells == 3) {
			t.Errorf("json node %+v: want one of %v with its record", n, ids)
		}
	}

	text := mustWriteNodes(t, js, nodesOptions{})
	if !strings.HasPrefix(text, "16 partitions, lease ttl 2s: 2 nodes hold 16, 0 free\n") {
		t.Errorf("summary line:\n%s", text)
	}
	for id, host := range ids {
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(id) + `\s+` + host + `\s+\S+Z\s+\S+\s+(\d+)\s+(\d+)\s+(\d+)\s+0$`)
		if m := row.FindStringSubmatch(text); m == nil || m[1] != m[2] {
			t.Errorf("no row for %s on %s with as many partitions as leases:\n%s", id, host, text)
		}
	}
	if strings.Contains(text, "PARTITION ") {
		t.Errorf("partition table without --partitions:\n%s", text)
	}

	_, table, ok := strings.Cut(mustWriteNodes(t, js, nodesOptions{partitions: true}), "PARTITION  NODE\n")
	if !ok {
		t.Fatalf("no partition table with --partitions")
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 16 {
		t.Fatalf("%d partition rows, want 16:\n%s", len(lines), table)
	}
	for p, line := range lines {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] != fmt.Sprint(p) || ids[f[1]] == "" {
			t.Errorf("partition row %q, want %d and a node of %v", line, p, slices.Collect(maps.Keys(ids)))
		}
	}
}

// TestNodesReport: a node that holds leases without a member record (its
// record deleted first at a shutdown, or expired) is listed after the
// members, and free partitions are counted.
func TestNodesReport(t *testing.T) {
	st := roomcluster.Status{
		Partitions: 5, LeaseTTL: 5 * time.Second,
		Members: []roomcluster.Member{{Node: "a-1", Host: "a", Partitions: 1}, {Node: "c-3", Host: "c"}},
		Owners:  []string{"a-1", "", "b-2", "b-2", ""},
	}
	rep := report(st)
	want := []nodeRow{
		{Member: roomcluster.Member{Node: "a-1", Host: "a", Partitions: 1}, Leases: 1, IsMember: true},
		{Member: roomcluster.Member{Node: "c-3", Host: "c"}, Leases: 0, IsMember: true},
		{Member: roomcluster.Member{Node: "b-2"}, Leases: 2},
	}
	if !slices.Equal(rep.Nodes, want) || rep.Free != 2 || rep.Partitions != 5 || rep.LeaseTTLSeconds != 5 {
		t.Errorf("report %+v, want nodes %+v and 2 free", rep, want)
	}
	if got := holders(rep.Nodes); got != 2 {
		t.Errorf("holders %d, want 2 (a node with no lease holds nothing)", got)
	}
}

// TestNodesCommandAgainstServe runs the binary against two serve
// processes, one with every role (embedded JetStream) and one with the
// rooms role alone on the first's JetStream: nodes lists both, holding
// every partition between them, and a bad flag is a usage error.
func TestNodesCommandAgainstServe(t *testing.T) {
	p, vars := startServe(t)
	waitReady(t, p, p.waitServing(t, vars))
	second := secondServe(t, vars, "rooms", "test-rooms")
	p2 := startServeWith(t, second)
	waitReady(t, p2, p2.waitServing(t, second))

	testenv.Eventually(t, 60*time.Second, func() error {
		code, out := runCommand(t, vars, "nodes")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, out)
		}
		if !strings.HasPrefix(out, "256 partitions, lease ttl 5s: 2 nodes hold 256, 0 free\n") {
			return fmt.Errorf("not yet both nodes:\n%s", out)
		}
		for _, node := range []string{"test-node", "test-rooms"} {
			if !regexp.MustCompile(`(?m)^` + node + `-[0-9a-f]{8}\s+` + node + `\s`).MatchString(out) {
				return fmt.Errorf("no row for %s:\n%s", node, out)
			}
		}
		return nil
	})
	code, out := runCommand(t, vars, "nodes", "--json", "--partitions")
	var rep nodesReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || len(rep.Owners) != 256 || len(rep.Nodes) != 2 {
		t.Errorf("nodes --json --partitions: exit %d, %v, %d owners, %d nodes:\n%.2000s", code, err, len(rep.Owners), len(rep.Nodes), out)
	}
	if code, out := runCommand(t, vars, "nodes", "--bogus"); code != 2 || !strings.Contains(out, "nodes [--partitions]") {
		t.Errorf("nodes --bogus: exit %d, %q; want 2 and the usage", code, out)
	}
}
