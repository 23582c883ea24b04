package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/apps"
	"voiceroom/authtoken"
	"voiceroom/imbridge"
	"voiceroom/imemu"
	"voiceroom/loadgen"
	"voiceroom/mysqldb"
)

// bench drives a running stack (--url) or one it starts in this process
// (--inprocess) with the load of package loadgen, prints the table and
// writes the JSON report.
func bench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c loadgen.Config
	target := fs.String("url", "", "base URL of a running voiceroom (api and rooms roles); empty needs --inprocess")
	opsURL := fs.String("ops-url", "", "base URL of the target's operators' listener, where its /metrics and /debug/pprof are read (default: --url's host on VOICEROOM_OPS_ADDR's port, 9090; with --inprocess the stack's own)")
	inprocess := fs.Bool("inprocess", false, "start a complete voiceroom in this process (embedded JetStream, the IM emulator, a fresh database on VOICEROOM_MYSQL_DSN's server, Redis of VOICEROOM_REDIS_ADDR)")
	keep := fs.Bool("keep-db", false, "with --inprocess: keep the fresh database afterwards")
	dsn := fs.String("mysql-dsn", "", "the target's database (default VOICEROOM_MYSQL_DSN)")
	natsURL := fs.String("nats", "", "the target's NATS (default VOICEROOM_NATS_URL, else nats://VOICEROOM_NATS_LISTEN)")
	apps := fs.String("apps", "bencha,benchb", "app codes the load is spread over")
	fs.IntVar(&c.Rooms, "rooms", 1000, "rooms R")
	fs.IntVar(&c.Regions, "regions", 4, "regions K per app")
	fs.IntVar(&c.Users, "users", 0, "users U joining rooms (default 4 x rooms)")
	fs.IntVar(&c.Clients, "clients", 64, "concurrent clients (and the ceilings' concurrency)")
	fs.IntVar(&c.ListClients, "list-clients", 4, "concurrent list readers (0: none)")
	fs.Float64Var(&c.Rate, "rate", 0, "open loop: commands started per second (0: closed loop)")
	fs.StringVar(&c.Mix, "mix", loadgen.MixMixed, "command mix: mixed (heartbeats, leaves, seats, gifts), joinleave (every command a durable join or leave), hosts (requests to speak, invitations, seat and self mutes, room info, chat mutes, room admins, beside joins, leaves and seats), gifts (only gifts) or gifts-pk (only gifts, every room paired into a PK battle first)")
	fs.DurationVar(&c.Duration, "duration", 30*time.Second, "load phase")
	fs.Int64Var(&c.Seed, "seed", 1, "seed of users, rooms and choices")
	fs.DurationVar(&c.CeilingDuration, "ceiling-duration", 5*time.Second, "length of each ceiling measurement")
	fs.IntVar(&c.DrainRows, "drain-rows", 20000, "outbox backlog for the relay's drain rate (0 skips)")
	fs.BoolVar(&c.Webhooks, "webhooks", false, "run a webhook receiver on this host as each app's endpoint: commit -> receipt, deliveries/s (the target must allow http and loopback URLs: VOICEROOM_WEBHOOKS_ALLOW_HTTP, _ALLOW_PRIVATE_ADDRESSES; --inprocess does)")
	fs.DurationVar(&c.WebhooksOutage, "webhooks-outage", 0, "with --webhooks: the receiver answers 503 for this long from a sixth of the load on; the backlog's drain is measured")
	fs.StringVar(&c.EmulatorURL, "im-emulator", "", "IM emulator root (its /_emu routes); empty: commit -> IM is n/a")
	jsonOut := fs.String("json", "bench.json", "JSON report file (empty: none)")
	profile := fs.String("profile", "", "write a CPU profile of voiceroom during the load to this file")
	quietProgress := fs.Bool("quiet", false, "no live progress line")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fmt.Println("usage: voiceroom bench (--url URL | --inprocess) [flags]")
		fs.PrintDefaults()
		return nil
	} else if err != nil {
		return fmt.Errorf("%w: bench: %v", errUsage, err)
	}
	if (*target == "") == !*inprocess {
		return fmt.Errorf("%w: bench: give exactly one of --url or --inprocess", errUsage)
	}
	if c.ListClients == 0 {
		c.ListClients = loadgen.NoListClients // the config's 0 is its default
	}
	c.Apps = strings.Split(*apps, ",")
	if !*quietProgress {
		c.Progress = os.Stderr
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	if *inprocess {
		stack, err := startInProcess(ctx, log)
		if err != nil {
			return err
		}
		defer stack.stop(*keep)
		*target, *dsn, *natsURL = stack.url, stack.dsn, stack.natsURL
		if *opsURL == "" {
			*opsURL = stack.opsURL
		}
		if c.EmulatorURL == "" {
			c.EmulatorURL = stack.emuURL
		}
		if *profile != "" {
			c.Profile = func(time.Duration) (func() error, error) {
				f, err := os.Create(*profile)
				if err != nil {
					return nil, err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					f.Close()
					return nil, err
				}
				return func() error { pprof.StopCPUProfile(); return f.Close() }, nil
			}
		}
	}
	c.BaseURL = *target

	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	if *opsURL == "" && !*inprocess {
		if *opsURL, err = defaultOpsURL(*target, cfg.OpsAddr); err != nil {
			return fmt.Errorf("%w: bench: %v", errUsage, err)
		}
	}
	if *opsURL == "" {
		log.Warn("bench: no operators' listener (VOICEROOM_OPS_ADDR is empty and no --ops-url): voiceroom's CPU and memory are n/a")
	} else {
		log.Info("bench: the target's metrics and profiles", "ops_url", *opsURL)
	}
	if *profile != "" && !*inprocess {
		if *opsURL == "" {
			return fmt.Errorf("%w: bench: --profile reads the target's /debug/pprof/profile: give --ops-url", errUsage)
		}
		c.Profile = remoteProfile(ctx, *opsURL, *profile)
	}
	c.OpsURL = *opsURL
	if *dsn == "" {
		*dsn = cfg.MySQLDSN
	}
	if *natsURL == "" {
		*natsURL = cfg.NATSURL
		if *natsURL == "" {
			*natsURL = "nats://" + cfg.NATSListen
		}
	}
	db, err := mysqldb.Open(ctx, mysqldb.Config{DSN: *dsn, MaxOpenConns: c.Clients + 16}, log)
	if err != nil {
		return fmt.Errorf("bench: mysql: %w", err)
	}
	defer db.Close()
	if c.Keys, err = benchKeys(ctx, cfg, log, db, c.Apps); err != nil {
		return err
	}
	var js jetstream.JetStream
	if nc, err := nats.Connect(*natsURL, nats.Timeout(5*time.Second)); err != nil {
		log.Warn("bench: no NATS; stream figures are n/a", "url", *natsURL, "error", err)
	} else {
		defer nc.Close()
		if js, err = jetstream.New(nc); err != nil {
			return fmt.Errorf("bench: jetstream: %w", err)
		}
	}

	b, err := loadgen.New(db, js, *dsn, log, c)
	if err != nil {
		return fmt.Errorf("%w: bench: %v", errUsage, err)
	}
	rep, err := b.Run(ctx)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if *inprocess {
		rep.Notes = append(rep.Notes, "in-process: voiceroom's CPU, RSS, allocation and profile include the load generator's")
	}
	rep.Table(os.Stdout)
	if *jsonOut != "" {
		f, err := os.Create(*jsonOut)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer f.Close()
		if err := rep.JSON(f); err != nil {
			return fmt.Errorf("bench: write %s: %w", *jsonOut, err)
		}
		fmt.Println("\nJSON report:", *jsonOut)
	}
	return nil
}

// defaultOpsURL is where a target's operators' listener is expected:
// target's host on the port of opsAddr (this environment's
// VOICEROOM_OPS_ADDR), over plain HTTP as the listener serves. Empty when
// opsAddr is.
func defaultOpsURL(target, opsAddr string) (string, error) {
	if opsAddr == "" {
		return "", nil
	}
	u, err := url.Parse(target)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("--url %q: want http://host:port", target)
	}
	_, port, err := net.SplitHostPort(opsAddr)
	if err != nil {
		return "", badVar("VOICEROOM_OPS_ADDR", "%v", err)
	}
	return "http://" + net.JoinHostPort(u.Hostname(), port), nil
}

// remoteProfile fetches /debug/pprof/profile of the target's operators'
// listener (base) for the load's length (the target needs
// VOICEROOM_PPROF=true).
func remoteProfile(ctx context.Context, base, path string) func(time.Duration) (func() error, error) {
	return func(d time.Duration) (func() error, error) {
		secs := max(1, int(d.Seconds()))
		u := strings.TrimRight(base, "/") + fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs)
		done := make(chan error, 1)
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				done <- err
				return
			}
			resp, err := (&http.Client{Timeout: d + time.Minute}).Do(req)
			if err != nil {
				done <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				done <- fmt.Errorf("%s answers %d (set VOICEROOM_PPROF=true on the target)", u, resp.StatusCode)
				return
			}
			f, err := os.Create(path)
			if err != nil {
				done <- err
				return
			}
			_, err = io.Copy(f, resp.Body)
			done <- errorsJoin(err, f.Close())
		}()
		return func() error { return <-done }, nil
	}
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// benchSDKAppID is the Tencent application of the in-process stack's IM
// emulator.
const benchSDKAppID = 1400000099

// inProcessStack is a complete voiceroom serving in this process, with the
// IM emulator its bridge delivers to.
type inProcessStack struct {
	url, dsn, natsURL string
	opsURL            string // its operators' listener
	emuURL            string // the IM emulator the bridge delivers to
	emu               *http.Server
	dbName            string
	dataDir           string
	cancel            context.CancelFunc
	done              chan error
}

// startInProcess runs serve, every role, in this process on free ports,
// a fresh database and a temporary data directory, and waits until it is
// ready. The environment variables it sets are the ones serve reads; the
// rest (Redis, MySQL server) come from the caller's environment.
func startInProcess(ctx context.Context, log *slog.Logger) (*inProcessStack, error) {
	base, err := loadConfig()
	if err != nil {
		return nil, err
	}
	mc, err := mysql.ParseDSN(base.MySQLDSN)
	if err != nil {
		return nil, badVar("VOICEROOM_MYSQL_DSN", "%v", err)
	}
	s := &inProcessStack{dbName: fmt.Sprintf("voiceroom_bench_%d", time.Now().UnixNano()), done: make(chan error, 1)}
	mc.DBName = s.dbName
	s.dsn = mc.FormatDSN()
	if s.dataDir, err = os.MkdirTemp("", "voiceroom-bench-"); err != nil {
		return nil, err
	}
	addrs, err := freeAddrs(3)
	if err != nil {
		return nil, err
	}
	httpAddr, natsAddr, opsAddr := addrs[0], addrs[1], addrs[2]
	secret := make([]byte, 24)
	rand.Read(secret)
	// The IM emulator, so that commit -> IM receipt is measured too.
	imKey := hex.EncodeToString(secret[:12])
	emu, err := imemu.New(imemu.Config{Apps: []imbridge.Application{
		{SDKAppID: benchSDKAppID, Admin: "administrator", SecretKey: imKey}}})
	if err != nil {
		return nil, err
	}
	emuLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.emu = &http.Server{Handler: emu, ReadHeaderTimeout: 10 * time.Second}
	go s.emu.Serve(emuLn)
	s.emuURL = "http://" + emuLn.Addr().String()
	env := map[string]string{
		"VOICEROOM_TIM_DOMAIN":           s.emuURL,
		"VOICEROOM_TIM_SDKAPPID":         strconv.FormatInt(benchSDKAppID, 10),
		"VOICEROOM_TIM_ADMIN":            "administrator",
		"VOICEROOM_TIM_SECRET_KEY":       imKey,
		"VOICEROOM_HTTP_ADDR":            httpAddr,
		"VOICEROOM_NATS_LISTEN":          natsAddr,
		"VOICEROOM_NATS_URL":             "",
		"VOICEROOM_DATA_DIR":             s.dataDir,
		"VOICEROOM_MYSQL_DSN":            s.dsn,
		"VOICEROOM_APPS_SECRET_KEY":      hex.EncodeToString(randomBytes(32)),
		"VOICEROOM_PLATFORM_KEYS":        "bench:" + hex.EncodeToString(randomBytes(32)),
		"VOICEROOM_HTTP_RATE_PER_USER":   "1000",
		"VOICEROOM_HTTP_RATE_BURST":      "1000",
		"VOICEROOM_ROLES":                strings.Join(allRoles, ","),
		"VOICEROOM_LOG_LEVEL":            "warn",
		"VOICEROOM_LOG_FORMAT":           "text",
		"VOICEROOM_MYSQL_MAX_OPEN_CONNS": "64",
		"VOICEROOM_PPROF":                "true", // a GC before the heap is read
		"VOICEROOM_OPS_ADDR":             opsAddr,
		// The bench's webhook receiver (--webhooks) is on this host.
		"VOICEROOM_WEBHOOKS_ALLOW_HTTP":              "true",
		"VOICEROOM_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES": "true",
	}
	for k, v := range env {
		os.Setenv(k, v)
	}
	s.url, s.natsURL, s.opsURL = "http://"+httpAddr, "nats://"+natsAddr, "http://"+opsAddr
	sctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	go func() { s.done <- serve(sctx) }()
	log.Info("bench: in-process voiceroom starting", "url", s.url, "database", s.dbName)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case err := <-s.done:
			s.stop(false)
			return nil, fmt.Errorf("in-process voiceroom stopped: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop(false)
			return nil, fmt.Errorf("in-process voiceroom not ready after 2m")
		}
	}
}

// stop shuts the stack down and removes its data and, unless keep, its
// database.
func (s *inProcessStack) stop(keep bool) {
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
	}
	s.emu.Close()
	os.RemoveAll(s.dataDir)
	if keep {
		return
	}
	mc, err := mysql.ParseDSN(s.dsn)
	if err != nil {
		return
	}
	mc.DBName = ""
	if db, err := sql.Open("mysql", mc.FormatDSN()); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+s.dbName+"`")
		cancel()
		db.Close()
	}
}

// freeAddrs returns n distinct free loopback addresses.
func freeAddrs(n int) ([]string, error) {
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// benchKeys are the keys the bench signs each app's tokens with: the
// app's own (VOICEROOM_APP_KEYS, or stored in the target's database,
// where the bench registers its apps with a key when they have none,
// sealed with the target's VOICEROOM_APPS_SECRET_KEY), so that the load
// goes through the per-app key lookup as clients' does.
func benchKeys(ctx context.Context, cfg config, log *slog.Logger, db *sql.DB, list []string) (map[string]authtoken.Key, error) {
	sealer, _, err := cfg.appsSealer(log, false)
	if err != nil {
		return nil, err
	}
	store, err := apps.NewStore(db, sealer, cfg.appsStore(), log)
	if err != nil {
		return nil, err
	}
	keys := map[string]authtoken.Key{}
	for _, app := range list {
		k, made, err := store.EnsureKey(ctx, app, "bench")
		if err != nil {
			return nil, fmt.Errorf("bench: a key for app %s: %w", app, err)
		}
		if made {
			log.Info("bench: registered the app with a key", "app_code", app, "key_id", k.ID)
		}
		keys[app] = k
	}
	return keys, nil
}
