package loadgen

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats.go/jetstream"
)

// Bench is one run against one target.
type Bench struct {
	cfg     Config
	db      *sql.DB
	js      jetstream.JetStream // nil: stream figures are n/a
	log     *slog.Logger
	http    *client
	ops     string       // OpsURL without a trailing slash; "" reads nothing
	dropped atomic.Int64 // open-loop arrivals that found no free client
	dbPort  string
}

// New prepares a run. db is the target's database (the outbox, command log
// and status counters are read there, users seeded there); its pool should
// allow Clients connections. js, when not nil, is a connection to the
// target's JetStream.
func New(db *sql.DB, js jetstream.JetStream, dsn string, log *slog.Logger, cfg Config) (*Bench, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("db is required")
	}
	b := &Bench{cfg: cfg, db: db, js: js, log: log, http: newClient(cfg.BaseURL, cfg.Clients+max(cfg.ListClients, 0)+8),
		ops: strings.TrimRight(cfg.OpsURL, "/"), dbPort: "3306"}
	if mc, err := mysql.ParseDSN(dsn); err == nil {
		if _, port, err := net.SplitHostPort(mc.Addr); err == nil {
			b.dbPort = port
		}
	}
	return b, nil
}

// Run sets up, measures the ceilings, loads, waits for quiet and measures
// what followed. It returns the report even when a late part failed (the
// failure is in Report.Notes).
func (b *Bench) Run(ctx context.Context) (*Report, error) {
	cfg := b.cfg
	u, _ := url.Parse(cfg.BaseURL)
	rep := &Report{Target: u.Host, Config: cfg.summary(), Started: time.Now().UTC()}
	note := func(format string, args ...any) { rep.Notes = append(rep.Notes, fmt.Sprintf(format, args...)) }

	if a := b.http.do(ctx, "GET", "/readyz", "", nil); a.code != "" {
		return nil, fmt.Errorf("target %s not ready: %s %s", cfg.BaseURL, a.code, a.message)
	}
	base, _ := b.scrapeAfterGC(ctx)
	b.log.Info("bench: setting up", "apps", cfg.Apps, "rooms", cfg.Rooms, "users", cfg.Users)
	w, err := b.setup(ctx)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	if cfg.Mix == MixGiftsPK {
		n, err := b.startBattles(ctx, w)
		if err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
		note("%d PK battles running (every load room at battle)", n)
	}
	rep.SetupSec = time.Since(rep.Started).Seconds()

	b.log.Info("bench: ceilings", "each", cfg.CeilingDuration)
	if cfg.CeilingDuration > 0 {
		hello := b.ceilingHTTP(ctx)
		rep.Ceilings.HTTPHello = &hello
		if two, err := b.ceilingTwoInsert(ctx); err != nil {
			note("two-insert ceiling: %v", err)
		} else {
			rep.Ceilings.TwoInsertTx = &two
		}
		if rate, err := b.ceilingPublish(ctx); err != nil {
			note("JetStream ceiling n/a: %v", err)
		} else {
			rep.Ceilings.JetStreamAsyncPerSec = rate
		}
	}

	var hooks *hookReceiver
	var hooksCeiling float64
	if cfg.Webhooks {
		if hooks, err = startHookReceiver(); err != nil {
			return nil, err
		}
		defer hooks.close()
		if cfg.CeilingDuration > 0 {
			if hooksCeiling, err = b.hooksCeiling(ctx, hooks); err != nil {
				note("%v", err)
			}
		}
		if err := b.registerHooks(ctx, w, hooks); err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
	}

	listOK, why := b.listAvailable(ctx, w)
	if !listOK {
		rep.ListNA = why
	}
	rec, lists := newRecorder(), newRecorder()
	var probe *listProbe
	listClients := cfg.ListClients
	if listOK {
		probe = &listProbe{}
	} else {
		b.cfg.ListClients = 0
	}

	// The load phase, with its accounting around it.
	b.log.Info("bench: load", "duration", cfg.Duration, "clients", cfg.Clients, "rate", cfg.Rate)
	status0, err := globalStatus(ctx, b.db)
	if err != nil {
		note("%v", err)
	}
	mpid := mariadbPID(b.dbPort)
	mcpu0, mok := procCPUSeconds(mpid)
	s0 := b.scrapeServer(ctx)
	var stopProfile func() error
	if cfg.Profile != nil {
		if stopProfile, err = cfg.Profile(cfg.Duration); err != nil {
			note("profile: %v", err)
		}
	}
	loadStart := time.Now()
	lctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		b.progress(lctx, loadStart, rec, lists)
	}()
	var down, up time.Time
	outageDone := make(chan struct{})
	go func() {
		defer close(outageDone)
		if cfg.WebhooksOutage > 0 {
			down, up = hooks.outage(ctx, loadStart.Add(cfg.Duration/6), cfg.WebhooksOutage)
		}
	}()
	b.load(lctx, w, rec, lists, probe)
	cancel()
	<-progressDone
	loadEnd := time.Now()
	elapsed := loadEnd.Sub(loadStart)
	s1 := b.scrapeServer(ctx)
	mcpu1, _ := procCPUSeconds(mpid)
	status1, err := globalStatus(ctx, b.db)
	if err != nil {
		note("%v", err)
	}
	if stopProfile != nil {
		if err := stopProfile(); err != nil {
			note("profile: %v", err)
		}
	}
	b.cfg.ListClients = listClients

	rep.LoadSec = elapsed.Seconds()
	rep.Commands = rec.stats(elapsed, true)
	if listOK {
		rep.List = lists.stats(elapsed, true)
	}
	if d := b.dropped.Load(); d > 0 {
		note("open loop: %d arrivals found no client free and were dropped (raise --clients)", d)
	}

	// Quiet, then what the load committed.
	quiet, err := b.waitQuiet(ctx, cfg.Apps)
	rep.QuietSec = quiet.Seconds()
	if err != nil {
		note("quiet: %v", err)
	}
	var durable int64
	q := "SELECT COUNT(*) FROM room_command_log WHERE app_code IN (?" + repeatArgs(len(cfg.Apps)-1) + ") AND created_at_ms BETWEEN ? AND ?"
	args := []any{}
	for _, a := range cfg.Apps {
		args = append(args, a)
	}
	args = append(args, loadStart.UnixMilli(), loadEnd.UnixMilli())
	if err := b.db.QueryRowContext(ctx, q, args...).Scan(&durable); err != nil {
		note("count command log: %v", err)
	}
	rep.DurableCommands = durable
	answered := rep.Commands["all"].Count
	rep.CPU = cpuFigures(s0, s1, mcpu0, mcpu1, mok, answered, durable, mpid)
	rep.MySQL = mysqlFigures(status0, status1, durable)
	mem, gc := b.scrapeAfterGC(ctx)
	rep.Memory = Memory{RSSBytes: mem.rssBytes, HeapInuseBytes: mem.heapInuse, RoomsLoaded: len(w.rooms) + len(w.probes), AfterGC: gc}
	if base.ok && mem.ok && rep.Memory.RoomsLoaded > 0 {
		rep.Memory.HeapPerRoomBytes = (mem.heapInuse - base.heapInuse) / float64(rep.Memory.RoomsLoaded)
	}

	commits, err := b.committed(ctx, cfg.Apps, loadStart, loadEnd)
	if err != nil {
		note("%v", err)
	}
	for _, path := range []string{"fast", "relay"} {
		n, q := bucketQuantiles(s0.ackBuckets[path], s1.ackBuckets[path], 0.5, 0.99, 0.999)
		if n > 0 {
			rep.ServerAck = append(rep.ServerAck, ServerAck{Path: path, Count: int64(n), P50LeMs: q[0], P99LeMs: q[1], P999LeMs: q[2]})
		}
	}
	if sa, err := b.streamAck(ctx, commits, loadStart); err != nil {
		rep.StreamAckNA = err.Error()
	} else {
		rep.StreamAck = &sa
	}
	if cfg.EmulatorURL == "" {
		rep.IMNA = "no IM emulator configured (--im-emulator)"
	} else if im, err := b.imReceipt(ctx, commits); err != nil {
		rep.IMNA = err.Error()
	} else {
		rep.IM = &im
	}
	if hooks != nil {
		<-outageDone
		wh, err := b.hooksFigures(ctx, hooks, commits, loadStart, down, up)
		wh.CeilingPerSec = hooksCeiling
		rep.Webhooks = &wh
		if err != nil {
			note("webhooks: %v", err)
		}
	} else {
		rep.WebhooksNA = "no webhook receiver (--webhooks)"
	}
	if probe != nil {
		lat, timeouts := probe.result()
		rep.ListVisible = lat
		rep.ListVisibleTimeouts = timeouts
	}
	if cfg.DrainRows > 0 {
		if d, err := b.drain(ctx); err != nil {
			note("relay drain: %v", err)
		} else {
			rep.Drain = &d
		}
	}
	return rep, nil
}

func repeatArgs(n int) string {
	s := ""
	for range n {
		s += ", ?"
	}
	return s
}

// progress prints the live line once a second until ctx ends.
func (b *Bench) progress(ctx context.Context, start time.Time, rec, lists *recorder) {
	if b.cfg.Progress == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(b.cfg.Progress)
			return
		case now := <-t.C:
			dt := now.Sub(last).Seconds()
			last = now
			n, errs, rej, p99 := rec.window()
			ln, _, _, lp99 := lists.window()
			pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			pend, err := b.pending(pctx, b.cfg.Apps)
			cancel()
			lag := fmt.Sprint(pend)
			if err != nil {
				lag = "?"
			}
			fmt.Fprintf(b.cfg.Progress, "\r%4.0fs  cmds %6.0f/s  p99 %6.1f ms  errors %d  rejected %d  outbox lag %s rows  list %5.0f/s p99 %5.1f ms  dropped %d   ",
				now.Sub(start).Seconds(), float64(n)/dt, ms(p99), errs, rej, lag, float64(ln)/dt, ms(lp99), b.dropped.Load())
		}
	}
}
