package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"voiceroom"
	"voiceroom/authtoken"
)

// token prints a JWT: an app's, signed with the app's key (see
// config.signingKey: VOICEROOM_APP_KEYS, the stored key, else the single
// secret), or with --platform a platform operator's, signed with the
// platform key (VOICEROOM_PLATFORM_KEYS, else the development key serve
// made). It never makes a key itself: a token signed with a key serve
// does not know would only be refused with 401 later.
func token(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	app := fs.String("app", "", "app_code the token is for (required unless --platform)")
	user := fs.Int64("user", 0, "user id (sub); required unless --role admin or --platform")
	role := fs.String("role", "", `role claim: "" or "admin"`)
	platform := fs.Bool("platform", false, "a platform operator's token (no app): --user is the operator's id, if any")
	ttl := fs.Duration("ttl", time.Hour, "lifetime")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: token: %v", errUsage, err)
	}
	switch {
	case *role != "" && *role != authtoken.RoleAdmin:
		return fmt.Errorf("%w: token: --role must be admin or empty", errUsage)
	case *platform && (*app != "" || *role != ""):
		return fmt.Errorf("%w: token: a platform operator's token names no --app and no --role", errUsage)
	case !*platform && !voiceroom.ValidAppCode(*app):
		return fmt.Errorf("%w: token: --app %q: want %s", errUsage, *app, voiceroom.AppCodeRule)
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	log := newLogger(cfg)
	var tok string
	if *platform {
		keys, err := cfg.platformKeys(log, false)
		if err != nil {
			return err
		}
		tok, err = keys[len(keys)-1].Key.IssuePlatform(*user, *ttl, time.Now())
		if err != nil {
			return fmt.Errorf("%w: token: %v", errUsage, err)
		}
	} else {
		key, note, err := cfg.signingKey(ctx, log, *app)
		if err != nil {
			return err
		}
		if note != "" {
			fmt.Fprintln(os.Stderr, "token:", note)
		}
		if tok, err = key.Issue(*app, *user, *role, *ttl, time.Now()); err != nil {
			return fmt.Errorf("%w: token: %v", errUsage, err)
		}
	}
	fmt.Println(tok)
	return nil
}
