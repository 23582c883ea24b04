package readdb_test

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/internal/readdb"
	"voiceroom/internal/testenv"
)

// newTestRouter is a Router whose primary is a database of the test's own
// on the replica tests' source, and whose replicas are at replicaDSNs
// (without a database name: the router reads the primary's); its Run
// goes on until the test ends. Start the replicas before: the database
// reaches only the replicas that were there when it was created.
func newTestRouter(t *testing.T, reg prometheus.Registerer, replicaDSNs ...string) (*readdb.Router, *sql.DB) {
	t.Helper()
	primary, primaryDSN := testenv.NewSourceDB(t)
	m, err := readdb.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := readdb.New(readdb.Config{PrimaryDSN: primaryDSN, ReplicaDSNs: replicaDSNs, MaxLag: 2 * time.Second,
		CheckInterval: 100 * time.Millisecond, MaxOpenConns: 4}, testenv.Logger(t), m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	testenv.Start(t, r.Run)
	return r, primary
}

// readsGoTo waits until reads through db, several in a row, all reach
// the server whose @@server_id is want.
func readsGoTo(t *testing.T, db *sql.DB, want int) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		for range 8 {
			var got int
			if err := db.QueryRow("SELECT @@server_id").Scan(&got); err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("a read reached server %d, want %d", got, want)
			}
		}
		return nil
	})
}

// TestReadsFollowTheReplica runs one replica through its lives: reads go
// to it while it replicates (it has the primary's rows); to the primary
// once its SQL thread stops (lag NULL), and back when it starts again; to
// the primary while its process is stopped, and back once it is started
// and has caught up.
func TestReadsFollowTheReplica(t *testing.T) {
	rep := testenv.RunMySQLReplica(t)
	reg := prometheus.NewRegistry()
	r, primary := newTestRouter(t, reg, rep.DSN(""))
	reads := r.DB()
	primaryID := testenv.Scalar[int](t, primary, "SELECT @@server_id")
	if primaryID == rep.ServerID() {
		t.Fatalf("primary and replica share server id %d", primaryID)
	}
	testenv.Exec(t, primary, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1), (2)")
	rep.WaitFor(t)
	addr := rep.Socket()

	// Routing: the replica answers, with the primary's rows.
	readsGoTo(t, reads, rep.ServerID())
	if n := testenv.Scalar[int](t, reads, "SELECT COUNT(*) FROM t"); n != 2 {
		t.Fatalf("rows read through the router: %d, want 2", n)
	}
	if v := testenv.MustMetric(t, reg, "voiceroom_mysql_replica_fit", "replica", addr); v != 1 {
		t.Fatalf("replica_fit %v, want 1", v)
	}
	if v := testenv.MustMetric(t, reg, "voiceroom_mysql_replica_lag_seconds", "replica", addr); v != 0 {
		t.Fatalf("replica_lag_seconds %v, want 0", v)
	}

	// Lag: the SQL thread stopped makes Seconds_Behind_Master NULL.
	replicaServer := rep.ServerDB()
	testenv.Exec(t, replicaServer, "STOP SLAVE SQL_THREAD")
	readsGoTo(t, reads, primaryID)
	if v := testenv.MustMetric(t, reg, "voiceroom_mysql_replica_fit", "replica", addr); v != 0 {
		t.Fatalf("replica_fit %v with its SQL thread stopped, want 0", v)
	}
	if v := testenv.MustMetric(t, reg, "voiceroom_mysql_replica_lag_seconds", "replica", addr); v != -1 {
		t.Fatalf("replica_lag_seconds %v with its SQL thread stopped, want -1 (unknown)", v)
	}
	testenv.Exec(t, replicaServer, "START SLAVE SQL_THREAD")
	readsGoTo(t, reads, rep.ServerID())

	// Gone: the replica's process stopped.
	rep.Stop()
	readsGoTo(t, reads, primaryID)
	if v := testenv.MustMetric(t, reg, "voiceroom_mysql_replica_fit", "replica", addr); v != 0 {
		t.Fatalf("replica_fit %v with the replica stopped, want 0", v)
	}

	// Back: started again, it catches up on what it missed.
	testenv.Exec(t, primary, "INSERT INTO t VALUES (3)")
	rep.Start()
	rep.WaitFor(t)
	readsGoTo(t, reads, rep.ServerID())
	if n := testenv.Scalar[int](t, reads, "SELECT COUNT(*) FROM t"); n != 3 {
		t.Fatalf("rows read through the router after the replica came back: %d, want 3", n)
	}
	if v := testenv.MustMetric(t, reg, "voiceroom_mysql_read_connections_total", "server", "primary"); v == 0 {
		t.Fatal("no read connection went to the primary")
	}
}

// TestAReplicaTooFarBehindIsLeftOut delays a replica by more than the
// most lag allowed: reads stay on the primary while its
// Seconds_Behind_Master exceeds MaxLag, and the gauge shows that lag.
func TestAReplicaTooFarBehindIsLeftOut(t *testing.T) {
	rep := testenv.RunMySQLReplica(t)
	reg := prometheus.NewRegistry()
	r, primary := newTestRouter(t, reg, rep.DSN(""))
	primaryID := testenv.Scalar[int](t, primary, "SELECT @@server_id")
	rep.WaitFor(t)
	readsGoTo(t, r.DB(), rep.ServerID())

	// Delayed replication: each event is applied 60s after it was written
	// on the source, so the replica's lag grows past 2s and stays there.
	replicaServer := rep.ServerDB()
	testenv.Exec(t, replicaServer, "STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY = 60", "START SLAVE")
	testenv.Exec(t, primary, "CREATE TABLE t (id INT PRIMARY KEY)")
	testenv.Eventually(t, 30*time.Second, func() error {
		if v := testenv.MustMetric(t, reg, "voiceroom_mysql_replica_lag_seconds", "replica", rep.Socket()); v <= 2 {
			return fmt.Errorf("lag %v, want above 2", v)
		}
		return nil
	})
	readsGoTo(t, r.DB(), primaryID)
}

// TestWithoutReplicasReadsGoToThePrimary: no replica configured, the pool
// reaches the primary and Run only waits.
func TestWithoutReplicasReadsGoToThePrimary(t *testing.T) {
	r, primary := newTestRouter(t, nil)
	readsGoTo(t, r.DB(), testenv.Scalar[int](t, primary, "SELECT @@server_id"))
	if len(r.Replicas()) != 0 {
		t.Fatalf("replicas %v, want none", r.Replicas())
	}
}

// TestANonReplicaIsNeverFit: a server that replicates from nothing (the
// source itself, named as a replica) shows no status: unfit.
func TestANonReplicaIsNeverFit(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, primary := newTestRouter(t, reg, testenv.MySQLSourceDSN())
	readsGoTo(t, r.DB(), testenv.Scalar[int](t, primary, "SELECT @@server_id"))
	for addr, fit := range r.Fit() {
		if fit {
			t.Fatalf("%s is fit, want not (it is no replica)", addr)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := readdb.Config{PrimaryDSN: "root:@tcp(127.0.0.1:3306)/voiceroom"}
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		field string
		cfg   func(c *readdb.Config)
	}{
		{"PrimaryDSN", func(c *readdb.Config) { c.PrimaryDSN = "root:@tcp(127.0.0.1:3306)/" }},
		{"ReplicaDSNs", func(c *readdb.Config) { c.ReplicaDSNs = []string{"not a dsn"} }},
		{"ReplicaDSNs", func(c *readdb.Config) { c.ReplicaDSNs = make([]string, readdb.MaxReplicas+1) }},
		{"MaxLag", func(c *readdb.Config) { c.MaxLag = time.Millisecond }},
		{"MaxLag", func(c *readdb.Config) { c.MaxLag = 2 * time.Hour }},
		{"CheckInterval", func(c *readdb.Config) { c.CheckInterval = time.Millisecond }},
		{"MaxOpenConns", func(c *readdb.Config) { c.MaxOpenConns = 5000 }},
	} {
		c := good
		tc.cfg(&c)
		err := c.Validate()
		if !errors.Is(err, readdb.ErrInvalidConfig) || apperr.ConfigFieldOf(err) != tc.field {
			t.Errorf("%+v: got %v, want an error naming %s", c, err, tc.field)
		}
	}
}

// TestLabelNamesNoPassword: a replica is named by its address alone.
func TestLabelNamesNoPassword(t *testing.T) {
	r, err := readdb.New(readdb.Config{PrimaryDSN: "root:@tcp(127.0.0.1:3306)/voiceroom",
		ReplicaDSNs: []string{"reader:s3cret@tcp(10.0.0.7:3306)/voiceroom"}}, testenv.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := strings.Join(r.Replicas(), ","); got != "10.0.0.7:3306" {
		t.Fatalf("replicas %q, want 10.0.0.7:3306", got)
	}
}
