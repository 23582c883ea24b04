package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"voiceroom/imbridge"
	"voiceroom/imemu"
)

// imemuProofKeyVar holds the key the emulator proves itself with and
// `imemu verify` checks against (deploy/run.sh generates one per run). An
// environment variable, not a flag: a command line is visible to every
// user of the machine.
const imemuProofKeyVar = "VOICEROOM_IMEMU_PROOF_KEY"

// imemuProofKey reads imemuProofKeyVar; required says whether it must be
// set.
func imemuProofKey(required bool) ([]byte, error) {
	key := os.Getenv(imemuProofKeyVar)
	if key == "" && !required {
		return nil, nil
	}
	if len(key) < imemu.MinProofKey {
		return nil, fmt.Errorf("%w: %s: want at least %d characters", errUsage, imemuProofKeyVar, imemu.MinProofKey)
	}
	return []byte(key), nil
}

// imemuCmd runs the local Tencent IM emulator until SIGINT or SIGTERM. It
// accepts the application of --sdkappid/--admin/--secret-key and those of
// --apps (the VOICEROOM_TIM_APPS format); the defaults match what
// `task run` gives the bridge. `imemu verify` checks that an emulator
// proves it holds this run's key (imemuVerify).
func imemuCmd(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "verify" {
		return imemuVerify(ctx, args[1:])
	}
	fs := flag.NewFlagSet("imemu", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listen := fs.String("listen", "127.0.0.1:18080", "listen address (loopback)")
	sdkAppID := fs.Int64("sdkappid", 1400000001, "SDKAppID it accepts")
	admin := fs.String("admin", "administrator", "admin identifier it accepts")
	secret := fs.String("secret-key", "voiceroom-dev-im-secret", "secret key it checks UserSigs with")
	appsFile := fs.String("apps", "", "also accept the applications of this file (VOICEROOM_TIM_APPS format)")
	faultMode := fs.String("fault", "", "inject a fault from the start: error, timeout or http500")
	faultCode := fs.Int("fault-code", 90994, "ErrorCode of --fault error")
	faultAPI := fs.String("fault-api", "", "limit the fault to one service/command")
	faultFor := fs.Duration("fault-duration", 0, "how long the fault lasts (0: until DELETE /_emu/faults)")
	addrFile := fs.String("addr-file", "", "once listening, write the address it listens on to this file (for a --listen port 0)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: imemu: %v", errUsage, err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	apps := []imbridge.Application{{SDKAppID: *sdkAppID, Admin: *admin, SecretKey: *secret}}
	if *appsFile != "" {
		m, err := imbridge.LoadAppsFile(*appsFile)
		if err != nil {
			return fmt.Errorf("%w: imemu: --apps: %v", errUsage, err)
		}
		for _, a := range m {
			apps = append(apps, a)
		}
	}
	proofKey, err := imemuProofKey(false)
	if err != nil {
		return fmt.Errorf("imemu: %w", err)
	}
	emu, err := imemu.New(imemu.Config{Apps: apps, ProofKey: proofKey})
	if err != nil {
		return fmt.Errorf("%w: imemu: %v", errUsage, err)
	}
	if *faultMode != "" {
		f := imemu.Fault{Mode: *faultMode, ErrorCode: *faultCode, API: *faultAPI, DurationMs: faultFor.Milliseconds()}
		if err := emu.SetFault(f); err != nil {
			return fmt.Errorf("%w: imemu: %v", errUsage, err)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("imemu: listen %s: %w", *listen, err)
	}
	defer ln.Close()
	if *addrFile != "" {
		if err := writeFileAtomic(*addrFile, []byte(ln.Addr().String()+"\n")); err != nil {
			return fmt.Errorf("imemu: --addr-file: %w", err)
		}
	}
	srv := &http.Server{Handler: emu, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("imemu: Tencent IM emulator serving", "addr", ln.Addr().String(), "sdkappid", *sdkAppID, "admin", *admin,
		"proof", len(proofKey) > 0, "inspect", "http://"+ln.Addr().String()+"/_emu/stats")
	select {
	case <-ctx.Done():
	case err := <-done:
		return fmt.Errorf("imemu: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("imemu: shutdown: %w", err)
	}
	log.Info("imemu: stopped")
	return nil
}

// writeFileAtomic writes b to path through a temporary file and a rename,
// so that a reader never sees it half written.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// imemuVerify exits 0 only when the server at --url proves it is an
// emulator holding the key of VOICEROOM_IMEMU_PROOF_KEY (imemu.Verify):
// deploy/run.sh points the bridge at the emulator only after this, so that
// signed calls never go to whatever else took the port.
func imemuVerify(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("imemu verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	base := fs.String("url", "", "base URL of the emulator, e.g. http://127.0.0.1:18080 (required)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	wait := fs.Duration("wait", 0, "how long to keep asking while nothing answers (an emulator starting); an answer without the proof fails at once")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: imemu verify: %v", errUsage, err)
	}
	if *base == "" || fs.NArg() > 0 {
		return fmt.Errorf("%w: imemu verify: want --url URL and nothing else", errUsage)
	}
	if *timeout <= 0 || *wait < 0 {
		return fmt.Errorf("%w: imemu verify: --timeout must be positive and --wait not negative", errUsage)
	}
	key, err := imemuProofKey(true)
	if err != nil {
		return fmt.Errorf("imemu verify: %w", err)
	}
	deadline := time.Now().Add(*wait)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		actx, cancel := context.WithTimeout(ctx, *timeout)
		err = imemu.Verify(actx, http.DefaultClient, *base, key)
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, imemu.ErrNotProved) || !time.Now().Before(deadline) {
			return fmt.Errorf("imemu verify: %s is not this run's IM emulator: %w", *base, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("imemu verify: %w", ctx.Err())
		case <-tick.C:
		}
	}
}
