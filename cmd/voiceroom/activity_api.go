package main

import (
	"voiceroom/activity"
	"voiceroom/gateway"
	"voiceroom/regions"
)

// ActivityDefineConfig is the activities' admin routes' configuration
// (activity.DefineConfig), a part of config.
type ActivityDefineConfig struct {
	ActivityMaxRewardCoins int64 `env:"VOICEROOM_ACTIVITY_MAX_REWARD_COINS" envDefault:"10000000"`
}

// activityDefineVars are the variables that set activity.DefineConfig's
// fields.
var activityDefineVars = map[string]string{"MaxRewardCoins": "VOICEROOM_ACTIVITY_MAX_REWARD_COINS"}

// defineConfig is the definitions' configuration.
func (c ActivityDefineConfig) defineConfig() activity.DefineConfig {
	return activity.DefineConfig{MaxRewardCoins: c.ActivityMaxRewardCoins}
}

// wireActivityAPI adds the activities' definition routes (api role):
// POST/GET /admin/v1/activities..., GET /api/v1/activities.
func wireActivityAPI(d *deps, regionSvc *regions.Service) error {
	cfg := d.cfg.defineConfig()
	cfg.Log = d.log.With("component", "activity")
	def, err := activity.NewDefiner(activity.NewStore(d.db, nil), regionSvc, d.nats.JetStream(), cfg)
	if err != nil {
		return err
	}
	d.mounts = append(d.mounts, gateway.ActivityRoutes(def, regionSvc))
	return nil
}
