package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"

	"voiceroom/internal/testenv"
	"voiceroom/loadgen"
)

// TestBenchInProcess runs a small bench against a stack it starts in its
// own process and reads the JSON report: commands were answered, every
// committed event reached the stream, the ceilings and the drain ran.
func TestBenchInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MySQL and Redis; skipped with -short")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command(bin, "bench", "--inprocess", "--quiet", "--rooms", "20", "--users", "60", "--clients", "4",
		"--list-clients", "1", "--duration", "2s", "--ceiling-duration", "300ms", "--drain-rows", "300", "--json", out)
	mc, err := mysql.ParseDSN(testenv.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	mc.DBName = "unused" // the bench creates a fresh database on this server
	cmd.Env = append(os.Environ(), "VOICEROOM_MYSQL_DSN="+mc.FormatDSN(), "VOICEROOM_REDIS_ADDR="+testenv.RedisAddr(),
		"VOICEROOM_DATA_DIR="+t.TempDir())
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bench: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep loadgen.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, raw)
	}
	all := rep.Commands["all"]
	if all.OK == 0 || rep.DurableCommands == 0 {
		t.Fatalf("no command succeeded: %+v, durable %d", all, rep.DurableCommands)
	}
	if e := all.Errors["transport"] + all.Errors["INTERNAL"] + all.Errors["UNAVAILABLE"]; e > 0 {
		t.Errorf("%d server-side failures: %v", e, all.Errors)
	}
	if rep.StreamAck == nil || rep.StreamAck.Committed == 0 || rep.StreamAck.Missing != 0 {
		t.Errorf("commit -> stream ack = %+v (n/a: %s)", rep.StreamAck, rep.StreamAckNA)
	}
	if rep.Ceilings.HTTPHello == nil || rep.Ceilings.TwoInsertTx == nil || rep.Ceilings.JetStreamAsyncPerSec <= 0 {
		t.Errorf("ceilings missing: %+v", rep.Ceilings)
	}
	if rep.Drain == nil || rep.Drain.Rows != 300 {
		t.Errorf("drain = %+v", rep.Drain)
	}
	// Read from the stack's operators' listener: /metrics, and a GC
	// through /debug/pprof before the heap.
	if rep.CPU.VoiceroomSec <= 0 {
		t.Errorf("voiceroom CPU = %+v", rep.CPU)
	}
	if !rep.Memory.AfterGC || rep.Memory.HeapInuseBytes <= 0 {
		t.Errorf("memory = %+v, want heap figures read after a GC", rep.Memory)
	}
}
