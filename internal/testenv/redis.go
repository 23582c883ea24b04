package testenv

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisAddr returns the Redis address tests use.
func RedisAddr() string {
	if addr := os.Getenv("VOICEROOM_TEST_REDIS_ADDR"); addr != "" {
		return addr
	}
	return "127.0.0.1:6379"
}

// NewRedis returns a client and a key prefix of the test's own. Every key under
// the prefix is deleted when the test ends. The test is skipped under -short
// and fails if Redis cannot be reached.
func NewRedis(tb testing.TB) (*redis.Client, string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs Redis; skipped with -short")
	}
	client := redis.NewClient(&redis.Options{Addr: RedisAddr()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		tb.Fatalf("redis at %s: %v (deploy/services.sh starts it)", RedisAddr(), err)
	}
	prefix := "vrt:" + randomHex(6) + ":"
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
		client.Close()
	})
	return client, prefix
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
