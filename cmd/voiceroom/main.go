// Command voiceroom is the one binary of the voice-room backend: serve runs
// every role in one process (or the subset VOICEROOM_ROLES names), migrate
// applies the SQL migrations, token mints a JWT for development and
// operators, apps registers apps and manages their keys, seed creates a development app's regions, countries and users,
// nodes prints the rooms nodes and their partitions, ranks rebuilds the
// rooms' ranks in Redis, demo walks a newcomer through a running server,
// backup dumps the MySQL database and restore loads a dump into a fresh
// deployment, imemu runs the Tencent IM emulator, version prints the
// version and the VCS revision of the build.
//
// Configuration comes only from environment variables (see
// deploy/voiceroom.env.example); a bad value stops the process with a message
// naming the variable.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: voiceroom <command> [flags]

commands:
  serve      run all roles in one process (VOICEROOM_ROLES picks a subset:
             api, rooms, relay, imbridge, projector)
  migrate    apply pending SQL migrations, then exit
  seed       create the demo app's regions, countries and users if missing:
             seed [--app demo]
  token      print a JWT signed with the app's key:
             token --app APP --user ID [--role admin] [--ttl 1h]
             or a platform operator's: token --platform [--user ID] [--ttl 1h]
  apps       register apps and manage their keys (platform operators):
             apps list | create APP | keys rotate APP | disable APP ...
             (apps --help lists them)
  imemu      run the local Tencent IM emulator: imemu [--listen 127.0.0.1:18080]
             [--sdkappid N --admin ID --secret-key K] [--apps FILE] [--fault MODE ...]
             [--addr-file FILE]; with VOICEROOM_IMEMU_PROOF_KEY set it proves
             it holds that key, and imemu verify --url URL [--wait 10s]
             exits 0 only when the emulator at URL does
  bench      load a running stack (--url URL) or one started in this process
             (--inprocess) over HTTP and report throughput, latencies,
             ceilings, CPU and MySQL work: bench -h lists the flags
  demo       walk through the running product: demo [--url URL] [--imemu URL]
             [--ops-url URL] [--app demo] [--wait 20s]
  projector  rebuild room_list_entries (and the Redis cache) from MySQL alone:
             projector rebuild [--app APP]
  ranks      rebuild the rooms' day and week ranks in Redis from MySQL:
             ranks rebuild --app APP [--room ROOM]
  nodes      print the live rooms nodes and the partitions each holds (from
             JetStream): nodes [--partitions] [--json] [--timeout 15s]
  backup     dump the MySQL database (the only state that cannot be rebuilt):
             backup --out FILE[.gz]
  restore    load a dump into an empty database and rebuild what derives from
             it, before serve starts: restore (--dump FILE | --loaded)
             [--republish-window 5m]
  version    print the version and the VCS revision the binary was built from
  healthcheck
             exit 0 if this host's serve is ready (its public listener):
             healthcheck [--path /readyz|/healthz] [--addr host:port]
             [--timeout 3s] (the image's HEALTHCHECK)
`

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes one command and returns the process exit code: 0 on success,
// 1 on a runtime failure, 2 on bad usage or configuration.
func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx)
	case "migrate":
		err = migrate(ctx)
	case "seed":
		err = seed(ctx, args[1:])
	case "token":
		err = token(ctx, args[1:])
	case "apps":
		err = appsCmd(ctx, args[1:])
	case "imemu":
		err = imemuCmd(ctx, args[1:])
	case "healthcheck":
		err = healthcheck(ctx, args[1:])
	case "bench":
		err = bench(ctx, args[1:])
	case "demo":
		err = demo(ctx, args[1:])
	case "projector":
		err = projectorCmd(ctx, args[1:])
	case "ranks":
		err = ranksCmd(ctx, args[1:])
	case "nodes":
		err = nodes(ctx, args[1:])
	case "backup":
		err = backupCmd(ctx, args[1:])
	case "restore":
		err = restoreCmd(ctx, args[1:])
	case "version", "--version", "-v":
		fmt.Println(readBuildVersion())
	case "help", "--help", "-h":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "voiceroom: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, "voiceroom:", err)
	var ce *configError
	if errors.As(err, &ce) || errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

// errUsage marks a command-line mistake.
var errUsage = errors.New("usage")
