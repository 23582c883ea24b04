package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"voiceroom/internal/testenv"
	"voiceroom/loadgen"
)

// TestBenchInProcess runs a small bench against a stack it starts in its
// own process and reads the JSON report: commands were answered, every
// committed event reached the stream, the ceilings and the drain ran.
func TestBenchInProcess(t *testing.T) {
	rep := runBenchInProcess(t, "--drain-rows", "300")
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
	if rep.CPU.AllocBytesPerDurable <= 0 || rep.CPU.AllocObjectsPerDurable <= 0 || rep.CPU.GCCycles <= 0 {
		t.Errorf("voiceroom allocation = %+v, want bytes, objects and collections", rep.CPU)
	}
	if !rep.Memory.AfterGC || rep.Memory.HeapInuseBytes <= 0 {
		t.Errorf("memory = %+v, want heap figures read after a GC", rep.Memory)
	}
}

// TestBenchWebhooks runs the bench's webhook receiver with an outage in
// the middle of the load: every event of the load reaches it, verified and
// in order per room, and the backlog the outage left is measured.
func TestBenchWebhooks(t *testing.T) {
	rep := runBenchInProcess(t, "--duration", "6s", "--webhooks", "--webhooks-outage", "2s", "--drain-rows", "0")
	w := rep.Webhooks
	if w == nil {
		t.Fatalf("no webhook figures (n/a: %s); notes %v", rep.WebhooksNA, rep.Notes)
	}
	if w.Committed == 0 || w.Received != w.Committed || w.OutOfOrder != 0 || w.Unverified != 0 {
		t.Errorf("webhooks = %+v, want every committed event received, in order, verified", w)
	}
	if w.Latency == nil || w.Deliveries == 0 || w.CeilingPerSec <= 0 {
		t.Errorf("webhooks = %+v, want a latency, deliveries and the receiver's ceiling", w)
	}
	if o := w.Outage; o == nil || o.DownSec < 1.9 || o.Backlog == 0 {
		t.Errorf("outage = %+v, want the receiver down 2s with a backlog", w.Outage)
	}
	if rep.Drain != nil {
		t.Errorf("--drain-rows 0 ran the drain: %+v", rep.Drain)
	}
}

// TestBenchHostsMix runs the hosts mix: every hosts' command is sent,
// answered OK at least once, and none fails on the server's side or finds
// its route missing.
func TestBenchHostsMix(t *testing.T) {
	rep := runBenchInProcess(t, "--mix", "hosts", "--duration", "4s", "--drain-rows", "100")
	for _, op := range []string{"mic_request", "mic_cancel", "mic_approve", "mic_reject", "mic_invite", "mic_accept", "mic_decline",
		"self_mute", "seat_mute", "room_info", "chat_mute", "admin_add", "admin_remove", "mic_up", "mic_down", "join", "leave", "heartbeat"} {
		if s := rep.Commands[op]; s.OK == 0 {
			t.Errorf("%s: none answered OK: %+v", op, s)
		}
	}
	for op, s := range rep.Commands {
		for code, n := range s.Errors {
			if code == "transport" || code == "INTERNAL" || code == "UNAVAILABLE" || strings.HasPrefix(code, "HTTP_") {
				t.Errorf("%s: %d answered %s", op, n, code)
			}
		}
	}
}

// runBenchInProcess runs voiceroom bench --inprocess, small, with args
// added, and returns its report after checking that commands succeeded,
// none failed on the server's side and every committed event reached the
// stream.
func runBenchInProcess(t *testing.T, args ...string) loadgen.Report {
	t.Helper()
	if testing.Short() {
		t.Skip("needs MySQL and Redis; skipped with -short")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bench.json")
	args = append([]string{"bench", "--inprocess", "--quiet", "--rooms", "20", "--users", "60", "--clients", "4",
		"--list-clients", "1", "--duration", "2s", "--ceiling-duration", "300ms", "--json", out}, args...)
	cmd := exec.Command(bin, args...)
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
	return rep
}
