package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"time"

	"voiceroom/apps"
)

const appsUsage = `usage: voiceroom apps <command>

  list                          the registered apps and their keys (never a secret)
  show APP                      one app
  create APP                    register APP with a first key; its secret is printed this once
  disable APP | enable APP      refuse every token of APP, or accept them again
  keys rotate APP [--grace 24h] a new key, printed this once; the others verify on for the grace
                                period (0: they stop at once, for a key that leaked)
  keys revoke APP KEY_ID        a key stops verifying now
  jwks set APP --url URL --issuer ISS --audience AUD [--app-claim CLAIM]
                                APP's identity provider: its RS256/ES256 user tokens, verified
                                with the key set at URL
  jwks remove APP               no identity provider

Output is JSON. Changes go to MySQL (VOICEROOM_MYSQL_DSN), secrets sealed with
VOICEROOM_APPS_SECRET_KEY; every serve sees them within
VOICEROOM_AUTH_REFRESH_INTERVAL, and a new key from its first use. See docs/auth.md.
`

// appsCmd is `voiceroom apps`: platform operators' commands on the apps
// and their keys, straight on MySQL (the /platform routes do the same
// over HTTP).
func appsCmd(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Print(appsUsage)
		return nil
	}
	cfg, log, db, err := oneShot(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	sealer, _, err := cfg.appsSealer(log, true)
	if err != nil {
		return err
	}
	store, err := apps.NewStore(db, sealer, cfg.appsStore(), log)
	if err != nil {
		return configErr(err, "apps", appsVars)
	}
	out, err := runApps(ctx, store, cliOperator(), args)
	if err != nil {
		return err
	}
	if k, ok := out.(apps.WithNewKey); ok {
		fmt.Fprintf(os.Stderr, "voiceroom apps: key %s of app %s: its secret is shown this once; give it to the app's backend "+
			"(it signs HS256 tokens with header kid %q)\n", k.NewKey.KeyID, k.AppCode, k.NewKey.KeyID)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// runApps runs one apps command on store.
func runApps(ctx context.Context, store *apps.Store, operator string, args []string) (any, error) {
	usage := func(format string, a ...any) error {
		return fmt.Errorf("%w: apps: %s (voiceroom apps --help)", errUsage, fmt.Sprintf(format, a...))
	}
	one := func(want int) ([]string, error) {
		if len(args) != want {
			return nil, usage("%s takes %d argument(s)", args[0], want-1)
		}
		return args[1:], nil
	}
	switch args[0] {
	case "list":
		if _, err := one(1); err != nil {
			return nil, err
		}
		list, err := store.List(ctx)
		return map[string]any{"apps": list}, err
	case "show", "create", "disable", "enable":
		a, err := one(2)
		if err != nil {
			return nil, err
		}
		switch args[0] {
		case "show":
			return store.Get(ctx, a[0])
		case "create":
			return store.Create(ctx, a[0], operator)
		case "disable":
			return store.SetStatus(ctx, a[0], apps.StatusDisabled, operator)
		}
		return store.SetStatus(ctx, a[0], apps.StatusActive, operator)
	case "keys":
		return runKeys(ctx, store, operator, args[1:], usage)
	case "jwks":
		return runJWKS(ctx, store, operator, args[1:], usage)
	}
	return nil, usage("unknown command %q", args[0])
}

func runKeys(ctx context.Context, store *apps.Store, operator string, args []string, usage func(string, ...any) error) (any, error) {
	if len(args) == 0 {
		return nil, usage("keys: rotate or revoke")
	}
	switch args[0] {
	case "rotate":
		fs := flag.NewFlagSet("rotate", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		grace := fs.Duration("grace", -1, "how long the other keys verify on (default VOICEROOM_AUTH_KEY_GRACE)")
		app, err := appAndFlags(fs, args[1:])
		if err != nil {
			return nil, usage("keys rotate APP [--grace 24h]: %v", err)
		}
		var g *time.Duration
		if *grace >= 0 {
			g = grace
		}
		return store.Rotate(ctx, app, g, operator)
	case "revoke":
		if len(args) != 3 {
			return nil, usage("keys revoke APP KEY_ID")
		}
		return store.Revoke(ctx, args[1], args[2], operator)
	}
	return nil, usage("keys: unknown command %q", args[0])
}

func runJWKS(ctx context.Context, store *apps.Store, operator string, args []string, usage func(string, ...any) error) (any, error) {
	if len(args) == 0 {
		return nil, usage("jwks: set or remove")
	}
	switch args[0] {
	case "set":
		fs := flag.NewFlagSet("set", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var j apps.JWKS
		fs.StringVar(&j.URL, "url", "", "the key set's URL (https)")
		fs.StringVar(&j.Issuer, "issuer", "", "the tokens' iss")
		fs.StringVar(&j.Audience, "audience", "", "a value of the tokens' aud")
		fs.StringVar(&j.AppClaim, "app-claim", "", "the claim naming the app (default app_code)")
		app, err := appAndFlags(fs, args[1:])
		if err != nil {
			return nil, usage("jwks set APP --url URL --issuer ISS --audience AUD [--app-claim CLAIM]: %v", err)
		}
		return store.SetJWKS(ctx, app, j, operator)
	case "remove":
		if len(args) != 2 {
			return nil, usage("jwks remove APP")
		}
		return store.RemoveJWKS(ctx, args[1], operator)
	}
	return nil, usage("jwks: unknown command %q", args[0])
}

// appAndFlags reads "APP --flag ..." or "--flag ... APP".
func appAndFlags(fs *flag.FlagSet, args []string) (string, error) {
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		if err := fs.Parse(args[1:]); err != nil {
			return "", err
		}
		if fs.NArg() != 0 {
			return "", fmt.Errorf("unexpected %q", fs.Arg(0))
		}
		return args[0], nil
	}
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() != 1 {
		return "", fmt.Errorf("name one app")
	}
	return fs.Arg(0), nil
}

// cliOperator names who ran the command in the apps' audit columns.
func cliOperator() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli"
}
