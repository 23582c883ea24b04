//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/roomcluster"
)

const (
	// partitions is VOICEROOM_ROOMS_PARTITIONS of every process, so that
	// the suite finds a room's partition as they do.
	partitions = 256
	// leaseTTL is VOICEROOM_ROOMS_LEASE_TTL of every process (see
	// newCluster).
	leaseTTL = 2 * time.Second
)

// Series of a rooms node's /metrics the scenarios read.
const (
	seriesHeld    = "voiceroom_cluster_leases_held"
	seriesExpired = `voiceroom_cluster_handovers_total{reason="expired"}`
	seriesFenced  = "voiceroom_cluster_fenced_writes_total"
	// seriesHandovers sums every reason's hand-overs.
	seriesHandovers = "voiceroom_cluster_handovers_total"
)

// The warnings a rooms node logs when it stops serving a partition whose
// lease it could not renew (roomcluster's Node.renew).
var leaseWarnings = []string{"lease not renewed in time", "lease renewal refused"}

// roomsNodes are the processes that run the rooms role.
func (c *cluster) roomsNodes() []*proc { return []*proc{c.api, c.rooms2, c.rooms3} }

// waitRoomsNodes waits until every rooms node serves partitions, so that
// the load reaches all three.
func (c *cluster) waitRoomsNodes(t *testing.T) {
	t.Helper()
	if err := until(c.mode.quiet, func() error {
		for _, p := range c.roomsNodes() {
			held, err := p.metric(seriesHeld)
			if err != nil {
				return err
			}
			if held == 0 {
				return fmt.Errorf("%s holds no partition", p.name)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("the rooms nodes did not all take partitions within %s: %v", c.mode.quiet, err)
	}
}

// metric reads one series (name and labels as exposed) from the process's
// /metrics on its operators' listener.
func (p *proc) metric(series string) (float64, error) {
	v, err := p.metrics(series)
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// metrics reads series from one scrape of the process's /metrics: each is
// a name with its labels as exposed, or a bare name, which sums every
// series of that name.
func (p *proc) metrics(series ...string) ([]float64, error) {
	if p.ops == "" {
		return nil, fmt.Errorf("%s has no operators' listener", p.name)
	}
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(p.ops + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: read /metrics: %w", p.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: GET /metrics: %d", p.name, resp.StatusCode)
	}
	out := make([]float64, len(series))
	found := make([]bool, len(series))
	for line := range strings.SplitSeq(string(body), "\n") {
		// "name{labels} value": label values may hold spaces, the value not.
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		name, value := line[:sp], line[sp+1:]
		for i, s := range series {
			bare, _, _ := strings.Cut(name, "{")
			if name != s && (strings.Contains(s, "{") || bare != s) {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", p.name, line, err)
			}
			out[i] += v
			found[i] = true
		}
	}
	for i, s := range series {
		if !found[i] {
			return nil, fmt.Errorf("%s: /metrics has no %s", p.name, s)
		}
	}
	return out, nil
}

// leaseHolders reads the lease bucket: each held partition's holder (a node
// id: the process's VOICEROOM_NODE_ID, a dash and a suffix new at each
// start). An expired or deleted lease is not listed.
func (c *cluster) leaseHolders(ctx context.Context) (map[int]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kv, err := c.js.KeyValue(ctx, roomcluster.LeaseBucket)
	if err != nil {
		return nil, fmt.Errorf("lease bucket: %w", err)
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("watch the leases: %w", err)
	}
	defer w.Stop()
	out := map[int]string{}
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				return out, nil // the initial values are in
			}
			p, err := strconv.Atoi(strings.TrimPrefix(e.Key(), "p."))
			var l roomcluster.Lease
			if err != nil || json.Unmarshal(e.Value(), &l) != nil || l.Node == "" {
				continue
			}
			out[p] = l.Node
		case <-ctx.Done():
			return nil, fmt.Errorf("read the leases: %w", ctx.Err())
		}
	}
}

// nodeHolding is what one process held: its node id, its partitions and
// the load's rooms in them.
type nodeHolding struct {
	id    string
	parts []int
	rooms []string
}

// holding reads which partitions p holds now, and which of rooms.
func (c *cluster) holding(p *proc, rooms []string) (nodeHolding, error) {
	holders, err := c.leaseHolders(context.Background())
	if err != nil {
		return nodeHolding{}, err
	}
	var h nodeHolding
	for part, node := range holders {
		if strings.HasPrefix(node, p.name+"-") {
			h.id = node
			h.parts = append(h.parts, part)
		}
	}
	slices.Sort(h.parts)
	for _, room := range rooms {
		if slices.Contains(h.parts, roomcluster.Partition(app, room, partitions)) {
			h.rooms = append(h.rooms, room)
		}
	}
	return h, nil
}

// servesLoad makes p hold some of the load's rooms before its scenario:
// placement is a hash of the node id, new at each start, so a node may
// win partitions holding none of the few rooms the load drives; then it
// is restarted (gracefully) for a new id, a few times at most.
func (c *cluster) servesLoad(t *testing.T, p *proc, rooms []string) {
	t.Helper()
	c.waitRoomsNodes(t)
	for range 5 {
		h, err := c.holding(p, rooms)
		if err != nil {
			t.Fatalf("leases: %v", err)
		}
		if len(h.rooms) > 0 {
			return
		}
		t.Logf("%s holds %d partitions but none of the load's %d rooms: restarting it for another placement", p.name, len(h.parts), len(rooms))
		p.signal(t, syscall.SIGTERM)
		p.start(t)
		c.waitRoomsNodes(t)
	}
}

// waitTakeover waits until other nodes hold every one of h's partitions,
// and at least until since+atLeast (the fault's length), at most until
// since+atLeast+quiet. It returns how long after since the partitions
// were all held by others (0 and an error when they never were).
func (c *cluster) waitTakeover(h nodeHolding, since time.Time, atLeast time.Duration) (time.Duration, error) {
	var took time.Duration
	var last error
	deadline := since.Add(atLeast + c.mode.quiet)
	for {
		if took == 0 {
			holders, err := c.leaseHolders(context.Background())
			switch {
			case err != nil:
				last = err
			default:
				left := 0
				for _, part := range h.parts {
					if node := holders[part]; node == "" || node == h.id {
						left++
					}
				}
				if left == 0 {
					took = time.Since(since)
				} else {
					last = fmt.Errorf("%d of %d partitions not held by another node", left, len(h.parts))
				}
			}
		}
		if took > 0 && time.Since(since) >= atLeast {
			return took, nil
		}
		if time.Now().After(deadline) {
			return 0, last
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killRoomsNode is scenario 9: p SIGKILLed under load, restarted after
// the fault's length (or once the other nodes hold its partitions, if
// that takes longer).
func killRoomsNode(t *testing.T, c *cluster, r *row, p *proc, rooms []string) {
	h, err := c.holding(p, rooms)
	if err != nil {
		t.Fatalf("leases: %v", err)
	}
	if len(h.parts) == 0 || len(h.rooms) == 0 {
		r.problems = append(r.problems, fmt.Sprintf("%s held %d partitions, %d of the load's rooms, when killed: the kill proves nothing", p.name, len(h.parts), len(h.rooms)))
	}
	r.hitRooms = h.rooms
	killed := time.Now()
	p.signal(t, syscall.SIGKILL)
	took, err := c.waitTakeover(h, killed, c.mode.fault)
	p.start(t)
	c.waitRoomsNodes(t)
	if err != nil {
		r.problems = append(r.problems, fmt.Sprintf("the other nodes did not take %s's partitions: %v", p.name, err))
		return
	}
	r.note = fmt.Sprintf("%s held %d partitions, %d of %d rooms; others held them all %s after the kill", p.name, len(h.parts), len(h.rooms), len(rooms),
		took.Round(10*time.Millisecond))
}

// pauseRoomsNode is scenario 10: p SIGSTOPped under load for twice the
// lease TTL (or the fault's length, or until the other nodes hold its
// partitions, whichever is longest), then SIGCONTinued. Resumed, it must
// find its leases lapsed on its own clock: its expired hand-overs rise and
// its log says why.
func pauseRoomsNode(t *testing.T, c *cluster, r *row, p *proc, rooms []string) {
	before, err := p.metrics(seriesHeld, seriesExpired, seriesFenced, seriesHandovers)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.holding(p, rooms)
	if err != nil {
		t.Fatalf("leases: %v", err)
	}
	if before[0] == 0 || len(h.parts) == 0 || len(h.rooms) == 0 {
		r.problems = append(r.problems, fmt.Sprintf("%s served %v partitions (%d leases, %d of the load's rooms) when paused: the pause proves nothing",
			p.name, before[0], len(h.parts), len(h.rooms)))
	}
	r.hitRooms = h.rooms
	logFrom := fileSize(t, p.log)

	stopped := time.Now()
	p.pause(t)
	took, err := c.waitTakeover(h, stopped, max(c.mode.fault, 2*leaseTTL))
	paused := time.Since(stopped)
	p.resume(t)
	if err != nil {
		r.problems = append(r.problems, fmt.Sprintf("the other nodes did not take %s's partitions while it was paused: %v", p.name, err))
	}

	// Resumed, it drops every partition it held: those whose renewal
	// the pause did not catch in flight at its first renewal tick (their
	// deadlines passed), the others at the next (a renewal in flight
	// fails, leaving the slot to the clock). Each is a hand-over, as
	// expired unless a write of the partition was fenced first.
	var after []float64
	if err := until(c.mode.quiet, func() error {
		if after, err = p.metrics(seriesHeld, seriesExpired, seriesFenced, seriesHandovers); err != nil {
			return err
		}
		if dropped := after[3] - before[3]; dropped < float64(len(h.parts)) {
			return fmt.Errorf("%v of its %d partitions dropped", dropped, len(h.parts))
		}
		return nil
	}); err != nil {
		r.problems = append(r.problems, fmt.Sprintf("%s did not stop serving every partition it held after the resume: %v", p.name, err))
	}
	expired := after[1] - before[1]
	if expired == 0 {
		r.problems = append(r.problems, fmt.Sprintf("%s did not notice its leases lapsed after the resume: %s did not rise", p.name, seriesExpired))
	}
	warned := 0
	for line := range strings.SplitSeq(fileFrom(t, p.log, logFrom), "\n") {
		for _, w := range leaseWarnings {
			if strings.Contains(line, w) {
				warned++
				break
			}
		}
	}
	if warned == 0 {
		r.problems = append(r.problems, fmt.Sprintf("%s logged none of %q after the resume", p.name, leaseWarnings))
	}
	c.waitRoomsNodes(t)
	r.note = fmt.Sprintf("%s paused %s with %d partitions, %d of %d rooms; others held them all %s after the stop; resumed, it dropped %v as expired, logged %d lease warnings, fenced writes %v",
		p.name, paused.Round(10*time.Millisecond), len(h.parts), len(h.rooms), len(rooms), took.Round(10*time.Millisecond), expired, warned, after[2]-before[2])
}

func fileSize(tb testing.TB, path string) int64 {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Size()
}

// fileFrom returns the file from offset on.
func fileFrom(tb testing.TB, path string, offset int64) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b[min(offset, int64(len(b))):])
}
