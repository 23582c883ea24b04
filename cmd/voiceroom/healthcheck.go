package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// healthcheck asks the local process's HTTP edge whether it is ready (or,
// with --path /healthz, alive) and fails unless it answers 200. The
// container image has no shell or curl; its HEALTHCHECK runs this.
//
// It asks the public listener (VOICEROOM_HTTP_ADDR), which serves /readyz
// too: that is the listener clients depend on, and it is there whether or
// not the operators' listener is on. --addr names another (the operators'
// address, say).
func healthcheck(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", "", "host:port of the HTTP edge (default VOICEROOM_HTTP_ADDR, on loopback when it listens on all addresses)")
	path := fs.String("path", "/readyz", "path to GET: /readyz (dependencies reachable, not draining) or /healthz (alive)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: healthcheck: %v", errUsage, err)
	}
	if *path != "/readyz" && *path != "/healthz" {
		return fmt.Errorf("%w: healthcheck: --path must be /readyz or /healthz", errUsage)
	}
	if *timeout <= 0 {
		return fmt.Errorf("%w: healthcheck: --timeout must be positive", errUsage)
	}
	if *addr == "" {
		cfg, err := loadConfig()
		if err != nil {
			return err
		}
		*addr = cfg.HTTPAddr
	}
	url, err := localURL(*addr, *path)
	if err != nil {
		return fmt.Errorf("%w: healthcheck: %v", errUsage, err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %s: %s", url, resp.Status, body)
	}
	return nil
}

// localURL is the URL of path on a listen address; a wildcard host
// (0.0.0.0, ::, empty) is reached on loopback.
func localURL(addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("address %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}
