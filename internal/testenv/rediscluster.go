package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisNode is one redis-server of a test's own (RunRedisCluster,
// RunRedisSentinel), on a loopback port, without persistence. Stop is a
// real outage: the process exits.
type RedisNode struct {
	tb   testing.TB
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedisNode starts redis-server (with the config file conf, unless
// empty) and args on a free loopback port and returns once it accepts
// connections.
func startRedisNode(tb testing.TB, dir, conf string, args ...string) *RedisNode {
	tb.Helper()
	port := freePort(tb)
	nodeDir := filepath.Join(dir, strconv.Itoa(port))
	if err := os.MkdirAll(nodeDir, 0o755); err != nil {
		tb.Fatal(err)
	}
	n := &RedisNode{tb: tb, Addr: "127.0.0.1:" + strconv.Itoa(port)}
	var all []string
	if conf != "" {
		all = append(all, conf)
	}
	all = append(all, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no",
		"--dir", nodeDir, "--logfile", filepath.Join(nodeDir, "redis.log"))
	all = append(all, args...)
	n.cmd = exec.Command("redis-server", all...)
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the test binary
	if err := n.cmd.Start(); err != nil {
		tb.Fatalf("start redis-server (deploy/services.sh installs it): %v", err)
	}
	n.done = make(chan struct{})
	go func() { n.cmd.Wait(); close(n.done) }()
	tb.Cleanup(n.Stop)
	Eventually(tb, 20*time.Second, func() error {
		c, err := net.Dial("tcp", n.Addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	return n
}

// RunRedisNode starts one redis-server of the test's own with extra
// arguments (TLS, ACL users, ...) on a free loopback port (Addr, plain
// TCP) and returns once it accepts connections. Skipped under -short.
func RunRedisNode(tb testing.TB, args ...string) *RedisNode {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs redis-server; skipped with -short")
	}
	return startRedisNode(tb, tb.TempDir(), "", args...)
}

// FreePort is a loopback port nobody listened on a moment ago, for a
// server of the test's own that cannot be given port 0 (redis-server's
// TLS port, say).
func FreePort(tb testing.TB) int { return freePort(tb) }

// Stop kills the node and waits for it to exit.
func (n *RedisNode) Stop() {
	if n.cmd != nil {
		n.cmd.Process.Signal(syscall.SIGKILL)
		<-n.done
		n.cmd = nil
	}
}

// Client is a plain client of this one node, closed when the test ends.
func (n *RedisNode) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: n.Addr})
	n.tb.Cleanup(func() { c.Close() })
	return c
}

// freePort is a loopback port nobody listened on a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// RedisCluster is a Redis Cluster of a test's own: masters, each with one
// replica, nodes on free loopback ports, cluster-node-timeout 1s, so that
// a stopped master's replica takes over in a few seconds.
type RedisCluster struct {
	tb    testing.TB
	Nodes []*RedisNode
}

// RunRedisCluster starts a cluster of masters masters with a replica each
// and returns once every slot is served. Skipped under -short.
func RunRedisCluster(tb testing.TB, masters int) *RedisCluster {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs redis-server; skipped with -short")
	}
	dir := tb.TempDir()
	rc := &RedisCluster{tb: tb}
	addrs := []string{}
	for range masters * 2 {
		bus := freePort(tb)
		n := startRedisNode(tb, dir, "", "--cluster-enabled", "yes", "--cluster-config-file", "nodes-"+strconv.Itoa(bus)+".conf",
			"--cluster-node-timeout", "1000", "--cluster-port", strconv.Itoa(bus),
			// A replica fails over however long its link was down (a busy
			// machine may have delayed its first sync).
			"--cluster-replica-validity-factor", "0")
		rc.Nodes = append(rc.Nodes, n)
		addrs = append(addrs, n.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	Eventually(tb, 60*time.Second, func() error { return rc.healthy(masters) })
	return rc
}

// healthy is nil once every node says the cluster is ok and knows
// masters masters with a replica each.
func (rc *RedisCluster) healthy(masters int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, n := range rc.Nodes {
		if n.cmd == nil {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		info, err := c.ClusterInfo(ctx).Result()
		c.Close()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster not ok", n.Addr)
		}
		c = redis.NewClient(&redis.Options{Addr: n.Addr})
		repl, err := c.Info(ctx, "replication").Result()
		c.Close()
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("%s: replica not in sync with its master yet", n.Addr)
		}
	}
	return nil
}

// Addrs are the nodes' addresses.
func (rc *RedisCluster) Addrs() []string {
	var out []string
	for _, n := range rc.Nodes {
		out = append(out, n.Addr)
	}
	return out
}

// Client is a cluster client of rc, slot-checked as NewRedis's, that gives
// up quickly on a stopped node; closed when the test ends.
func (rc *RedisCluster) Client() *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs(), DialTimeout: 200 * time.Millisecond,
		ReadTimeout: time.Second, MaxRedirects: 3})
	CheckSlots(rc.tb, c)
	rc.tb.Cleanup(func() { c.Close() })
	return c
}

// MasterOf returns the node that serves key's slot now.
func (rc *RedisCluster) MasterOf(key string) *RedisNode {
	rc.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range rc.Nodes {
		if n.cmd == nil {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		slot, err := c.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			c.Close()
			continue
		}
		slots, err := c.ClusterSlots(ctx).Result()
		c.Close()
		if err != nil {
			continue
		}
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
				for _, m := range rc.Nodes {
					if m.Addr == s.Nodes[0].Addr {
						return m
					}
				}
			}
		}
	}
	rc.tb.Fatalf("no node serves the slot of %s", key)
	return nil
}

// RedisSentinelSetup is a Sentinel deployment of a test's own: a master,
// one replica and one sentinel watching the master as Master (quorum 1,
// down after 1s), so a stopped master is replaced in a few seconds.
type RedisSentinelSetup struct {
	tb       testing.TB
	Master   string
	Nodes    []*RedisNode // the first master, its replica
	Sentinel *RedisNode
}

// RunRedisSentinel starts the setup and returns once the sentinel knows
// the replica. Skipped under -short.
func RunRedisSentinel(tb testing.TB) *RedisSentinelSetup {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs redis-server; skipped with -short")
	}
	dir := tb.TempDir()
	s := &RedisSentinelSetup{tb: tb, Master: "vrtest"}
	m := startRedisNode(tb, dir, "")
	host, port, _ := net.SplitHostPort(m.Addr)
	r := startRedisNode(tb, dir, "", "--replicaof", host, port)
	s.Nodes = []*RedisNode{m, r}
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("sentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %[1]s 1000\nsentinel failover-timeout %[1]s 5000\n",
		s.Master, host, port)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		tb.Fatal(err)
	}
	s.Sentinel = startRedisNode(tb, dir, conf, "--sentinel")
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel.Addr})
	tb.Cleanup(func() { sc.Close() })
	Eventually(tb, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		reps, err := sc.Replicas(ctx, s.Master).Result()
		if err != nil {
			return err
		}
		for _, rep := range reps {
			if rep["flags"] == "slave" && rep["master-link-status"] == "ok" {
				return nil
			}
		}
		return fmt.Errorf("sentinel sees no healthy replica yet: %v", reps)
	})
	return s
}

// MasterAddr is the master's address as the sentinel says now.
func (s *RedisSentinelSetup) MasterAddr() string {
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel.Addr})
	defer sc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	a, err := sc.GetMasterAddrByName(ctx, s.Master).Result()
	if err != nil || len(a) != 2 {
		return ""
	}
	return net.JoinHostPort(a[0], a[1])
}

// Node returns the node at addr.
func (s *RedisSentinelSetup) Node(addr string) *RedisNode {
	for _, n := range s.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	s.tb.Fatalf("no node at %s", addr)
	return nil
}
