package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is every figure of a run; its JSON is the --json file.
type Report struct {
	Target  string        `json:"target"`
	Config  ConfigSummary `json:"config"`
	Started time.Time     `json:"started"`

	SetupSec float64 `json:"setup_sec"`
	LoadSec  float64 `json:"load_sec"`
	QuietSec float64 `json:"quiet_sec"` // load end to no outbox row pending

	// Commands are per command type ("all" sums them): answered requests.
	Commands map[string]OpStats `json:"commands"`
	// DurableCommands are the command-log rows the load wrote.
	DurableCommands int64 `json:"durable_commands"`

	// StreamAck joins room_outbox.created_at_ms (the time the command was
	// applied, just before its group commit) to the stream's stored
	// timestamp: it includes the commit itself.
	StreamAck *StreamAck `json:"commit_to_stream_ack,omitempty"`
	// ServerAck is voiceroom's own voiceroom_outbox_publish_latency_seconds over the
	// load (from the commit's end), by path; quantiles are bucket bounds.
	ServerAck   []ServerAck `json:"server_commit_to_stream_ack,omitempty"`
	StreamAckNA string      `json:"commit_to_stream_ack_na,omitempty"`
	IM          *IMReceipt  `json:"commit_to_im_receipt,omitempty"`
	IMNA        string      `json:"commit_to_im_receipt_na,omitempty"`
	Webhooks    *Webhooks   `json:"webhooks,omitempty"`
	WebhooksNA  string      `json:"webhooks_na,omitempty"`
	// List is per list read ("list_hot", "list_new", "list_search", "all").
	List                map[string]OpStats `json:"list_get,omitempty"`
	ListVisible         *Latency           `json:"commit_to_list_visible,omitempty"`
	ListVisibleTimeouts int64              `json:"commit_to_list_visible_timeouts,omitempty"`
	ListNA              string             `json:"list_na,omitempty"`

	Drain  *Drain `json:"relay_drain,omitempty"`
	Memory Memory `json:"memory"`
	CPU    CPU    `json:"cpu"`
	MySQL  MySQL  `json:"mysql"`

	Ceilings Ceilings `json:"ceilings"`
	Notes    []string `json:"notes,omitempty"`
}

// ServerAck is one path's commit → ack histogram over the load.
type ServerAck struct {
	Path     string  `json:"path"`
	Count    int64   `json:"count"`
	P50LeMs  float64 `json:"p50_le_ms"`
	P99LeMs  float64 `json:"p99_le_ms"`
	P999LeMs float64 `json:"p999_le_ms"`
}

// ConfigSummary is the run's shape.
type ConfigSummary struct {
	Apps        []string `json:"apps"`
	Rooms       int      `json:"rooms"`
	Regions     int      `json:"regions_per_app"`
	Users       int      `json:"users"`
	Clients     int      `json:"clients"`
	ListClients int      `json:"list_clients"`
	Mix         string   `json:"mix"`
	Rate        float64  `json:"open_loop_rate,omitempty"`
	DurationSec float64  `json:"duration_sec"`
	Seed        int64    `json:"seed"`
}

func (c Config) summary() ConfigSummary {
	return ConfigSummary{Apps: c.Apps, Rooms: c.Rooms, Regions: c.Regions, Users: c.Users, Clients: c.Clients,
		ListClients: c.ListClients, Mix: c.Mix, Rate: c.Rate, DurationSec: c.Duration.Seconds(), Seed: c.Seed}
}

// Memory is voiceroom's at the end of the load.
type Memory struct {
	RSSBytes       float64 `json:"rss_bytes"`
	HeapInuseBytes float64 `json:"heap_inuse_bytes"`
	RoomsLoaded    int     `json:"voiceroom_rooms_loaded"`
	// HeapPerRoomBytes is the heap growth from before setup to the load's
	// end over the rooms loaded (with the users still online in them). With
	// AfterGC both readings follow a collection (the target's operators'
	// listener serves /debug/pprof); without, garbage counts too.
	HeapPerRoomBytes float64 `json:"heap_per_room_bytes"`
	AfterGC          bool    `json:"after_gc"`
}

// CPU is the load phase's CPU time.
type CPU struct {
	VoiceroomSec     float64 `json:"voiceroom_sec"`
	MariaDBSec       float64 `json:"mariadb_sec"`
	MariaDBPID       int     `json:"mariadb_pid"`
	VoiceroomPer1000 float64 `json:"voiceroom_sec_per_1000_commands"`
	MariaDBPer1000   float64 `json:"mariadb_sec_per_1000_commands"`
	// Per 1,000 durable commands (command-log rows) rather than answered ones.
	VoiceroomPer1000Durable float64 `json:"voiceroom_sec_per_1000_durable"`
	MariaDBPer1000Durable   float64 `json:"mariadb_sec_per_1000_durable"`
	// What voiceroom's Go runtime allocated over the load, per durable
	// command, and the collections it ran: the garbage collector's work
	// follows the bytes allocated.
	AllocBytesPerDurable   float64 `json:"voiceroom_alloc_bytes_per_durable"`
	AllocObjectsPerDurable float64 `json:"voiceroom_alloc_objects_per_durable"`
	GCCycles               float64 `json:"voiceroom_gc_cycles"`
	NA                     string  `json:"na,omitempty"`
}

func cpuFigures(s0, s1 serverSample, m0, m1 float64, mok bool, answered, durable int64, pid int) CPU {
	c := CPU{MariaDBPID: pid}
	if s0.ok && s1.ok {
		c.VoiceroomSec = s1.cpuSeconds - s0.cpuSeconds
	} else {
		c.NA = "voiceroom /metrics not readable (the operators' listener, --ops-url)"
	}
	if mok {
		c.MariaDBSec = m1 - m0
	} else if c.NA == "" {
		c.NA = "mariadbd not found in /proc"
	}
	if answered > 0 {
		c.VoiceroomPer1000 = c.VoiceroomSec * 1000 / float64(answered)
		c.MariaDBPer1000 = c.MariaDBSec * 1000 / float64(answered)
	}
	if durable > 0 {
		c.VoiceroomPer1000Durable = c.VoiceroomSec * 1000 / float64(durable)
		c.MariaDBPer1000Durable = c.MariaDBSec * 1000 / float64(durable)
		if s0.ok && s1.ok {
			c.AllocBytesPerDurable = (s1.allocBytes - s0.allocBytes) / float64(durable)
			c.AllocObjectsPerDurable = (s1.mallocs - s0.mallocs) / float64(durable)
		}
	}
	if s0.ok && s1.ok {
		c.GCCycles = s1.gcCycles - s0.gcCycles
	}
	return c
}

// MySQL is the server's counters over the load (global: every client of the
// server counts), per durable command.
type MySQL struct {
	Deltas              map[string]int64 `json:"status_deltas"`
	RowsWrittenPerCmd   float64          `json:"rows_written_per_durable_command"`
	StatementsPerCmd    float64          `json:"statements_per_durable_command"`     // Com_insert+update+delete+select+commit+begin
	FsyncsPerCmd        float64          `json:"fsyncs_per_durable_command"`         // Innodb_data_fsyncs
	RedoBytesPerCmd     float64          `json:"redo_bytes_per_durable_command"`     // Innodb_os_log_written
	BytesInPerCmd       float64          `json:"bytes_received_per_durable_command"` // Bytes_received
	DurableCommandCount int64            `json:"durable_commands"`
}

func mysqlFigures(a, b map[string]int64, durable int64) MySQL {
	m := MySQL{Deltas: map[string]int64{}, DurableCommandCount: durable}
	for k, v := range b {
		m.Deltas[k] = v - a[k]
	}
	if durable > 0 {
		d := m.Deltas
		m.RowsWrittenPerCmd = float64(d["Handler_write"]+d["Handler_update"]+d["Handler_delete"]) / float64(durable)
		m.StatementsPerCmd = float64(d["Com_insert"]+d["Com_update"]+d["Com_update_multi"]+d["Com_delete"]+d["Com_delete_multi"]+
			d["Com_select"]+d["Com_commit"]+d["Com_begin"]) / float64(durable)
		m.FsyncsPerCmd = float64(d["Innodb_data_fsyncs"]) / float64(durable)
		m.RedoBytesPerCmd = float64(d["Innodb_os_log_written"]) / float64(durable)
		m.BytesInPerCmd = float64(d["Bytes_received"]) / float64(durable)
	}
	return m
}

// Ceilings are the raw limits measured in the same run while the stack was
// quiet.
type Ceilings struct {
	HTTPHello            *OpStats `json:"http_hello,omitempty"`
	TwoInsertTx          *OpStats `json:"mysql_two_insert_tx,omitempty"`
	JetStreamAsyncPerSec float64  `json:"jetstream_async_publish_per_sec,omitempty"`
}

// JSON writes the report as indented JSON.
func (r *Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Table writes the readable table.
func (r *Report) Table(w io.Writer) {
	c := r.Config
	mode := c.Mix + ", closed loop"
	if c.Rate > 0 {
		mode = fmt.Sprintf("%s, open loop at %.0f/s", c.Mix, c.Rate)
	}
	fmt.Fprintf(w, "voiceroom bench: %s, %d rooms in %d regions x %d apps, %d users, %d clients (%s), %d list readers, %.0fs, seed %d\n\n",
		r.Target, c.Rooms, c.Regions, len(c.Apps), c.Users, c.Clients, mode, c.ListClients, r.LoadSec, c.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tcount\tper sec\tp50 ms\tp99 ms\tp999 ms\tmax ms\terrors\t")
	row := func(name string, s OpStats) {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t\n", name, s.Count, s.PerSec, s.P50Ms, s.P99Ms, s.P999Ms, s.MaxMs, errorList(s.Errors))
	}
	for _, k := range sortedKeys(r.Commands) {
		row(k, r.Commands[k])
	}
	for _, k := range sortedKeys(r.List) {
		row("GET "+k, r.List[k])
	}
	if r.Ceilings.HTTPHello != nil {
		row("ceiling: GET /healthz", *r.Ceilings.HTTPHello)
	}
	if r.Ceilings.TwoInsertTx != nil {
		row("ceiling: 2-insert tx", *r.Ceilings.TwoInsertTx)
	}
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	lat := func(name string, l *Latency, na, extra string) {
		switch {
		case l != nil:
			fmt.Fprintf(tw, "%s\tp50 %.1f ms\tp99 %.1f ms\tp999 %.1f ms\tmax %.1f ms\t%d samples %s\n", name, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs, l.Samples, extra)
		case na != "":
			fmt.Fprintf(tw, "%s\tn/a: %s\n", name, na)
		default:
			fmt.Fprintf(tw, "%s\tno samples %s\n", name, extra)
		}
	}
	for _, a := range r.ServerAck {
		fmt.Fprintf(tw, "commit -> stream ack (%s path, server's histogram)\tp50 <= %g ms\tp99 <= %g ms\tp999 <= %g ms\t\t%d events\n", a.Path, a.P50LeMs, a.P99LeMs, a.P999LeMs, a.Count)
	}
	if r.StreamAck != nil {
		lat("applied+commit -> stream ack", r.StreamAck.Latency, "", fmt.Sprintf("(%d committed, %d in stream, %d missing)", r.StreamAck.Committed, r.StreamAck.InStream, r.StreamAck.Missing))
	} else {
		lat("applied+commit -> stream ack", nil, r.StreamAckNA, "")
	}
	if r.IM != nil {
		lat("commit -> IM receipt", r.IM.Latency, "", fmt.Sprintf("(%d of %d sampled received, %d shown twice)", r.IM.Received, r.IM.Sampled, r.IM.Shown))
	} else {
		lat("commit -> IM receipt", nil, r.IMNA, "")
	}
	switch {
	case r.Webhooks != nil:
		r.Webhooks.table(tw, lat)
	case r.WebhooksNA != "":
		lat("commit -> webhook receipt", nil, r.WebhooksNA, "")
	}
	if r.ListNA != "" {
		fmt.Fprintf(tw, "list GET\tn/a: %s\n", r.ListNA)
		lat("commit -> visible in list", nil, r.ListNA, "")
	} else {
		lat("commit -> visible in list", r.ListVisible, "", fmt.Sprintf("(%d timeouts)", r.ListVisibleTimeouts))
	}
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if r.Drain != nil {
		fmt.Fprintf(tw, "relay drain\t%.0f rows/s\t(%d rows; %.1fs from commit to none pending)\n", r.Drain.RowsPerSec, r.Drain.Rows, r.Drain.WallSec)
	}
	if r.Ceilings.JetStreamAsyncPerSec > 0 {
		fmt.Fprintf(tw, "ceiling: JetStream async publish\t%.0f msgs/s\t\n", r.Ceilings.JetStreamAsyncPerSec)
	}
	fmt.Fprintf(tw, "durable commands\t%d\t(command-log rows; %.0f/s)\n", r.DurableCommands, float64(r.DurableCommands)/max(r.LoadSec, 1e-9))
	gc := "after GC"
	if !r.Memory.AfterGC {
		gc = "garbage included: set VOICEROOM_PPROF=true on the target, and reach its operators' listener (--ops-url), for a GC first"
	}
	fmt.Fprintf(tw, "voiceroom memory\tRSS %.1f MiB\theap in use %.1f MiB, %.1f KiB per loaded room (%d rooms, users online; %s)\n",
		r.Memory.RSSBytes/(1<<20), r.Memory.HeapInuseBytes/(1<<20), r.Memory.HeapPerRoomBytes/1024, r.Memory.RoomsLoaded, gc)
	fmt.Fprintf(tw, "CPU s per 1,000 commands\tvoiceroom %.3f\tMariaDB %.3f\t(per 1,000 durable: %.3f / %.3f; totals %.1f s / %.1f s)%s\n",
		r.CPU.VoiceroomPer1000, r.CPU.MariaDBPer1000, r.CPU.VoiceroomPer1000Durable, r.CPU.MariaDBPer1000Durable, r.CPU.VoiceroomSec, r.CPU.MariaDBSec, naSuffix(r.CPU.NA))
	if r.CPU.AllocBytesPerDurable > 0 {
		fmt.Fprintf(tw, "voiceroom allocation\t%.1f KiB per durable command\t%.0f objects; %.0f garbage collections over the load\n",
			r.CPU.AllocBytesPerDurable/1024, r.CPU.AllocObjectsPerDurable, r.CPU.GCCycles)
	}
	d := r.MySQL.Deltas
	fmt.Fprintf(tw, "MySQL per durable command\t%.2f rows written\t%.2f statements, %.2f fsyncs (rows: written %d, updated %d, deleted %d; Com_insert %d, Com_update %d, Com_select %d, Com_commit %d)\n",
		r.MySQL.RowsWrittenPerCmd, r.MySQL.StatementsPerCmd, r.MySQL.FsyncsPerCmd, d["Handler_write"], d["Handler_update"], d["Handler_delete"],
		d["Com_insert"], d["Com_update"], d["Com_select"], d["Com_commit"])
	fmt.Fprintf(tw, "MySQL bytes per durable command\t%.0f redo\t%.0f received from clients\n", r.MySQL.RedoBytesPerCmd, r.MySQL.BytesInPerCmd)
	fmt.Fprintf(tw, "quiet after load\t%.2f s\t\n", r.QuietSec)
	tw.Flush()
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func naSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " n/a: " + s
}

func errorList(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
