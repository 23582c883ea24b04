package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQLSourceDSN is the server DSN (no database) of the MariaDB source
// deploy/services.sh starts for the replica tests, with its binary log on:
// VOICEROOM_TEST_MYSQL_SOURCE_DSN, default root:@tcp(127.0.0.1:3307)/.
func MySQLSourceDSN() string {
	if dsn := os.Getenv("VOICEROOM_TEST_MYSQL_SOURCE_DSN"); dsn != "" {
		return dsn
	}
	return "root:@tcp(127.0.0.1:3307)/"
}

// MySQLPairReplicaDSN is the server DSN of the source's replica that
// deploy/services.sh starts: VOICEROOM_TEST_MYSQL_REPLICA_DSN, default
// root:@tcp(127.0.0.1:3308)/.
func MySQLPairReplicaDSN() string {
	if dsn := os.Getenv("VOICEROOM_TEST_MYSQL_REPLICA_DSN"); dsn != "" {
		return dsn
	}
	return "root:@tcp(127.0.0.1:3308)/"
}

// NewSourceDB is NewDBWithDSN on the replica tests' source
// (MySQLSourceDSN): the database, its tables and rows reach the source's
// replicas.
func NewSourceDB(tb testing.TB) (*sql.DB, string) {
	tb.Helper()
	return newDBOn(tb, MySQLSourceDSN(), "VOICEROOM_TEST_MYSQL_SOURCE_DSN")
}

// MySQLReplica is a MariaDB replica of the replica tests' source, of one
// test: its own data directory and a unix socket (no port to race for).
// It replicates what the source writes after RunMySQLReplica; the test
// can stop it (a real outage) and start it again, when it catches up.
type MySQLReplica struct {
	tb       testing.TB
	dir      string
	serverID int
	cmd      *exec.Cmd
	done     chan struct{}
}

// RunMySQLReplica initialises a replica, starts it replicating from the
// source's current position and stops it when the test ends. Skipped
// under -short; fails when the source or mariadbd is missing
// (deploy/services.sh starts the source and installs MariaDB).
func RunMySQLReplica(tb testing.TB) *MySQLReplica {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs MariaDB; skipped with -short")
	}
	// Not tb.TempDir: its parents are closed to other users, and a unix
	// socket's path must stay short.
	dir, err := os.MkdirTemp("", "vr-replica-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	r := &MySQLReplica{tb: tb, dir: dir, serverID: 10_000 + rand.IntN(1_000_000)}
	if err := os.Mkdir(r.tmpDir(), 0o700); err != nil {
		tb.Fatal(err)
	}
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+r.dataDir(),
		"--auth-root-authentication-method=normal", "--skip-test-db")
	install.Env = append(os.Environ(), "TMPDIR="+r.tmpDir()) // its bootstrap server's, see tmpDir
	if os.Getuid() == 0 {
		install.Args = append(install.Args, "--user=root")
	}
	if out, err := install.CombinedOutput(); err != nil {
		tb.Fatalf("mariadb-install-db (deploy/services.sh installs MariaDB): %v\n%s", err, out)
	}
	r.Start()
	tb.Cleanup(r.Stop)

	src := r.sourceDB()
	pos := Scalar[string](tb, src, "SELECT @@gtid_binlog_pos")
	scfg, err := mysql.ParseDSN(MySQLSourceDSN())
	if err != nil {
		tb.Fatalf("VOICEROOM_TEST_MYSQL_SOURCE_DSN: %v", err)
	}
	host, port := splitAddr(tb, scfg.Addr)
	db := r.ServerDB()
	Exec(tb, db,
		"SET GLOBAL gtid_slave_pos = '"+pos+"'",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%s, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
			host, port, scfg.User, scfg.Passwd),
		"START SLAVE")
	return r
}

func (r *MySQLReplica) dataDir() string { return filepath.Join(r.dir, "data") }

// tmpDir is the replica's own temporary directory. A MariaDB server
// deletes every "#sql" file in its temporary directory when it starts:
// in the shared /tmp, those of the statements running on the shared
// server at that moment, which then fail.
func (r *MySQLReplica) tmpDir() string { return filepath.Join(r.dir, "tmp") }

// Socket is the replica's unix socket.
func (r *MySQLReplica) Socket() string { return filepath.Join(r.dir, "mysqld.sock") }

// ServerID is the replica's @@server_id.
func (r *MySQLReplica) ServerID() int { return r.serverID }

// DSN is the replica's DSN for database name.
func (r *MySQLReplica) DSN(name string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "unix", r.Socket(), name
	return cfg.FormatDSN()
}

// ServerDB is a pool on the replica (no database), closed when the test
// ends; it gives up at once while the replica is stopped.
func (r *MySQLReplica) ServerDB() *sql.DB {
	db, err := sql.Open("mysql", r.DSN("")+"?timeout=2s")
	if err != nil {
		r.tb.Fatal(err)
	}
	r.tb.Cleanup(func() { db.Close() })
	return db
}

func (r *MySQLReplica) sourceDB() *sql.DB {
	db, err := sql.Open("mysql", MySQLSourceDSN())
	if err != nil {
		r.tb.Fatalf("VOICEROOM_TEST_MYSQL_SOURCE_DSN: %v", err)
	}
	r.tb.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		r.tb.Fatalf("the replica tests' MariaDB source %s: %v (deploy/services.sh starts it)", MySQLSourceDSN(), err)
	}
	return db
}

// Start starts the replica (again) and returns once it answers; a
// restarted replica resumes replicating where it stopped.
func (r *MySQLReplica) Start() {
	r.tb.Helper()
	daemon, err := exec.LookPath("mariadbd")
	if err != nil {
		daemon = "/usr/sbin/mariadbd"
	}
	cmd := exec.Command(daemon, "--no-defaults", "--datadir="+r.dataDir(), "--skip-networking",
		"--socket="+r.Socket(), "--tmpdir="+r.tmpDir(), "--pid-file="+filepath.Join(r.dir, "mysqld.pid"),
		"--log-error="+filepath.Join(r.dir, "error.log"), fmt.Sprintf("--server-id=%d", r.serverID),
		"--skip-log-bin", "--innodb-buffer-pool-size=32M")
	if os.Getuid() == 0 {
		cmd.Args = append(cmd.Args, "--user=root") // stays root: the death signal below holds
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the test binary
	if err := cmd.Start(); err != nil {
		r.tb.Fatalf("start mariadbd (deploy/services.sh installs MariaDB): %v", err)
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(r.done) }()
	db, err := sql.Open("mysql", r.DSN("")+"?timeout=1s")
	if err != nil {
		r.tb.Fatal(err)
	}
	defer db.Close()
	Eventually(r.tb, 60*time.Second, func() error {
		select {
		case <-r.done:
			log, _ := os.ReadFile(filepath.Join(r.dir, "error.log"))
			r.tb.Fatalf("mariadbd exited:\n%s", log)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return db.PingContext(ctx)
	})
}

// Stop stops the replica and waits for it to exit; its data stays.
func (r *MySQLReplica) Stop() {
	if r.cmd != nil {
		r.cmd.Process.Signal(syscall.SIGTERM)
		<-r.done
		r.cmd = nil
	}
}

// WaitFor waits until the replica has applied everything the source had
// written when WaitFor was called.
func (r *MySQLReplica) WaitFor(tb testing.TB) {
	tb.Helper()
	WaitReplicated(tb, r.ServerDB())
}

// WaitReplicated waits until the replica tests' source's replica that
// replica reaches has applied everything the source had written when
// WaitReplicated was called.
func WaitReplicated(tb testing.TB, replica *sql.DB) {
	tb.Helper()
	src, err := sql.Open("mysql", MySQLSourceDSN())
	if err != nil {
		tb.Fatalf("VOICEROOM_TEST_MYSQL_SOURCE_DSN: %v", err)
	}
	defer src.Close()
	pos := Scalar[string](tb, src, "SELECT @@gtid_binlog_pos")
	var ok int
	if err := replica.QueryRow("SELECT MASTER_GTID_WAIT(?, 120)", pos).Scan(&ok); err != nil || ok != 0 {
		tb.Fatalf("replica did not reach the source's position %s within 120s (result %d): %v", pos, ok, err)
	}
}

// ServerCPU is the user and system CPU time the MySQL server db reaches
// has used so far: its process (by @@pid_file) must run on this machine,
// read from /proc/PID/stat. A benchmark reports the difference over its
// run, one per server.
func ServerCPU(tb testing.TB, db *sql.DB) time.Duration {
	tb.Helper()
	pidFile := Scalar[string](tb, db, "SELECT @@pid_file")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		tb.Fatalf("the server's pid file (it must run on this machine): %v", err)
	}
	stat, err := os.ReadFile("/proc/" + strings.TrimSpace(string(raw)) + "/stat")
	if err != nil {
		tb.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after it. utime and stime are fields 14 and 15, in clock ticks
	// (USER_HZ, 100 on Linux).
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
	f := strings.Fields(rest)
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("/proc stat of the server: %q", rest)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func splitAddr(tb testing.TB, addr string) (host, port string) {
	tb.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatalf("source address %q: %v", addr, err)
	}
	return host, port
}
