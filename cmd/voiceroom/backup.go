package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"voiceroom/listprojector"
	"voiceroom/mysqldb"
	"voiceroom/outboxrelay"
	"voiceroom/roomranks"
	"voiceroom/webhooks"
)

// MySQL is the only state a deployment cannot rebuild (docs/backup.md):
// backup dumps it with the server's own client, restore loads a dump into
// an empty database and rebuilds or re-sends everything derived from it.

// backupCmd writes a consistent dump of VOICEROOM_MYSQL_DSN's database
// with mariadb-dump (or mysqldump): one transaction's snapshot, taken
// while serve runs, without the database's name, so that it loads into
// any database.
func backupCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "file to write the dump to, .gz to compress it (required; - for stdout)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: backup: %v", errUsage, err)
	}
	if *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: backup --out FILE", errUsage)
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	dsn, err := mysqldb.ParseDSN(cfg.MySQLDSN)
	if err != nil {
		return badVar("VOICEROOM_MYSQL_DSN", "%v", err)
	}
	tool, mariadb, err := mysqlTool("mariadb-dump", "mysqldump")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	opts, cleanup, err := clientOptionFile(dsn, mariadb)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer cleanup()
	// --single-transaction: one consistent InnoDB snapshot, no table locks,
	// so serve goes on while it runs. No --databases: the dump names no
	// database and loads into whichever restore is pointed at.
	dumpArgs := []string{"--defaults-extra-file=" + opts, "--single-transaction", "--quick", "--routines", "--triggers",
		"--hex-blob", "--no-tablespaces", "--default-character-set=utf8mb4"}
	if !mariadb {
		dumpArgs = append(dumpArgs, "--set-gtid-purged=OFF")
	}
	dumpArgs = append(dumpArgs, dsn.DBName)

	var w io.Writer = os.Stdout
	var file *os.File
	if *out != "-" {
		tmp := *out + ".partial"
		if file, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		defer func() {
			file.Close()
			os.Remove(tmp) // gone already when the dump completed
		}()
		w = file
	}
	var gz *gzip.Writer
	if strings.HasSuffix(*out, ".gz") {
		gz = gzip.NewWriter(w)
		w = gz
	}
	cmd := exec.CommandContext(ctx, tool, dumpArgs...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("backup: %s: %w: %s", tool, err, strings.TrimSpace(stderr.String()))
	}
	if gz != nil {
		if err := gz.Close(); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
	}
	if file != nil {
		if err := file.Sync(); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		if err := file.Close(); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		if err := os.Rename(*out+".partial", *out); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		fmt.Fprintf(os.Stderr, "backup: database %s dumped to %s\n", dsn.DBName, *out)
	}
	return nil
}

// restoreReport is what restore prints: what it loaded and what it rebuilt.
type restoreReport struct {
	Database string                      `json:"database"`
	Loaded   string                      `json:"loaded,omitempty"`
	Outbox   outboxrelay.RestoreReport   `json:"outbox"`
	Webhooks webhooks.RestoreReport      `json:"webhooks"`
	List     listprojector.RebuildResult `json:"list"`
	Ranks    []roomranks.RebuildResult   `json:"ranks"`
	Redis    string                      `json:"redis"`
	Seconds  float64                     `json:"seconds"`
	Next     string                      `json:"next"`
}

// restoreCmd loads a dump into an empty database and readies it for a
// deployment whose JetStream and Redis start empty, with no voiceroom
// process running on that database yet: migrations, the outbox (pending
// rows stay, in-flight groups and the window before the dump's end go back
// to pending, so the relay publishes them to the new stream), the webhook
// endpoints (their secrets must open with this deployment's key; backlog
// cursors move to the new stream), the room list and the ranks rebuilt
// from MySQL. serve, started next, provisions the streams and buckets and
// relays the pending rows.
func restoreCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dump := fs.String("dump", "", "the dump to load (voiceroom backup's; .gz is read compressed; - for stdin)")
	loaded := fs.Bool("loaded", false, "the dump is loaded already (by other means, or by a restore that stopped later): skip the load")
	window := fs.Duration("republish-window", 5*time.Minute, "publish again the events committed this long before the dump's newest one (0: none)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: restore: %v", errUsage, err)
	}
	if (*dump == "") == !*loaded || fs.NArg() > 0 {
		return fmt.Errorf("%w: restore (--dump FILE | --loaded) [--republish-window 5m]", errUsage)
	}
	if *window < 0 {
		return fmt.Errorf("%w: restore: --republish-window must not be negative", errUsage)
	}
	start := time.Now()
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	log := newLogger(cfg)
	dsn, err := mysqldb.ParseDSN(cfg.MySQLDSN)
	if err != nil {
		return badVar("VOICEROOM_MYSQL_DSN", "%v", err)
	}
	rep := restoreReport{Database: dsn.DBName, Redis: "off", Ranks: []roomranks.RebuildResult{}}

	mcfg := cfg.mysql()
	mcfg.MaxOpenConns = 4
	db, err := mysqldb.Open(ctx, mcfg, log) // creates the database when missing
	if err != nil {
		return fmt.Errorf("VOICEROOM_MYSQL_DSN: %w", err)
	}
	defer db.Close()
	if !*loaded {
		var tables int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ?`, dsn.DBName).Scan(&tables); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		if tables > 0 {
			return fmt.Errorf("restore: database %s has %d tables: a dump is loaded into an empty database (a new one, or drop this one first)", dsn.DBName, tables)
		}
		if err := loadDump(ctx, dsn, *dump); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		rep.Loaded = *dump
		log.Info("restore: dump loaded", "database", dsn.DBName, "dump", *dump)
	}
	if err := mysqldb.Migrate(ctx, db, log); err != nil {
		return fmt.Errorf("restore: %w", err)
	}

	sealer, err := cfg.webhooksSealer(log)
	if err != nil {
		return err
	}
	if rep.Webhooks, err = webhooks.PrepareRestored(ctx, db, sealer); err != nil {
		return fmt.Errorf("restore: %w (the dump is loaded: fix the key, then run restore --loaded)", err)
	}
	if rep.Outbox, err = outboxrelay.PrepareRestored(ctx, db, *window); err != nil {
		return fmt.Errorf("restore: %w", err)
	}

	rdb, err := cfg.redisClient()
	if err != nil {
		return err
	}
	if rdb != nil {
		defer rdb.Close()
		rep.Redis = cfg.redis().Describe()
	}
	if rep.List, err = listprojector.Rebuild(ctx, db, rdb, cfg.listProjector(), "", roomCards(db), log); err != nil {
		return fmt.Errorf("restore: rebuild the room list: %w", err)
	}
	if rdb != nil {
		apps, err := restoredApps(ctx, db)
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		for _, app := range apps {
			r, err := roomranks.Rebuild(ctx, db, rdb, cfg.ranks(), app, "", log)
			if err != nil {
				return fmt.Errorf("restore: rebuild the ranks of %s: %w", app, err)
			}
			rep.Ranks = append(rep.Ranks, r)
		}
	}
	rep.Seconds = time.Since(start).Round(time.Millisecond).Seconds()
	rep.Next = "start serve: it provisions the streams and buckets, and its relay publishes the pending rows"
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// restoredApps lists the apps that have rooms.
func restoredApps(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT app_code FROM rooms ORDER BY app_code`)
	if err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	defer rows.Close()
	var apps []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, err
		}
		apps = append(apps, a)
	}
	return apps, rows.Err()
}

// loadDump feeds the dump at path (- for stdin; .gz decompressed) to the
// mariadb (or mysql) client connected to dsn's database. It refuses a dump
// that names a database (made with --databases or --all-databases): that
// would load into the database it came from, not this one.
func loadDump(ctx context.Context, dsn *mysql.Config, path string) error {
	var in io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
		if strings.HasSuffix(path, ".gz") {
			gz, err := gzip.NewReader(f)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			defer gz.Close()
			in = gz
		}
	}
	tool, mariadb, err := mysqlTool("mariadb", "mysql")
	if err != nil {
		return err
	}
	opts, cleanup, err := clientOptionFile(dsn, mariadb)
	if err != nil {
		return err
	}
	defer cleanup()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool, "--defaults-extra-file="+opts, "--default-character-set=utf8mb4", "--batch", dsn.DBName)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	copyErr := copyDump(stdin, in)
	stdin.Close()
	if copyErr != nil {
		cancel() // the client must not commit what it was given so far
		cmd.Wait()
		return copyErr
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s: %w: %s", tool, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// errDumpNamesDatabase is loadDump's error for a dump that would load into
// the database it names instead of the one restore is pointed at.
var errDumpNamesDatabase = errors.New("the dump names a database (USE or CREATE DATABASE): make it with voiceroom backup, or mariadb-dump without --databases")

// copyDump copies the dump to the client, refusing it at the first line
// that names a database.
func copyDump(w io.Writer, r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<16)
	atStart := true
	for {
		line, isPrefix, err := br.ReadLine()
		if len(line) > 0 || (err == nil && !isPrefix) {
			if atStart && namesDatabase(line) {
				return errDumpNamesDatabase
			}
			if _, werr := w.Write(line); werr != nil {
				return fmt.Errorf("write to the client: %w", werr)
			}
			if !isPrefix {
				if _, werr := w.Write([]byte{'\n'}); werr != nil {
					return fmt.Errorf("write to the client: %w", werr)
				}
			}
			atStart = !isPrefix
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the dump: %w", err)
		}
	}
}

// namesDatabase reports whether a dump line switches to or creates a
// database (a mariadb-dump of --databases writes both).
func namesDatabase(line []byte) bool {
	s := strings.ToUpper(string(line[:min(len(line), 32)]))
	return strings.HasPrefix(s, "USE ") || strings.HasPrefix(s, "CREATE DATABASE") ||
		strings.HasPrefix(s, "/*!40000 CREATE DATABASE") || strings.HasPrefix(s, "CREATE SCHEMA")
}

// mysqlTool finds the first of names on PATH and says whether it is
// MariaDB's.
func mysqlTool(names ...string) (path string, mariadb bool, err error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			out, _ := exec.Command(p, "--version").Output()
			return p, strings.Contains(string(out), "MariaDB"), nil
		}
	}
	return "", false, fmt.Errorf("none of %s on PATH: install the MariaDB (or MySQL) client", strings.Join(names, ", "))
}

// clientOptionFile writes dsn's connection settings into a private option
// file for the MariaDB/MySQL clients (--defaults-extra-file), so that the
// password is never on a command line, and returns its path and a function
// that removes it.
// A DSN with tls=true (or skip-verify, preferred) asks the client for TLS;
// certificates come from the clients' own option files, which they still
// read.
func clientOptionFile(dsn *mysql.Config, mariadb bool) (string, func(), error) {
	var b strings.Builder
	b.WriteString("[client]\n")
	quote := func(s string) string {
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
	}
	fmt.Fprintf(&b, "user=%s\n", quote(dsn.User))
	fmt.Fprintf(&b, "password=%s\n", quote(dsn.Passwd))
	switch dsn.Net {
	case "unix":
		fmt.Fprintf(&b, "socket=%s\nprotocol=SOCKET\n", quote(dsn.Addr))
	case "tcp", "tcp6", "":
		host, port, err := net.SplitHostPort(dsn.Addr)
		if err != nil {
			return "", nil, fmt.Errorf("VOICEROOM_MYSQL_DSN address %q: %v", dsn.Addr, err)
		}
		fmt.Fprintf(&b, "host=%s\nport=%s\nprotocol=TCP\n", quote(host), port)
	default:
		return "", nil, fmt.Errorf("VOICEROOM_MYSQL_DSN: network %q: the clients reach tcp or unix only", dsn.Net)
	}
	if tls := dsn.TLSConfig; tls != "" && tls != "false" {
		if mariadb {
			b.WriteString("ssl\n")
		} else {
			b.WriteString("ssl-mode=REQUIRED\n")
		}
	}
	dir, err := os.MkdirTemp("", "voiceroom-mysql-")
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "client.cnf")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return path, func() { os.RemoveAll(dir) }, nil
}
