// Package deploy_test checks the deployment files against the tools that
// read them: the NATS configs with nats-server's own parser, the compose
// file with the compose-spec loader, the Dockerfile with BuildKit's parser,
// and the Dockerfile's build command by running it.
package deploy_test

import (
	"context"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/oasdiff/yaml"
)

// natsServers are the compose services of the NATS cluster.
var natsServers = []string{"nats-1", "nats-2", "nats-3"}

func TestNATSConfigParses(t *testing.T) {
	for _, name := range natsServers {
		t.Run(name, func(t *testing.T) {
			t.Setenv("NATS_SERVER_NAME", name)
			opts, err := server.ProcessConfigFile(filepath.Join("nats", "nats.conf"))
			if err != nil {
				t.Fatalf("nats-server cannot parse nats/nats.conf: %v", err)
			}
			if opts.ServerName != name || !opts.JetStream || opts.StoreDir != "/data" {
				t.Errorf("server %q jetstream %v store %q, want %s with JetStream in /data", opts.ServerName, opts.JetStream, opts.StoreDir, name)
			}
			if opts.Port != 4222 || opts.HTTPPort != 8222 {
				t.Errorf("client port %d, monitoring port %d, want 4222 and 8222 (compose uses both)", opts.Port, opts.HTTPPort)
			}
			if opts.Cluster.Name != "voiceroom" || opts.Cluster.Port != 6222 {
				t.Errorf("cluster %q on port %d, want voiceroom on 6222", opts.Cluster.Name, opts.Cluster.Port)
			}
			var hosts []string
			for _, r := range opts.Routes {
				if r.Port() != "6222" {
					t.Errorf("route %s: want port 6222", r)
				}
				hosts = append(hosts, r.Hostname())
			}
			if !slices.Equal(hosts, natsServers) {
				t.Errorf("routes to %v, want every server of the cluster %v (JetStream counts them)", hosts, natsServers)
			}
		})
	}
	t.Run("without a server name", func(t *testing.T) {
		t.Setenv("NATS_SERVER_NAME", "") // restored when the test ends
		os.Unsetenv("NATS_SERVER_NAME")
		if _, err := server.ProcessConfigFile(filepath.Join("nats", "nats.conf")); err == nil {
			t.Error("parsed without NATS_SERVER_NAME: each server must be told its name")
		}
	})
}

// goMod returns the go directive and the nats-server version of go.mod.
func goMod(tb testing.TB) (goVersion, natsServer string) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		tb.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b); m != nil {
		goVersion = string(m[1])
	}
	if m := regexp.MustCompile(`(?m)^\s+github\.com/nats-io/nats-server/v2 v(\S+)`).FindSubmatch(b); m != nil {
		natsServer = string(m[1])
	}
	if goVersion == "" || natsServer == "" {
		tb.Fatalf("go.mod: go %q, nats-server %q", goVersion, natsServer)
	}
	return goVersion, natsServer
}

const (
	testPlatformKeys = "ops1:compose-test-platform-0123456789"
	testAppsKey      = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
	testWebhooksKey  = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
)

// composeKeys are the keys compose requires from the operator.
var composeKeys = []string{"VOICEROOM_PLATFORM_KEYS=" + testPlatformKeys, "VOICEROOM_APPS_SECRET_KEY=" + testAppsKey,
	"VOICEROOM_WEBHOOKS_SECRET_KEY=" + testWebhooksKey}

func loadCompose(tb testing.TB, env ...string) (*types.Project, error) {
	tb.Helper()
	opts, err := cli.NewProjectOptions([]string{"compose.yaml"},
		cli.WithWorkingDirectory("."),
		cli.WithEnv(env), // only env: the developer's own variables must not matter
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		tb.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

// pinnedImages are the third-party images compose may use, each at an
// exact version: official images, and Prometheus's and Grafana's own.
var pinnedImages = regexp.MustCompile(`^(mariadb|redis|nats|prom/prometheus|grafana/grafana):v?(\d+\.\d+\.\d+)(-alpine)?$`)

// voiceroomRoles are the voiceroom services and their roles and counts:
// one service per role, every role of serve, and the api and rooms roles
// on several nodes (README "Rooms on several nodes").
var voiceroomRoles = map[string]struct {
	roles    string
	replicas int
}{
	"api":       {"api", 2},
	"rooms":     {"rooms", 3},
	"relay":     {"relay", 2},
	"imbridge":  {"imbridge", 2},
	"projector": {"projector", 2},
	"webhooks":  {"webhooks", 2},
}

// serveRoles are the roles `voiceroom serve` knows (VOICEROOM_ROLES).
var serveRoles = []string{"api", "imbridge", "projector", "relay", "rooms", "webhooks"}

func TestComposeLoads(t *testing.T) {
	for i, kv := range composeKeys { // each required: no deployment runs on a default key
		name, _, _ := strings.Cut(kv, "=")
		without := slices.Delete(slices.Clone(composeKeys), i, i+1)
		if _, err := loadCompose(t, without...); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("loaded without %s (%v): the deployment must not run on a default key", name, err)
		}
	}
	p, err := loadCompose(t, composeKeys...)
	if err != nil {
		t.Fatalf("compose-spec loader: %v", err)
	}
	repoRoot, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	_, natsVersion := goMod(t)

	want := []string{"api", "grafana", "imbridge", "imemu", "mariadb", "migrate", "projector", "prometheus", "redis", "relay", "rooms", "webhooks"}
	want = append(want, natsServers...)
	slices.Sort(want)
	if got := p.ServiceNames(); !slices.Equal(sortedCopy(got), want) {
		t.Fatalf("services %v, want %v", sortedCopy(got), want)
	}

	for name, s := range p.Services {
		t.Run(name, func(t *testing.T) {
			if s.Build != nil {
				// The project's own image, built from the repository's Dockerfile.
				if s.Build.Context != repoRoot || s.Build.Dockerfile != "Dockerfile" || s.Image != "voiceroom:local" {
					t.Errorf("build %s/%s as %q, want the repository's Dockerfile as voiceroom:local", s.Build.Context, s.Build.Dockerfile, s.Image)
				}
			} else {
				m := pinnedImages.FindStringSubmatch(s.Image)
				if m == nil {
					t.Fatalf("image %q: want an official image at an exact version (or the project's build)", s.Image)
				}
				if m[1] == "nats" && m[2] != natsVersion {
					t.Errorf("image %s: want nats %s, the nats-server version go.mod embeds and whose parser TestNATSConfigParses runs", s.Image, natsVersion)
				}
				if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 || s.HealthCheck.Disable {
					t.Errorf("no health check")
				}
			}
		})
	}

	var roles []string
	for _, want := range voiceroomRoles {
		roles = append(roles, strings.Split(want.roles, ",")...)
	}
	if slices.Sort(roles); !slices.Equal(roles, serveRoles) {
		t.Errorf("roles %v over the voiceroom services, want each of %v once", roles, serveRoles)
	}
	checkAPIPorts(t, p.Services["api"])

	voiceroomDeps := append([]string{"migrate", "redis"}, natsServers...)
	for name, want := range voiceroomRoles {
		s := p.Services[name]
		env := s.Environment
		if got := value(env, "VOICEROOM_ROLES"); got != want.roles {
			t.Errorf("%s: VOICEROOM_ROLES %q, want %q", name, got, want.roles)
		}
		if got := replicas(s); got != want.replicas {
			t.Errorf("%s: %d replicas, want %d", name, got, want.replicas)
		}
		if s.HealthCheck != nil && s.HealthCheck.Disable {
			t.Errorf("%s: health check disabled; the image's checks /readyz", name)
		}
		checkVoiceroomEnv(t, name, env)
		checkOpsListener(t, name, s)
		for _, dep := range voiceroomDeps {
			d, ok := s.DependsOn[dep]
			wantCond := types.ServiceConditionHealthy
			if dep == "migrate" {
				wantCond = types.ServiceConditionCompletedSuccessfully
			}
			if !ok || d.Condition != wantCond {
				t.Errorf("%s: depends on %s with %q, want %q", name, dep, d.Condition, wantCond)
			}
		}
	}

	migrate := p.Services["migrate"]
	if !slices.Equal(migrate.Command, types.ShellCommand{"migrate"}) || migrate.DependsOn["mariadb"].Condition != types.ServiceConditionHealthy {
		t.Errorf("migrate: command %v, depends on %v; want migrate once mariadb is healthy", migrate.Command, migrate.DependsOn)
	}
	checkVoiceroomEnv(t, "migrate", migrate.Environment)

	for _, name := range natsServers {
		s := p.Services[name]
		if got := value(s.Environment, "NATS_SERVER_NAME"); got != name {
			t.Errorf("%s: NATS_SERVER_NAME %q, want its own name", name, got)
		}
		conf := filepath.Join(repoRoot, "deploy", "nats", "nats.conf")
		if !slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Source == conf }) {
			t.Errorf("%s: does not mount %s", name, conf)
		}
		if !slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == "/data" && v.Type == types.VolumeTypeVolume }) {
			t.Errorf("%s: no volume on /data: JetStream would lose its store with the container", name)
		}
	}

	checkIMEmulator(t, p)
	checkPrometheus(t, p, repoRoot)
	checkGrafana(t, p, repoRoot)
}

// checkVoiceroomEnv checks what every voiceroom process must agree on.
func checkVoiceroomEnv(tb testing.TB, name string, env types.MappingWithEquals) {
	tb.Helper()
	if got := value(env, "VOICEROOM_STREAM_REPLICAS"); got != "3" {
		tb.Errorf("%s: VOICEROOM_STREAM_REPLICAS %q, want 3", name, got)
	}
	for _, kv := range composeKeys {
		k, v, _ := strings.Cut(kv, "=")
		if got := value(env, k); got != v {
			tb.Errorf("%s: %s %q, want the operator's", name, k, got)
		}
	}
	var hosts []string
	for _, u := range strings.Split(value(env, "VOICEROOM_NATS_URL"), ",") {
		if pu, err := url.Parse(u); err == nil && pu.Port() == "4222" {
			hosts = append(hosts, pu.Hostname())
		}
	}
	if !slices.Equal(hosts, natsServers) {
		tb.Errorf("%s: VOICEROOM_NATS_URL reaches %v, want every server %v", name, hosts, natsServers)
	}
	if dsn := value(env, "VOICEROOM_MYSQL_DSN"); !strings.Contains(dsn, "@tcp(mariadb:3306)/") {
		tb.Errorf("%s: VOICEROOM_MYSQL_DSN %q does not reach the mariadb service", name, dsn)
	}
	if got := value(env, "VOICEROOM_REDIS_ADDR"); got != "redis:6379" {
		tb.Errorf("%s: VOICEROOM_REDIS_ADDR %q", name, got)
	}
}

// opsPort is the port of the voiceroom containers' operators' listener.
const opsPort = 9090

// checkOpsListener: a voiceroom service serves its operators' listener
// (/metrics) on the compose network for Prometheus, and never publishes
// it on the host.
func checkOpsListener(tb testing.TB, name string, s types.ServiceConfig) {
	tb.Helper()
	if got, want := value(s.Environment, "VOICEROOM_OPS_ADDR"), fmt.Sprintf("0.0.0.0:%d", opsPort); got != want {
		tb.Errorf("%s: VOICEROOM_OPS_ADDR %q, want %q (reachable by a Prometheus on the compose network)", name, got, want)
	}
	for _, p := range s.Ports {
		if p.Target == opsPort {
			tb.Errorf("%s: publishes the operators' listener (%d -> %s): it is unauthenticated", name, p.Target, p.Published)
		}
	}
}

// checkAPIPorts: the api replicas publish the API on loopback, each on a
// host port of its own (two replicas cannot share one), 8080 among them.
func checkAPIPorts(tb testing.TB, s types.ServiceConfig) {
	tb.Helper()
	if len(s.Ports) != 1 {
		tb.Fatalf("api: ports %+v, want one entry: the API's port 8080", s.Ports)
	}
	p := s.Ports[0]
	first, last, isRange := strings.Cut(p.Published, "-")
	if !isRange {
		last = first
	}
	lo, err1 := strconv.Atoi(first)
	hi, err2 := strconv.Atoi(last)
	if err1 != nil || err2 != nil || lo != 8080 || p.Target != 8080 || p.HostIP != "127.0.0.1" {
		tb.Errorf("api: publishes %s:%s -> %d, want 127.0.0.1:8080[-N] -> 8080", p.HostIP, p.Published, p.Target)
	}
	if n := replicas(s); hi-lo+1 < n {
		tb.Errorf("api: %d replicas on host ports %s: want one port each", n, p.Published)
	}
}

// checkIMEmulator: the bridges reach the emulator, with the application the
// emulator was started with.
func checkIMEmulator(tb testing.TB, p *types.Project) {
	tb.Helper()
	emu := p.Services["imemu"]
	flags := map[string]string{}
	if len(emu.Command) == 0 || emu.Command[0] != "imemu" {
		tb.Fatalf("imemu: command %v, want voiceroom imemu", emu.Command)
	}
	for _, arg := range emu.Command[1:] {
		k, v, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if !ok {
			tb.Fatalf("imemu: argument %q: write flags as --name=value", arg)
		}
		flags[k] = v
	}
	_, port, _ := strings.Cut(flags["listen"], ":")
	if replicas(emu) != 1 {
		tb.Errorf("imemu: %d replicas, want 1 (it holds the messages in memory)", replicas(emu))
	}
	bridge := p.Services["imbridge"]
	if bridge.DependsOn["imemu"].Condition == "" {
		tb.Errorf("imbridge does not start after imemu")
	}
	for env, want := range map[string]string{
		"VOICEROOM_TIM_DOMAIN":     "http://imemu:" + port,
		"VOICEROOM_TIM_SDKAPPID":   flags["sdkappid"],
		"VOICEROOM_TIM_ADMIN":      flags["admin"],
		"VOICEROOM_TIM_SECRET_KEY": flags["secret-key"],
	} {
		if got := value(bridge.Environment, env); got != want || want == "" {
			tb.Errorf("imbridge: %s %q, want %q to match imemu's flags %v", env, got, want, flags)
		}
	}
}

func value(env types.MappingWithEquals, key string) string {
	if v := env[key]; v != nil {
		return *v
	}
	return ""
}

func replicas(s types.ServiceConfig) int {
	if s.Deploy != nil && s.Deploy.Replicas != nil {
		return *s.Deploy.Replicas
	}
	return 1
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// dockerfile is what TestDockerfile reads from the Dockerfile.
type dockerfile struct {
	stages   []instructions.Stage
	metaArgs []instructions.ArgCommand
}

func parseDockerfile(tb testing.TB) dockerfile {
	tb.Helper()
	f, err := os.Open(filepath.Join("..", "Dockerfile"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	ast, err := parser.Parse(f)
	if err != nil {
		tb.Fatalf("buildkit parser: %v", err)
	}
	stages, metaArgs, err := instructions.Parse(ast.AST, nil)
	if err != nil {
		tb.Fatalf("buildkit instructions: %v", err)
	}
	return dockerfile{stages: stages, metaArgs: metaArgs}
}

// buildCommand is the build stage's go build: its shell command line, the
// binary it writes and the ARG defaults of the stage.
type buildCommand struct {
	line   string
	output string
	args   map[string]string
}

var goBuildLine = regexp.MustCompile(`^CGO_ENABLED=0 go build (.*)-o (\S+) \./cmd/voiceroom$`)

func findBuild(tb testing.TB, st instructions.Stage) buildCommand {
	tb.Helper()
	bc := buildCommand{args: map[string]string{}}
	for _, c := range st.Commands {
		switch c := c.(type) {
		case *instructions.ArgCommand:
			for _, a := range c.Args {
				bc.args[a.Key] = a.ValueString()
			}
		case *instructions.RunCommand:
			line := strings.Join(c.CmdLine, " ")
			if !strings.Contains(line, "go build") {
				continue
			}
			m := goBuildLine.FindStringSubmatch(line)
			if m == nil || !c.PrependShell {
				tb.Fatalf("build stage runs %q: want the shell form of `CGO_ENABLED=0 go build [flags] -o PATH ./cmd/voiceroom` (static, for scratch)", line)
			}
			bc.line, bc.output = line, m[2]
		}
	}
	if bc.line == "" {
		tb.Fatalf("stage %s runs no go build", st.Name)
	}
	return bc
}

func TestDockerfile(t *testing.T) {
	df := parseDockerfile(t)
	goVersion, _ := goMod(t)
	if len(df.stages) != 2 {
		t.Fatalf("%d stages, want build and runtime", len(df.stages))
	}
	build, runtime := df.stages[0], df.stages[1]
	if build.Name != "build" || build.BaseName != "golang:"+goVersion {
		t.Errorf("first stage %q from %q, want build from golang:%s (go.mod's go version)", build.Name, build.BaseName, goVersion)
	}
	bc := findBuild(t, build)

	if runtime.BaseName != "scratch" {
		t.Errorf("runtime stage from %q, want scratch: the binary is static", runtime.BaseName)
	}
	var copied, user, entrypoint string
	var health []string
	env := map[string]string{}
	for _, c := range runtime.Commands {
		switch c := c.(type) {
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				env[kv.Key] = kv.Value
			}
		case *instructions.CopyCommand:
			if c.From == "build" && slices.Contains(c.SourcePaths, bc.output) {
				copied = c.DestPath
			}
		case *instructions.UserCommand:
			user = c.User
		case *instructions.HealthCheckCommand:
			health = c.Health.Test
		case *instructions.EntrypointCommand:
			entrypoint = strings.Join(c.CmdLine, " ")
		}
	}
	if copied == "" {
		t.Fatalf("runtime stage does not copy %s from the build stage", bc.output)
	}
	if entrypoint != copied {
		t.Errorf("entrypoint %q, want the copied binary %s", entrypoint, copied)
	}
	if uid, _, _ := strings.Cut(user, ":"); user == "" || uid == "0" || uid == "root" {
		t.Errorf("runs as user %q, want a non-root uid", user)
	}
	if len(health) < 3 || health[0] != "CMD" || health[1] != copied || health[2] != "healthcheck" {
		t.Errorf("HEALTHCHECK %v, want CMD %s healthcheck (there is no shell)", health, copied)
	}
	// The image's default keeps metrics and profiles inside the container.
	if host, _, err := net.SplitHostPort(env["VOICEROOM_OPS_ADDR"]); err != nil || !net.ParseIP(host).IsLoopback() {
		t.Errorf("ENV VOICEROOM_OPS_ADDR=%q, want a loopback address", env["VOICEROOM_OPS_ADDR"])
	}

	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	// Run the build stage's command on this machine, writing elsewhere.
	bin := filepath.Join(t.TempDir(), "voiceroom")
	line := strings.Replace(bc.line, "-o "+bc.output, "-o "+bin, 1)
	// A release build passes its version (--build-arg VERSION=v1.4.0).
	const release = "v9.9.9-deploy-test"
	line = os.Expand(line, func(k string) string {
		if k == "VERSION" {
			return release
		}
		return bc.args[k]
	})
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if info.Path != "voiceroom/cmd/voiceroom" {
		t.Errorf("built %s, want voiceroom/cmd/voiceroom", info.Path)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings %v, want CGO_ENABLED=0 and -trimpath", settings)
	}
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked: it cannot run on scratch")
		}
	}
	out, err := exec.Command(bin, "version").Output()
	// The version, then the revision when the build recorded one.
	if want := "voiceroom " + release; err != nil || !strings.HasSuffix(string(out), "\n") ||
		(string(out) != want+"\n" && !strings.HasPrefix(string(out), want+" (revision ")) {
		t.Errorf("version: %q, %v; want %q", out, err, want)
	}
}

func TestDockerignoreKeepsLocalStateOut(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	for _, want := range []string{".git", "bin", "data"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore lacks %s", want)
		}
	}
}

// mustYAML reads a YAML file of the repository into out.
func mustYAML(tb testing.TB, path string, out any) {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, out); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
}

// mountOf returns the read-only bind mount of source in s, or fails.
func mountOf(tb testing.TB, s types.ServiceConfig, source string) types.ServiceVolumeConfig {
	tb.Helper()
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind && v.Source == source {
			if !v.ReadOnly {
				tb.Errorf("%s: mounts %s writable, want :ro", s.Name, source)
			}
			return v
		}
	}
	tb.Fatalf("%s: does not mount %s", s.Name, source)
	return types.ServiceVolumeConfig{}
}

// checkLoopbackPort: s publishes target on a loopback host port only.
func checkLoopbackPort(tb testing.TB, s types.ServiceConfig, target uint32) {
	tb.Helper()
	if len(s.Ports) != 1 || s.Ports[0].Target != target || s.Ports[0].HostIP != "127.0.0.1" {
		tb.Errorf("%s: ports %+v, want %d on 127.0.0.1 only", s.Name, s.Ports, target)
	}
}

// checkPrometheus: the prometheus service reads deploy/prometheus (its
// config, the recording rules and the alerts), scrapes every voiceroom
// service on the operators' port, and keeps its data in a volume.
func checkPrometheus(tb testing.TB, p *types.Project, repoRoot string) {
	tb.Helper()
	s := p.Services["prometheus"]
	dir := filepath.Join(repoRoot, "deploy", "prometheus")
	m := mountOf(tb, s, dir)
	args := strings.Join(s.Command, " ")
	conf, ok := strings.CutPrefix(regexp.MustCompile(`--config\.file=\S+`).FindString(args), "--config.file=")
	rel, err := filepath.Rel(m.Target, conf)
	if !ok || err != nil || strings.HasPrefix(rel, "..") {
		tb.Fatalf("prometheus: command %q: want --config.file in %s", args, m.Target)
	}
	if !slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Type == types.VolumeTypeVolume }) {
		tb.Errorf("prometheus: no volume: its data would go with the container")
	}
	checkLoopbackPort(tb, s, 9090)

	var cfg struct {
		RuleFiles     []string `json:"rule_files"`
		ScrapeConfigs []struct {
			DNSSD []struct {
				Names []string `json:"names"`
				Type  string   `json:"type"`
				Port  int      `json:"port"`
			} `json:"dns_sd_configs"`
		} `json:"scrape_configs"`
	}
	mustYAML(tb, filepath.Join(dir, rel), &cfg)
	rules := slices.Clone(cfg.RuleFiles)
	slices.Sort(rules)
	if !slices.Equal(rules, []string{"alerts.yml", "recording.yml"}) {
		tb.Errorf("prometheus: rule_files %v, want alerts.yml and recording.yml", cfg.RuleFiles)
	}
	var scraped []string
	for _, sc := range cfg.ScrapeConfigs {
		for _, d := range sc.DNSSD {
			if d.Port == opsPort && d.Type == "A" {
				scraped = append(scraped, d.Names...)
			}
		}
	}
	for name := range voiceroomRoles {
		if !slices.Contains(scraped, name) {
			tb.Errorf("prometheus: does not scrape %s on port %d (scrapes %v)", name, opsPort, scraped)
		}
	}
}

// checkGrafana: the grafana service provisions the Prometheus above as
// its data source and loads every dashboard of deploy/grafana/dashboards.
func checkGrafana(tb testing.TB, p *types.Project, repoRoot string) {
	tb.Helper()
	s := p.Services["grafana"]
	prov := mountOf(tb, s, filepath.Join(repoRoot, "deploy", "grafana", "provisioning"))
	boards := mountOf(tb, s, filepath.Join(repoRoot, "deploy", "grafana", "dashboards"))
	if prov.Target != "/etc/grafana/provisioning" {
		tb.Errorf("grafana: provisioning at %s, want /etc/grafana/provisioning (Grafana's default)", prov.Target)
	}
	if d := s.DependsOn["prometheus"]; d.Condition != types.ServiceConditionHealthy {
		tb.Errorf("grafana: depends on prometheus with %q, want healthy", d.Condition)
	}
	checkLoopbackPort(tb, s, 3000)

	var ds struct {
		Datasources []struct {
			Type, URL string
			IsDefault bool `json:"isDefault"`
		} `json:"datasources"`
	}
	mustYAML(tb, filepath.Join("grafana", "provisioning", "datasources", "prometheus.yml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || !ds.Datasources[0].IsDefault ||
		ds.Datasources[0].URL != "http://prometheus:9090" {
		tb.Errorf("grafana: data sources %+v, want the prometheus service, by default", ds.Datasources)
	}
	var dp struct {
		Providers []struct {
			Type    string `json:"type"`
			Options struct {
				Path string `json:"path"`
			} `json:"options"`
		} `json:"providers"`
	}
	mustYAML(tb, filepath.Join("grafana", "provisioning", "dashboards", "voiceroom.yml"), &dp)
	if len(dp.Providers) != 1 || dp.Providers[0].Type != "file" || dp.Providers[0].Options.Path != boards.Target {
		tb.Errorf("grafana: dashboard providers %+v, want files from %s, where the dashboards are mounted", dp.Providers, boards.Target)
	}
	files, err := filepath.Glob(filepath.Join("grafana", "dashboards", "*.json"))
	if err != nil || len(files) < 4 {
		tb.Errorf("grafana/dashboards holds %v (%v): want the four dashboards", files, err)
	}
	if home := value(s.Environment, "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"); !slices.Contains(files, filepath.Join("grafana", "dashboards", filepath.Base(home))) || filepath.Dir(home) != boards.Target {
		tb.Errorf("grafana: home dashboard %q is none of the mounted %v", home, files)
	}
}
