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

// imemuCmd runs the local Tencent IM emulator until SIGINT or SIGTERM. It
// accepts the application of --sdkappid/--admin/--secret-key and those of
// --apps (the VOICEROOM_TIM_APPS format); the defaults match what
// `task run` gives the bridge.
func imemuCmd(ctx context.Context, args []string) error {
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
	emu, err := imemu.New(imemu.Config{Apps: apps})
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
	srv := &http.Server{Handler: emu, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("imemu: Tencent IM emulator serving", "addr", ln.Addr().String(), "sdkappid", *sdkAppID, "admin", *admin,
		"inspect", "http://"+ln.Addr().String()+"/_emu/stats")
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
