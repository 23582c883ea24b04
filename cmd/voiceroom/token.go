package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"voiceroom/authtoken"
)

// token prints a JWT signed with VOICEROOM_JWT_SECRET or, when that is
// empty, with the development key serve generated in VOICEROOM_DATA_DIR.
// It never generates a key itself: a token signed with a key serve does not
// use would only be refused with 401 later.
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
	if *role != "" && *role != authtoken.RoleAdmin {
		return fmt.Errorf("%w: token: --role must be admin or empty", errUsage)
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	secret, err := cfg.existingJWTSecret()
	if err != nil {
		return err
	}
	tok, err := authtoken.Issue(secret, *app, *user, *role, *ttl, time.Now())
	if err != nil {
		return fmt.Errorf("%w: token: %v", errUsage, err)
	}
	fmt.Println(tok)
	return nil
}

// existingJWTSecret returns the key serve signs with, without creating
// one: VOICEROOM_JWT_SECRET, else the development key in
// $VOICEROOM_DATA_DIR/jwt-secret. A missing key file is an error that
// names the absolute path looked at and the ways out.
func (c *config) existingJWTSecret() ([]byte, error) {
	if c.JWTSecret != "" {
		return []byte(c.JWTSecret), nil
	}
	path := filepath.Join(c.DataDir, "jwt-secret")
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, badVar("VOICEROOM_JWT_SECRET",
			"empty, and there is no development key at %s: run voiceroom serve once with the same VOICEROOM_DATA_DIR "+
				"(it creates the key there), run token from serve's directory, point VOICEROOM_DATA_DIR at serve's data directory, "+
				"or set VOICEROOM_JWT_SECRET to serve's key", path)
	}
	if err != nil {
		return nil, badVar("VOICEROOM_JWT_SECRET", "empty, and %s cannot be read: %v", path, err)
	}
	secret := strings.TrimSpace(string(b))
	if len(secret) < 16 {
		return nil, badVar("VOICEROOM_JWT_SECRET", "empty, and %s holds fewer than 16 bytes", path)
	}
	return []byte(secret), nil
}
