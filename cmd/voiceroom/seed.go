package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"voiceroom"
	"voiceroom/apps"
	"voiceroom/regions"
)

// seed creates the development app's regions, countries and users (see
// regions.DemoData) in the app --app, migrating the database first, and
// registers the app with a development key when it has none (`voiceroom
// token` signs with it). It only creates what is missing, so running it
// before every `serve` is harmless.
func seed(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	app := fs.String("app", "demo", "app_code to seed")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: seed: %v", errUsage, err)
	}
	if !voiceroom.ValidAppCode(*app) {
		return fmt.Errorf("%w: seed: --app %q: want %s", errUsage, *app, voiceroom.AppCodeRule)
	}
	cfg, log, db, err := oneShot(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	rcfg := cfg.regions()
	rcfg.DisableCache = true // a one-shot command: nothing to cache
	svc, err := regions.New(ctx, db, log, nil, rcfg)
	if err != nil {
		return err
	}
	defer svc.Close()
	rep, err := svc.Seed(ctx, *app, regions.DemoData())
	if err != nil {
		return err
	}
	log.Info("seeded", "app_code", *app, "regions_created", rep.Regions, "countries_created", rep.Countries, "users_created", rep.Users)
	sealer, _, err := cfg.appsSealer(log, true)
	if err != nil {
		return err
	}
	store, err := apps.NewStore(db, sealer, cfg.appsStore(), log)
	if err != nil {
		return err
	}
	key, made, err := store.EnsureKey(ctx, *app, "seed")
	if err != nil {
		return fmt.Errorf("seed: a key for app %s: %w", *app, err)
	}
	if made {
		log.Info("app registered with a development key: voiceroom token signs with it", "app_code", *app, "key_id", key.ID)
	}
	return nil
}
