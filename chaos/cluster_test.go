//go:build chaos

package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// mode is how long and how far the suite goes (VOICEROOM_CHAOS).
type mode struct {
	full bool
	// load runs before a fault and after it ends.
	load time.Duration
	// fault is how long a service stays down or failing.
	fault time.Duration
	// quiet bounds the wait for the outbox to drain after a fault.
	quiet time.Duration
}

func chaosMode(tb testing.TB) mode {
	switch v := os.Getenv("VOICEROOM_CHAOS"); v {
	case "", "short":
		return mode{load: 3 * time.Second, fault: 3 * time.Second, quiet: 60 * time.Second}
	case "full":
		return mode{full: true, load: 8 * time.Second, fault: 10 * time.Second, quiet: 120 * time.Second}
	default:
		tb.Fatalf("VOICEROOM_CHAOS=%q: want short or full", v)
		return mode{}
	}
}

// freePort returns a free loopback port.
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// buildBinary builds voiceroom into the test's temp dir.
func buildBinary(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "voiceroom")
	out, err := exec.Command("go", "build", "-o", bin, "voiceroom/cmd/voiceroom").CombinedOutput()
	if err != nil {
		tb.Fatalf("build voiceroom: %v\n%s", err, out)
	}
	return bin
}

// proc is one voiceroom serve process of the cluster.
type proc struct {
	name string
	bin  string
	env  []string
	url  string
	ops  string // its operators' listener (/metrics), "" when off
	log  string // its output file

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// start launches the process and waits until it is ready.
func (p *proc) start(tb testing.TB) {
	tb.Helper()
	p.launch(tb)
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	waitAnswers(tb, p.name, p.url+"/readyz", done, p.tail)
}

// waitAnswers waits until GET url answers 200, and fails the test if the
// process behind it exits first (done), with the tail of its output.
func waitAnswers(tb testing.TB, name, url string, done <-chan struct{}, output func() string) {
	tb.Helper()
	testenv.Eventually(tb, 60*time.Second, func() error {
		select {
		case <-done:
			tb.Fatalf("%s exited at start:\n%s", name, output())
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: GET %s: %d", name, url, resp.StatusCode)
		}
		return nil
	})
}

// exited reports whether the process launched last has exited.
func (p *proc) exited() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// tail returns the end of the process's output.
func (p *proc) tail() string { return fileTail(p.log) }

// fileTail returns the end of a process's output file.
func fileTail(path string) string {
	out, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(output unreadable: %v)", err)
	}
	return tail(string(out), 2000)
}

// launch starts the process and returns at once.
func (p *proc) launch(tb testing.TB) {
	tb.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(p.bin, "serve")
	dieWithTest(cmd)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		tb.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		f.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
}

// signal sends sig and waits for the exit.
func (p *proc) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// pause stops the process (SIGSTOP) and returns at once; resume (SIGCONT)
// lets it run on. A paused process keeps its sockets open and its clocks
// run on: it finds on resume that time passed.
func (p *proc) pause(tb testing.TB)  { p.kill(tb, syscall.SIGSTOP) }
func (p *proc) resume(tb testing.TB) { p.kill(tb, syscall.SIGCONT) }

// kill sends sig to the running process without waiting for anything.
func (p *proc) kill(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		tb.Fatalf("%s: %v to a process never started", p.name, sig)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("%s: %v: %v", p.name, sig, err)
	}
}

// natsHost is the JetStream server the processes share, hosted by the test
// so that restarting it is restarting the whole server.
type natsHost struct {
	addr, dir string
	srv       *bus.Server
}

func (n *natsHost) start(tb testing.TB) {
	tb.Helper()
	var err error
	testenv.Eventually(tb, 20*time.Second, func() error {
		n.srv, err = bus.RunEmbedded(bus.EmbeddedConfig{Listen: n.addr, StoreDir: n.dir}, slog.New(slog.DiscardHandler))
		return err
	})
}

func (n *natsHost) stop() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

// redisServer is a redis-server of the suite's own: stopping it must never
// touch the shared one.
type redisServer struct {
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (r *redisServer) start(tb testing.TB) {
	tb.Helper()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir)
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start redis-server (is it installed?): %v", err)
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(r.done) }()
	testenv.Eventually(tb, 20*time.Second, func() error {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.port))
		if err == nil {
			c.Close()
		}
		return err
	})
}

func (r *redisServer) stop() {
	if r.cmd != nil {
		r.cmd.Process.Signal(syscall.SIGTERM)
		<-r.done
		r.cmd = nil
	}
}

// mariaServer is a MariaDB of the suite's own (full mode), so that
// restarting it never touches the shared one.
type mariaServer struct {
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (m *mariaServer) install(tb testing.TB) {
	tb.Helper()
	// Its own temporary directory: a MariaDB server deletes every "#sql"
	// file in it when it starts, in /tmp those of the shared server.
	if err := os.MkdirAll(filepath.Join(m.dir, "tmp"), 0o700); err != nil {
		tb.Fatal(err)
	}
	install := exec.Command("mariadb-install-db", "--no-defaults", "--user=root", "--datadir="+filepath.Join(m.dir, "data"),
		"--auth-root-authentication-method=normal", "--skip-test-db")
	install.Env = append(os.Environ(), "TMPDIR="+filepath.Join(m.dir, "tmp"))
	out, err := install.CombinedOutput()
	if err != nil {
		tb.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
}

func (m *mariaServer) start(tb testing.TB) {
	tb.Helper()
	logf, err := os.OpenFile(filepath.Join(m.dir, "mariadbd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("mariadbd", "--no-defaults", "--user=root", "--datadir="+filepath.Join(m.dir, "data"),
		"--port="+strconv.Itoa(m.port), "--bind-address=127.0.0.1", "--socket="+filepath.Join(m.dir, "mysqld.sock"),
		"--tmpdir="+filepath.Join(m.dir, "tmp"),
		"--pid-file="+filepath.Join(m.dir, "mysqld.pid"), "--skip-grant-tables", "--skip-name-resolve",
		"--innodb-buffer-pool-size=64M", "--innodb-log-file-size=48M", "--max-connections=500")
	dieWithTest(cmd)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		tb.Fatalf("start mariadbd: %v", err)
	}
	m.cmd, m.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(m.done) }()
	dsn := fmt.Sprintf("root:@tcp(127.0.0.1:%d)/", m.port)
	testenv.Eventually(tb, 60*time.Second, func() error {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.Ping()
	})
}

func (m *mariaServer) stop() {
	if m.cmd != nil {
		m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(60 * time.Second):
			m.cmd.Process.Kill()
			<-m.done
		}
		m.cmd = nil
	}
}

// cluster is the system under test.
type cluster struct {
	mode     mode
	secret   string
	dsn      string // with the database
	db       *sql.DB
	nats     *natsHost
	redis    *redisServer
	maria    *mariaServer // nil in short mode
	emu      *emulator    // nil when the build has no IM emulator
	emuWhy   string       // why emu is nil
	hooks    *hooks       // the app's webhook receiver
	api      *proc        // api, rooms
	rooms2   *proc        // rooms only
	rooms3   *proc        // rooms only
	relay    *proc        // relay only
	bridge   *proc        // imbridge
	proj     *proc        // projector
	webhooks *proc        // webhooks
	activity *proc        // activity (scoring and settlement)
	// activity2 is a second activity process, started by scenario 13:
	// the one that takes a settlement over.
	activity2 *proc
	nc        *nats.Conn
	js        jetstream.JetStream
}

// newCluster starts everything and stops it when the test ends.
func newCluster(t *testing.T, m mode) *cluster {
	t.Helper()
	c := &cluster{mode: m, secret: "chaos-suite-secret-0123456789"}
	tmp := t.TempDir()
	bin := buildBinary(t)

	// The database: the shared server (short) or one of our own (full).
	server := testenv.MySQLDSN()
	if m.full {
		c.maria = &mariaServer{port: freePort(t), dir: filepath.Join(tmp, "mariadb")}
		mkdir(t, c.maria.dir)
		c.maria.install(t)
		c.maria.start(t)
		t.Cleanup(c.maria.stop)
		server = fmt.Sprintf("root:@tcp(127.0.0.1:%d)/", c.maria.port)
	}
	mc, err := mysql.ParseDSN(server)
	if err != nil {
		t.Fatal(err)
	}
	mc.DBName = fmt.Sprintf("vrt_chaos_%d", time.Now().UnixNano())
	mc.ParseTime = false
	admin, err := sql.Open("mysql", server)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec("CREATE DATABASE `" + mc.DBName + "`"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE IF EXISTS `" + mc.DBName + "`"); err != nil {
			t.Errorf("drop database: %v", err)
		}
		admin.Close()
	})
	c.dsn = mc.FormatDSN()

	c.nats = &natsHost{addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), dir: filepath.Join(tmp, "jetstream")}
	c.nats.start(t)
	t.Cleanup(c.nats.stop)
	c.redis = &redisServer{port: freePort(t), dir: filepath.Join(tmp, "redis")}
	mkdir(t, c.redis.dir)
	c.redis.start(t)
	t.Cleanup(c.redis.stop)

	c.emu, c.emuWhy = startEmulator(t, bin, tmp)
	common := []string{
		"VOICEROOM_MYSQL_DSN=" + c.dsn,
		"VOICEROOM_NATS_URL=nats://" + c.nats.addr,
		fmt.Sprintf("VOICEROOM_REDIS_ADDR=127.0.0.1:%d", c.redis.port),
		"VOICEROOM_JWT_SECRET=" + c.secret,
		// The load signs every app's tokens with the one secret: the
		// development mode, not what this suite is about.
		"VOICEROOM_DEV_SINGLE_SECRET=true",
		"VOICEROOM_APPS_SECRET_KEY=" + strings.Repeat("a5", 32), // every api process opens the keys another stored
		"VOICEROOM_HTTP_RATE_PER_USER=1000",
		"VOICEROOM_HTTP_RATE_BURST=1000",
		"VOICEROOM_OUTBOX_POLL_INTERVAL=200ms",
		"VOICEROOM_SHUTDOWN_TIMEOUT=10s",
		"VOICEROOM_HTTP_SHUTDOWN_TIMEOUT=5s",
		"VOICEROOM_LOG_FORMAT=text",
		"VOICEROOM_LOG_LEVEL=info",
		"VOICEROOM_STREAM_MAX_AGE=2h",
		"VOICEROOM_OPS_ADDR=", // six processes on one host: 127.0.0.1:9090 would clash
		fmt.Sprintf("VOICEROOM_ROOMS_PARTITIONS=%d", partitions),
		// A short lease keeps the rooms-node scenarios short: a dead or
		// paused node's partitions move after about 2 s, not 5.
		"VOICEROOM_ROOMS_LEASE_TTL=" + leaseTTL.String(),
	}
	if c.emu != nil {
		common = append(common, c.emu.env()...)
	}
	// The app's webhook receiver is on this host, over http.
	c.hooks = startHooks(t)
	common = append(common,
		"VOICEROOM_WEBHOOKS_ALLOW_HTTP=true",
		"VOICEROOM_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES=true",
		"VOICEROOM_WEBHOOKS_SECRET_KEY="+strings.Repeat("c4", 32), // every process opens the secrets the api sealed
	)
	mk := func(name, roles string) *proc {
		port := freePort(t)
		dir := filepath.Join(tmp, name)
		mkdir(t, dir)
		p := &proc{name: name, bin: bin, url: fmt.Sprintf("http://127.0.0.1:%d", port), log: filepath.Join(tmp, name+".log"),
			env: append(append([]string{}, common...), "VOICEROOM_ROLES="+roles, "VOICEROOM_NODE_ID="+name,
				fmt.Sprintf("VOICEROOM_HTTP_ADDR=127.0.0.1:%d", port), "VOICEROOM_DATA_DIR="+dir)}
		t.Cleanup(func() {
			p.signal(t, syscall.SIGKILL)
			if t.Failed() {
				if b, err := os.ReadFile(p.log); err == nil {
					t.Logf("%s output (tail):\n%s", name, tail(string(b), 4000))
					keepLog(t, name+".log", b)
				}
			}
		})
		return p
	}
	// The rooms nodes and the webhooks process get an operators' listener
	// each, on a port of their own: the suite reads their
	// voiceroom_cluster_* and voiceroom_webhooks_* series.
	mkOps := func(name, roles string) *proc {
		p := mk(name, roles)
		port := freePort(t)
		p.ops = fmt.Sprintf("http://127.0.0.1:%d", port)
		p.env = append(p.env, fmt.Sprintf("VOICEROOM_OPS_ADDR=127.0.0.1:%d", port)) // the last value counts
		return p
	}
	c.api = mkOps("api-rooms", "api,rooms")
	c.api.start(t) // migrates first
	// Two rooms-only nodes: the rooms role on three processes, which the
	// api process routes to over NATS.
	c.rooms2 = mkOps("rooms-2", "rooms")
	c.rooms2.start(t)
	c.rooms3 = mkOps("rooms-3", "rooms")
	c.rooms3.start(t)
	c.relay = mk("relay", "relay")
	// Small batches: a backlog takes many of them, so a kill lands mid-way.
	c.relay.env = append(c.relay.env, fmt.Sprintf("VOICEROOM_OUTBOX_BATCH_SIZE=%d", relayBatchSize))
	c.relay.start(t)
	// The sinks run apart, so that killing the projector is not also
	// killing the bridge (whose record of accepted events is in memory: a
	// killed bridge may show an event twice, see imbridge/doc.go).
	c.bridge = mk("imbridge", "imbridge")
	c.bridge.start(t)
	c.proj = mk("projector", "projector")
	c.proj.start(t)
	// A short delivery lease: a killed deliverer's successor takes over
	// after about 2 s, not 15.
	c.webhooks = mkOps("webhooks", "webhooks")
	c.webhooks.env = append(c.webhooks.env, "VOICEROOM_WEBHOOKS_LEASE_TTL="+leaseTTL.String())
	c.webhooks.start(t)
	// The activity role on a process of its own (scenario 12 kills it),
	// and a second one for scenario 13. A short grace and lease keep the
	// settlement scenario short; a short ack wait brings what a killed
	// process held back within seconds.
	mkActivity := func(name string) *proc {
		p := mkOps(name, "activity")
		p.env = append(p.env, "VOICEROOM_ACTIVITY_SETTLE_GRACE=1s", "VOICEROOM_ACTIVITY_SETTLE_LEASE="+leaseTTL.String(),
			"VOICEROOM_ACTIVITY_ACK_WAIT=5s")
		return p
	}
	c.activity = mkActivity("activity")
	c.activity.start(t)
	c.activity2 = mkActivity("activity-2")

	if c.db, err = sql.Open("mysql", c.dsn); err != nil {
		t.Fatal(err)
	}
	c.db.SetMaxOpenConns(16)
	t.Cleanup(func() { c.db.Close() })
	if c.nc, err = nats.Connect("nats://"+c.nats.addr, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.nc.Close)
	if c.js, err = jetstream.New(c.nc); err != nil {
		t.Fatal(err)
	}
	c.waitRoomsNodes(t)
	return c
}

func mkdir(tb testing.TB, dir string) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
}

// keptLogs is where a failed run's process logs are copied whole (the
// test's temporary directory goes with it); made on first use.
var keptLogs = sync.OnceValues(func() (string, error) { return os.MkdirTemp("", "voiceroom-chaos-logs-") })

// keepLog copies a failed run's process log to keptLogs.
func keepLog(t *testing.T, name string, b []byte) {
	dir, err := keptLogs()
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	if err != nil {
		t.Logf("keep %s: %v", name, err)
		return
	}
	t.Logf("%s kept whole in %s", name, dir)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// killMySQLConnections KILLs every connection to the suite's database but
// the caller's.
func (c *cluster) killMySQLConnections(ctx context.Context) (int, error) {
	mc, err := mysql.ParseDSN(c.dsn)
	if err != nil {
		return 0, err
	}
	rows, err := c.db.QueryContext(ctx, "SELECT id FROM information_schema.PROCESSLIST WHERE db = ? AND id <> CONNECTION_ID()", mc.DBName)
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	if err := closeRows(rows); err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		if _, err := c.db.ExecContext(ctx, "KILL "+strconv.FormatInt(id, 10)); err == nil {
			n++
		} else if !strings.Contains(err.Error(), "Unknown thread") {
			return n, err
		}
	}
	return n, nil
}

// dieWithTest makes cmd's process die with the test process, so a killed
// or timed-out suite leaves no servers behind.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
