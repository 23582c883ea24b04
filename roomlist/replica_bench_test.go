package roomlist_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"voiceroom/internal/readdb"
	"voiceroom/internal/testenv"
	"voiceroom/roomlist"
)

// BenchmarkListMySQLReplica measures the list's MySQL path (Redis
// stopped) with its reads on the primary, then on a replica (package
// readdb), and the CPU each server's process used meanwhile: the
// MariaDB source and replica deploy/services.sh starts (127.0.0.1:3307,
// 3308), 100,000 rooms over 20 regions of 2 apps, first pages and deep
// pages (after room 900), through the list service (no HTTP). The
// ceiling, measured in the same run: bare primary-key reads of the same
// table on the primary, as many clients. VOICEROOM_BENCH_ROOMS,
// _SECONDS and _CONC size it, as BenchmarkListHTTP.
func BenchmarkListMySQLReplica(b *testing.B) {
	n := testenv.EnvInt("VOICEROOM_BENCH_ROOMS", 100000)
	secs := testenv.EnvInt("VOICEROOM_BENCH_SECONDS", 5)
	conc := testenv.EnvInt("VOICEROOM_BENCH_CONC", 64)
	apps, regionsPerApp := []string{"bencha", "benchb"}, 10
	primary, primaryDSN := testenv.NewSourceDB(b)
	primary.SetMaxOpenConns(conc + 8)
	seedBench(b, primary, apps, regionsPerApp, n, 1)
	replicaServer, err := sql.Open("mysql", testenv.MySQLPairReplicaDSN())
	if err != nil {
		b.Fatal(err)
	}
	defer replicaServer.Close()
	testenv.WaitReplicated(b, replicaServer)
	pcfg, err := mysql.ParseDSN(primaryDSN)
	if err != nil {
		b.Fatal(err)
	}
	rcfg, err := mysql.ParseDSN(testenv.MySQLPairReplicaDSN())
	if err != nil {
		b.Fatal(err)
	}
	rcfg.DBName = pcfg.DBName
	ctx := context.Background()
	down := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr(b), MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	defer down.Close()

	type target struct {
		app    string
		region int64
		deep   string
	}
	var targets []target
	for _, app := range apps {
		for r := 1; r <= regionsPerApp; r++ {
			targets = append(targets, target{app: app, region: int64(r)})
		}
	}
	for _, mode := range []string{"ceiling-pk-read", "primary", "replica"} {
		reads := primary
		if mode == "replica" {
			router, err := readdb.New(readdb.Config{PrimaryDSN: primaryDSN, ReplicaDSNs: []string{rcfg.FormatDSN()}, MaxOpenConns: conc + 8}, quiet, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer router.Close()
			rctx, stop := context.WithCancel(ctx)
			defer stop()
			go router.Run(rctx)
			testenv.Eventually(b, 30*time.Second, func() error {
				if !router.Fit()[rcfg.Addr] {
					return fmt.Errorf("replica %s not fit", rcfg.Addr)
				}
				return nil
			})
			reads = router.DB()
		}
		cfg := roomlist.Config{CursorSecret: testSecret}
		lister, err := roomlist.NewLister(primary, newTestMirror(b, primary, down, "bench:"), cfg, quiet, nil)
		if err != nil {
			b.Fatal(err)
		}
		lister.SetReads(reads)
		for _, depth := range []string{"first", "deep"} {
			if mode == "ceiling-pk-read" && depth == "deep" {
				continue
			}
			if depth == "deep" {
				for i := range targets {
					cursor := ""
					for range 18 { // 18 pages of 50: past room 900
						p, err := lister.List(ctx, roomlist.ListRequest{AppCode: targets[i].app, RegionID: targets[i].region, Limit: 50, Cursor: cursor})
						if err != nil || p.NextCursor == "" {
							b.Fatalf("walk: %v", err)
						}
						cursor = p.NextCursor
					}
					targets[i].deep = cursor
				}
			}
			b.Run(mode+"/"+depth, func(b *testing.B) {
				var next, errs atomic.Int64
				lats := make([][]time.Duration, conc)
				p0, r0 := testenv.ServerCPU(b, primary), testenv.ServerCPU(b, replicaServer)
				deadline := time.Now().Add(time.Duration(secs) * time.Second)
				start := time.Now()
				var wg sync.WaitGroup
				for w := range conc {
					wg.Go(func() {
						for time.Now().Before(deadline) {
							i := int(next.Add(1))
							t := targets[i%len(targets)]
							t0 := time.Now()
							var err error
							if mode == "ceiling-pk-read" {
								var one int
								err = primary.QueryRowContext(ctx, `SELECT 1 FROM room_list_entries WHERE app_code = ? AND room_id = ?`,
									t.app, fmt.Sprintf("%s_%08d", t.app, i%n/len(apps)*len(apps)+slices.Index(apps, t.app))).Scan(&one)
							} else {
								req := roomlist.ListRequest{AppCode: t.app, RegionID: t.region, Limit: 20}
								if depth == "deep" {
									req.Limit, req.Cursor = 50, t.deep
								}
								_, err = lister.List(ctx, req)
							}
							lats[w] = append(lats[w], time.Since(t0))
							if err != nil {
								errs.Add(1)
							}
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				pCPU, rCPU := testenv.ServerCPU(b, primary)-p0, testenv.ServerCPU(b, replicaServer)-r0
				all := slices.Concat(lats...)
				slices.Sort(all)
				if e := errs.Load(); e > 0 {
					b.Errorf("%d failed reads", e)
				}
				b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
				b.ReportMetric(testenv.Millis(testenv.Percentile(all, 0.99)), "p99_ms")
				b.ReportMetric(pCPU.Seconds(), "primary_cpu_s")
				b.ReportMetric(rCPU.Seconds(), "replica_cpu_s")
				b.ReportMetric(float64(pCPU.Microseconds())/float64(len(all)), "primary_cpu_us/req")
				b.ReportMetric(float64(rCPU.Microseconds())/float64(len(all)), "replica_cpu_us/req")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
