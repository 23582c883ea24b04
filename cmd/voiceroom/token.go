package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"voiceroom/gateway"
)

// token prints a JWT signed with VOICEROOM_JWT_SECRET (or the development key
// in VOICEROOM_DATA_DIR).
func token(args []string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	app := fs.String("app", "", "app_code the token is for (required)")
	user := fs.Int64("user", 0, "user id (sub); required unless --role admin")
	role := fs.String("role", "", `role claim: "" or "admin"`)
	ttl := fs.Duration("ttl", time.Hour, "lifetime")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: token: %v", errUsage, err)
	}
	if *role != "" && *role != gateway.RoleAdmin {
		return fmt.Errorf("%w: token: --role must be admin or empty", errUsage)
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	secret, err := cfg.jwtSecret(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}
	tok, err := gateway.IssueToken(secret, *app, *user, *role, *ttl, time.Now())
	if err != nil {
		return fmt.Errorf("%w: token: %v", errUsage, err)
	}
	fmt.Println(tok)
	return nil
}
