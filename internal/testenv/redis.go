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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/internal/redisconn"
)

// RedisAddr returns the address of the single Redis tests use.
func RedisAddr() string {
	if addr := os.Getenv("VOICEROOM_TEST_REDIS_ADDR"); addr != "" {
		return addr
	}
	return "127.0.0.1:6379"
}

// RedisConfig is the Redis NewRedis connects to: the single server at
// RedisAddr, unless VOICEROOM_TEST_REDIS_ADDRS names several addresses (a
// cluster; with VOICEROOM_TEST_REDIS_SENTINEL_MASTER, sentinels). So a
// package's whole suite runs against a cluster or Sentinel unchanged:
//
//	VOICEROOM_TEST_REDIS_ADDRS=$(deploy/services.sh cluster-addrs) go test ./roomlist/
func RedisConfig() redisconn.Config {
	c := redisconn.Config{Addrs: []string{RedisAddr()}}
	if addrs := os.Getenv("VOICEROOM_TEST_REDIS_ADDRS"); addrs != "" {
		c.Addrs = strings.Split(addrs, ",")
		c.SentinelMaster = os.Getenv("VOICEROOM_TEST_REDIS_SENTINEL_MASTER")
	}
	return c
}

// NewRedis returns a client of RedisConfig's Redis and a key prefix of the
// test's own. Every key under the prefix is deleted when the test ends.
// Every script and transaction the client runs is checked to touch keys
// of one cluster hash slot (the test fails otherwise), whatever the Redis.
// The test is skipped under -short and fails if Redis cannot be reached.
func NewRedis(tb testing.TB) (redis.UniversalClient, string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs Redis; skipped with -short")
	}
	cfg := RedisConfig()
	client, err := redisconn.New(cfg, "")
	if err != nil {
		tb.Fatalf("redis %s: %v", cfg.Describe(), err)
	}
	mustPing(tb, client, cfg.Describe())
	CheckSlots(tb, client)
	prefix := RandomPrefix()
	tb.Cleanup(func() {
		deleteKeys(client, prefix)
		client.Close()
	})
	return client, prefix
}

// RedisClient returns another client of RedisConfig's Redis (one a test
// can hook), closed when the test ends. It has no prefix of its own: use
// NewRedis's.
func RedisClient(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	cfg := RedisConfig()
	client, err := redisconn.New(cfg, "")
	if err != nil {
		tb.Fatalf("redis %s: %v", cfg.Describe(), err)
	}
	tb.Cleanup(func() { client.Close() })
	return client
}

// RandomPrefix is a fresh key prefix, "vrt:<random>:".
func RandomPrefix() string { return "vrt:" + randomHex(6) + ":" }

func mustPing(tb testing.TB, client redis.UniversalClient, what string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		tb.Fatalf("redis %s: %v (deploy/services.sh starts it)", what, err)
	}
}

// deleteKeys deletes every key under prefix, on every master of a cluster.
func deleteKeys(client redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	del := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		return nil
	}
	switch c := client.(type) {
	case *redis.ClusterClient:
		c.ForEachMaster(ctx, del)
	case *redis.Client:
		del(ctx, c)
	}
}

// DeleteRedisKeys deletes every key under prefix now (on every master of a
// cluster), failing the test on an error.
func DeleteRedisKeys(tb testing.TB, client redis.UniversalClient, prefix string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := RedisKeys(ctx, client, prefix+"*")
	if err != nil {
		tb.Fatalf("list the keys under %s: %v", prefix, err)
	}
	p := client.Pipeline()
	for _, k := range keys {
		p.Del(ctx, k)
	}
	if len(keys) > 0 {
		if _, err := p.Exec(ctx); err != nil {
			tb.Fatalf("delete the keys under %s: %v", prefix, err)
		}
	}
}

// RedisKeys returns the keys matching pattern, from every master of a
// cluster (KEYS asks one server only).
func RedisKeys(ctx context.Context, client redis.UniversalClient, pattern string) ([]string, error) {
	c, ok := client.(*redis.ClusterClient)
	if !ok {
		return client.Keys(ctx, pattern).Result()
	}
	var mu sync.Mutex
	var out []string
	err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		ks, err := n.Keys(ctx, pattern).Result()
		mu.Lock()
		out = append(out, ks...)
		mu.Unlock()
		return err
	})
	return out, err
}

// RedisClusterAddrs are the masters of the Redis Cluster deploy/services.sh
// starts (VOICEROOM_TEST_REDIS_CLUSTER, default 127.0.0.1:7001..7003).
func RedisClusterAddrs() []string {
	if a := os.Getenv("VOICEROOM_TEST_REDIS_CLUSTER"); a != "" {
		return strings.Split(a, ",")
	}
	return []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}
}

// NewRedisCluster returns a client of the shared Redis Cluster
// (RedisClusterAddrs), slot-checked as NewRedis's; the test's keys are its
// own through RandomPrefix. Skipped under -short; fails if the cluster
// cannot be reached (deploy/services.sh starts it).
func NewRedisCluster(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a Redis Cluster; skipped with -short")
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: RedisClusterAddrs()})
	mustPing(tb, c, "cluster "+strings.Join(RedisClusterAddrs(), ","))
	CheckSlots(tb, c)
	tb.Cleanup(func() { c.Close() })
	return c
}

// CheckSlots makes the test fail when client runs a Lua script (EVAL,
// EVALSHA, FCALL) or a MULTI/EXEC transaction whose keys are not all in
// one cluster hash slot: such a script works on one server and fails on a
// cluster (CROSSSLOT). It is checked at every call, on any Redis.
func CheckSlots(tb testing.TB, client redis.UniversalClient) {
	h := &slotHook{}
	client.AddHook(h)
	tb.Cleanup(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, v := range h.bad {
			tb.Errorf("keys of several cluster slots in one script or transaction: %s", v)
		}
	})
}

type slotHook struct {
	mu  sync.Mutex
	bad []string
}

func (h *slotHook) note(what string, keys []string) {
	if redisconn.SameSlot(keys...) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.bad) < 10 {
		h.bad = append(h.bad, fmt.Sprintf("%s %v", what, keys))
	}
}

func (h *slotHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *slotHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if keys, ok := scriptKeys(cmd); ok {
			h.note(cmd.Name(), keys)
		}
		return next(ctx, cmd)
	}
}

func (h *slotHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		inTx := false
		var keys []string
		for _, cmd := range cmds {
			switch name := cmd.Name(); {
			case name == "multi":
				inTx, keys = true, nil
			case name == "exec":
				h.note("MULTI", keys)
				inTx = false
			default:
				if ks, ok := scriptKeys(cmd); ok {
					h.note(name, ks)
					if inTx {
						keys = append(keys, ks...)
					}
				} else if args := cmd.Args(); inTx && len(args) > 1 {
					if k, ok := args[1].(string); ok {
						keys = append(keys, k)
					}
				}
			}
		}
		return next(ctx, cmds)
	}
}

// scriptKeys returns the keys of an EVAL, EVALSHA or FCALL (and their _RO
// forms); ok is false for any other command.
func scriptKeys(cmd redis.Cmder) (keys []string, ok bool) {
	switch cmd.Name() {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
	default:
		return nil, false
	}
	args := cmd.Args()
	if len(args) < 3 {
		return nil, true
	}
	n, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil {
		return nil, true
	}
	for _, a := range args[3:min(3+n, len(args))] {
		keys = append(keys, fmt.Sprint(a))
	}
	return keys, true
}

// RedisServer is a redis-server of one test, on a unix socket in a
// temporary directory (no port to race for), without persistence: the
// test can stop it (a real outage for its clients) and start it again,
// empty. It never touches the shared Redis.
type RedisServer struct {
	tb   testing.TB
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// RunRedis starts a RedisServer and stops it when the test ends. Skipped
// under -short; fails if redis-server cannot start (deploy/services.sh
// installs it).
func RunRedis(tb testing.TB) *RedisServer {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs redis-server; skipped with -short")
	}
	r := &RedisServer{tb: tb, dir: tb.TempDir()}
	r.Start()
	tb.Cleanup(r.Stop)
	return r
}

// Socket is the server's unix socket.
func (r *RedisServer) Socket() string { return filepath.Join(r.dir, "redis.sock") }

// Client returns a client of the server that gives up at once on a
// stopped server (no retries, a short dial timeout); it is closed when
// the test ends.
func (r *RedisServer) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: r.Socket(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	r.tb.Cleanup(func() { c.Close() })
	return c
}

// Start starts the server (again) and returns once it accepts connections.
func (r *RedisServer) Start() {
	r.tb.Helper()
	cmd := exec.Command("redis-server", "--port", "0", "--unixsocket", r.Socket(), "--save", "", "--appendonly", "no", "--dir", r.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the test binary
	if err := cmd.Start(); err != nil {
		r.tb.Fatalf("start redis-server (deploy/services.sh installs it): %v", err)
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(r.done) }()
	Eventually(r.tb, 20*time.Second, func() error {
		c, err := net.Dial("unix", r.Socket())
		if err == nil {
			c.Close()
		}
		return err
	})
}

// Stop stops the server and waits for it to exit; its data is gone.
func (r *RedisServer) Stop() {
	if r.cmd != nil {
		r.cmd.Process.Signal(syscall.SIGTERM)
		<-r.done
		r.cmd = nil
	}
}
