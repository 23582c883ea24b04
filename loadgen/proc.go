package loadgen

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times (100 on Linux
// everywhere it matters).
const clockTicks = 100

// serverSample is what the target's /metrics (on its operators' listener)
// says of its process.
type serverSample struct {
	cpuSeconds float64
	rssBytes   float64
	heapInuse  float64
	// allocBytes, mallocs and gcCycles are the Go runtime's running
	// totals: bytes and objects allocated, collections finished.
	allocBytes, mallocs, gcCycles float64
	ok                            bool
	// ackBuckets are voiceroom_outbox_publish_latency_seconds's cumulative bucket
	// counts by path, then by upper bound (ms; the series is in seconds).
	ackBuckets map[string]map[float64]float64
}

// scrapeServer reads process_cpu_seconds_total, process_resident_memory_bytes,
// go_memstats_heap_inuse_bytes and the allocation and collection totals
// from the target's /metrics; without
// OpsURL it reads nothing (ok false).
func (b *Bench) scrapeServer(ctx context.Context) serverSample {
	if b.ops == "" {
		return serverSample{}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.ops+"/metrics", nil)
	if err != nil {
		return serverSample{}
	}
	resp, err := b.http.http.Do(req)
	if err != nil {
		return serverSample{}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return serverSample{}
	}
	s := serverSample{ackBuckets: map[string]map[float64]float64{}}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		if rest, ok := strings.CutPrefix(name, "voiceroom_outbox_publish_latency_seconds_bucket{"); ok {
			if path, le, ok := bucketLabels(rest); ok {
				if s.ackBuckets[path] == nil {
					s.ackBuckets[path] = map[float64]float64{}
				}
				s.ackBuckets[path][le] = f
			}
			continue
		}
		switch name {
		case "process_cpu_seconds_total":
			s.cpuSeconds, s.ok = f, true
		case "process_resident_memory_bytes":
			s.rssBytes = f
		case "go_memstats_heap_inuse_bytes":
			s.heapInuse = f
		case "go_memstats_alloc_bytes_total":
			s.allocBytes = f
		case "go_memstats_mallocs_total":
			s.mallocs = f
		case "go_gc_duration_seconds_count":
			s.gcCycles = f
		}
	}
	return s
}

// bucketLabels reads path and le from `path="fast",le="0.5"}`.
func bucketLabels(labels string) (path string, le float64, ok bool) {
	labels = strings.TrimSuffix(labels, "}")
	var leStr string
	for _, kv := range strings.Split(labels, ",") {
		k, v, _ := strings.Cut(kv, "=")
		v = strings.Trim(v, `"`)
		switch k {
		case "path":
			path = v
		case "le":
			leStr = v
		}
	}
	if path == "" || leStr == "" || leStr == "+Inf" {
		return "", 0, false
	}
	le, err := strconv.ParseFloat(leStr, 64)
	return path, le * 1000, err == nil // seconds on the wire, milliseconds in the report
}

// bucketQuantiles turns two readings of a cumulative histogram into the
// count between them and the upper bounds within which the q-quantiles
// fall.
func bucketQuantiles(before, after map[float64]float64, qs ...float64) (count float64, bounds []float64) {
	les := make([]float64, 0, len(after))
	for le := range after {
		les = append(les, le)
	}
	slices.Sort(les)
	if len(les) == 0 {
		return 0, nil
	}
	// Counts above the largest finite bound are unknown: the +Inf bucket
	// is skipped, so count is what the finite buckets hold.
	count = after[les[len(les)-1]] - before[les[len(les)-1]]
	for _, q := range qs {
		b := math.Inf(1)
		for _, le := range les {
			if after[le]-before[le] >= q*count {
				b = le
				break
			}
		}
		bounds = append(bounds, b)
	}
	return count, bounds
}

// scrapeAfterGC asks the target to collect garbage first (its
// /debug/pprof/heap?gc=1, when VOICEROOM_PPROF is on), so heap figures
// count live memory; gc reports whether that worked.
func (b *Bench) scrapeAfterGC(ctx context.Context) (s serverSample, gc bool) {
	if b.ops == "" {
		return serverSample{}, false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.ops+"/debug/pprof/heap?gc=1", nil)
	if err == nil {
		if resp, err := b.http.http.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			gc = resp.StatusCode == http.StatusOK
		}
	}
	return b.scrapeServer(ctx), gc
}

// mariadbPID finds the MariaDB server process: the one mariadbd (or mysqld)
// whose command line names port, else the only one. 0 when none is found.
func mariadbPID(port string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var found []int
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil {
			continue
		}
		if c := strings.TrimSpace(string(comm)); c != "mariadbd" && c != "mysqld" {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		cmdline, _ := os.ReadFile(d + "/cmdline")
		if port != "" && strings.Contains(string(cmdline), "--port="+port) {
			return pid
		}
		if !strings.Contains(string(cmdline), "--port=") || port == "3306" {
			found = append(found, pid)
		}
	}
	if len(found) >= 1 {
		return found[0]
	}
	return 0
}

// procCPUSeconds is the user+system CPU time of pid from /proc.
func procCPUSeconds(pid int) (float64, bool) {
	if pid <= 0 {
		return 0, false
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command name (which may hold spaces) start after ")".
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (utime + stime) / clockTicks, true
}

// statusCounters are the SHOW GLOBAL STATUS counters a run reads.
var statusCounters = []string{
	"Innodb_rows_inserted", "Innodb_rows_updated", "Innodb_rows_deleted", // MySQL; MariaDB 10.11 has none
	"Handler_write", "Handler_update", "Handler_delete", // rows written, both servers (temporary tables too)
	"Com_insert", "Com_update", "Com_update_multi", "Com_delete", "Com_delete_multi", "Com_select", "Com_commit", "Com_begin", "Com_rollback",
	"Com_stmt_execute", "Questions", "Innodb_data_fsyncs",
	"Innodb_os_log_written", // redo bytes
	"Bytes_received",        // bytes the server read from its clients
}

// globalStatus reads the server's counters. Global: other clients of the
// same server count too.
func globalStatus(ctx context.Context, db *sql.DB) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS")
	if err != nil {
		return nil, fmt.Errorf("show global status: %w", err)
	}
	defer rows.Close()
	want := map[string]bool{}
	for _, n := range statusCounters {
		want[n] = true
	}
	out := map[string]int64{}
	for rows.Next() {
		var name, val string
		if err := rows.Scan(&name, &val); err != nil {
			return nil, fmt.Errorf("show global status: %w", err)
		}
		if want[name] {
			n, _ := strconv.ParseInt(val, 10, 64)
			out[name] = n
		}
	}
	return out, rows.Err()
}
