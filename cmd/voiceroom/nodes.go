package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
	"voiceroom/roomcluster"
)

// nodesOptions are the flags of `voiceroom nodes`.
type nodesOptions struct {
	partitions bool // print the partition → node table too
	json       bool
}

// nodes prints the rooms nodes of the deployment as the cluster's buckets
// hold them (docs/operating.md, "Rooms on several nodes"): each live node's record,
// the partitions each holds by the lease bucket, the free ones, and with
// --partitions every partition's holder. It reads JetStream only
// (VOICEROOM_NATS_URL, else serve's embedded server on
// VOICEROOM_NATS_LISTEN) and changes nothing.
func nodes(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("nodes", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var opts nodesOptions
	fs.BoolVar(&opts.partitions, "partitions", false, "also print every partition and its node")
	fs.BoolVar(&opts.json, "json", false, "print JSON")
	timeout := fs.Duration("timeout", 15*time.Second, "give up after this long (connecting included)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: nodes [--partitions] [--json] [--timeout 15s]: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: nodes [--partitions] [--json] [--timeout 15s]: unexpected %q", errUsage, fs.Arg(0))
	}
	if *timeout <= 0 {
		return fmt.Errorf("%w: nodes: --timeout must be positive", errUsage)
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	cfg.NATSConnectTimeout = min(cfg.NATSConnectTimeout, *timeout)
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	conn, err := connectNATS(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	return writeNodes(ctx, os.Stdout, conn.JetStream(), opts, time.Now())
}

// connectNATS connects an operator's command to the JetStream serve uses:
// VOICEROOM_NATS_URL, else the embedded server serve runs on
// VOICEROOM_NATS_LISTEN (without credentials, as serve connects to it).
func connectNATS(ctx context.Context, cfg config) (*bus.Conn, error) {
	c := cfg.natsConn()
	c.Name = "voiceroom-cli-" + cfg.NodeID
	variable := "VOICEROOM_NATS_URL"
	if cfg.NATSURL == "" {
		c.URL = "nats://" + cfg.NATSListen
		c.User, c.Password, c.CredsFile = "", "", ""
		variable = "VOICEROOM_NATS_LISTEN"
	}
	conn, err := bus.Connect(ctx, c, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", variable, err)
	}
	return conn, nil
}

// nodeRow is one line of the node table: a member record and the leases
// the lease bucket gives its node.
type nodeRow struct {
	roomcluster.Member
	Leases   int  `json:"leases"`
	IsMember bool `json:"member"` // false: holds leases but has no member record
}

// nodesReport is what --json prints.
type nodesReport struct {
	Partitions      int       `json:"partitions"`
	LeaseTTLSeconds float64   `json:"lease_ttl_seconds"`
	Free            int       `json:"free"`
	Nodes           []nodeRow `json:"nodes"`
	// Owners is, by partition, its holder ("" free); only with --partitions.
	Owners []string `json:"owners,omitempty"`
}

// writeNodes reads the cluster's buckets through js and prints them to w.
func writeNodes(ctx context.Context, w io.Writer, js jetstream.JetStream, opts nodesOptions, now time.Time) error {
	st, err := roomcluster.Snapshot(ctx, js)
	if errors.Is(err, roomcluster.ErrNoDeployment) {
		return fmt.Errorf("%w (is VOICEROOM_NATS_URL the deployment's JetStream?)", err)
	}
	if err != nil {
		return err
	}
	rep := report(st)
	if opts.partitions {
		rep.Owners = st.Owners
	}
	if opts.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	nodesHold := "nodes hold"
	if holders(rep.Nodes) == 1 {
		nodesHold = "node holds"
	}
	fmt.Fprintf(w, "%d partitions, lease ttl %v: %d %s %d, %d free\n\n",
		st.Partitions, st.LeaseTTL, holders(rep.Nodes), nodesHold, st.Partitions-rep.Free, rep.Free)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tHOST\tSTARTED\tUP\tPARTITIONS\tLEASES\tCELLS\tROUTED")
	for _, n := range rep.Nodes {
		if !n.IsMember {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t%d\t-\t-\t(no member record: stopping, or dead until its leases expire)\n", n.Node, n.Leases)
			continue
		}
		started := time.UnixMilli(n.StartedAt)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", n.Node, n.Host, started.UTC().Format(time.RFC3339),
			now.Sub(started).Round(time.Second), n.Partitions, n.Leases, n.Cells, n.Routed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !opts.partitions {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tNODE")
	for p, owner := range st.Owners {
		if owner == "" {
			owner = "(free)"
		}
		fmt.Fprintf(tw, "%s\t%s\n", strconv.Itoa(p), owner)
	}
	return tw.Flush()
}

// report joins the member records with the lease counts: every member,
// then every holder without a record.
func report(st roomcluster.Status) nodesReport {
	held, free := st.Held()
	rep := nodesReport{Partitions: st.Partitions, LeaseTTLSeconds: st.LeaseTTL.Seconds(), Free: free, Nodes: []nodeRow{}}
	for _, m := range st.Members {
		rep.Nodes = append(rep.Nodes, nodeRow{Member: m, Leases: held[m.Node], IsMember: true})
		delete(held, m.Node)
	}
	var orphans []string
	for node := range held {
		orphans = append(orphans, node)
	}
	slices.Sort(orphans)
	for _, node := range orphans {
		rep.Nodes = append(rep.Nodes, nodeRow{Member: roomcluster.Member{Node: node}, Leases: held[node]})
	}
	return rep
}

// holders counts the nodes that hold at least one lease.
func holders(rows []nodeRow) int {
	n := 0
	for _, r := range rows {
		if r.Leases > 0 {
			n++
		}
	}
	return n
}
