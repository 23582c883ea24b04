package main

import (
	"fmt"
	"net/url"
	"time"

	"voiceroom/bus"
	"voiceroom/gateway"
	"voiceroom/imbridge"
)

// IMConfig is the Tencent IM configuration: the default application
// (VOICEROOM_TIM_*), the per-app file and the bridge's tuning.
type IMConfig struct {
	TIMDomain        string `env:"VOICEROOM_TIM_DOMAIN"`
	TIMSDKAppID      int64  `env:"VOICEROOM_TIM_SDKAPPID"`
	TIMAdmin         string `env:"VOICEROOM_TIM_ADMIN" envDefault:"administrator"`
	TIMSecretKey     string `env:"VOICEROOM_TIM_SECRET_KEY"`
	TIMCallbackToken string `env:"VOICEROOM_TIM_CALLBACK_TOKEN"`
	TIMApps          string `env:"VOICEROOM_TIM_APPS"`

	TIMCallbackMaxSkew time.Duration `env:"VOICEROOM_TIM_CALLBACK_MAX_SKEW" envDefault:"60s"`

	IMBridgeCallTimeout     time.Duration `env:"VOICEROOM_IMBRIDGE_CALL_TIMEOUT" envDefault:"3s"`
	IMBridgeCallsPerSecond  float64       `env:"VOICEROOM_IMBRIDGE_CALLS_PER_SECOND" envDefault:"160"`
	IMBridgeGroupMsgsPerSec float64       `env:"VOICEROOM_IMBRIDGE_GROUP_MESSAGES_PER_SECOND" envDefault:"20"`
	IMBridgeSenders         int           `env:"VOICEROOM_IMBRIDGE_SENDERS" envDefault:"32"`
	IMBridgeFetchBatch      int           `env:"VOICEROOM_IMBRIDGE_FETCH_BATCH" envDefault:"16384"`
	IMBridgeMaxBatchEvents  int           `env:"VOICEROOM_IMBRIDGE_MAX_BATCH_EVENTS" envDefault:"64"`
	imApps                  imbridge.Apps // built by loadConfig from the settings above
}

// apps checks the Tencent application settings and builds the
// applications they give (the default one and the VOICEROOM_TIM_APPS
// file's); it changes nothing. Errors name the variable. The bridge's and
// the callback guard's tuning is checked by their Configs (imBridgeVars).
func (c IMConfig) apps() ([]*configError, imbridge.Apps) {
	var errs []*configError
	check := func(ok bool, name, format string, args ...any) {
		if !ok {
			errs = append(errs, &configError{Var: name, Msg: fmt.Sprintf(format, args...)})
		}
	}
	apps := imbridge.Apps{}
	if c.TIMSDKAppID != 0 || c.TIMSecretKey != "" || c.TIMDomain != "" {
		app := imbridge.Application{SDKAppID: c.TIMSDKAppID, Admin: c.TIMAdmin, SecretKey: c.TIMSecretKey,
			CallbackToken: c.TIMCallbackToken, Domain: c.TIMDomain}
		check(c.TIMSDKAppID > 0, "VOICEROOM_TIM_SDKAPPID", "want the application's SDKAppID with VOICEROOM_TIM_DOMAIN or _SECRET_KEY set, got %d", c.TIMSDKAppID)
		check(c.TIMSecretKey != "", "VOICEROOM_TIM_SECRET_KEY", "required with VOICEROOM_TIM_SDKAPPID")
		check(c.TIMAdmin != "" && len(c.TIMAdmin) <= 32, "VOICEROOM_TIM_ADMIN", "want 1..32 bytes")
		if c.TIMDomain != "" {
			u, err := url.Parse(c.TIMDomain)
			check(err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "", "VOICEROOM_TIM_DOMAIN", "want an http(s) URL, got %q", c.TIMDomain)
		}
		if app.Validate() == nil {
			apps.Default = &app
		}
	}
	if c.TIMApps != "" {
		byApp, err := imbridge.LoadAppsFile(c.TIMApps)
		check(err == nil, "VOICEROOM_TIM_APPS", "%v", err)
		apps.ByApp = byApp
	}
	return errs, apps
}

// imBridgeVars are the variables that set imbridge.Config's fields (its
// consumer's by sinkVars) and imbridge.GuardConfig's.
func imBridgeVars() map[string]string {
	vars := sinkVars(bus.DurableIMBridge)
	for field, name := range map[string]string{
		"FetchBatch": "VOICEROOM_IMBRIDGE_FETCH_BATCH", "CallTimeout": "VOICEROOM_IMBRIDGE_CALL_TIMEOUT",
		"CallsPerSecond": "VOICEROOM_IMBRIDGE_CALLS_PER_SECOND", "GroupMessagesPerSecond": "VOICEROOM_IMBRIDGE_GROUP_MESSAGES_PER_SECOND",
		"Senders": "VOICEROOM_IMBRIDGE_SENDERS", "MaxBatchEvents": "VOICEROOM_IMBRIDGE_MAX_BATCH_EVENTS",
		"RetryDelays": "VOICEROOM_IMBRIDGE_BACKOFF", "MaxSkew": "VOICEROOM_TIM_CALLBACK_MAX_SKEW",
	} {
		vars[field] = name
	}
	return vars
}

// guardConfig is the configuration of the IM callback guard.
func (c *config) guardConfig() imbridge.GuardConfig {
	return imbridge.GuardConfig{MaxSkew: c.TIMCallbackMaxSkew}
}

// imBridgeConfig is the bridge's configuration.
func (c *config) imBridgeConfig() imbridge.Config {
	run := c.consumerRun(bus.DurableIMBridge)
	run.FetchBatch = c.IMBridgeFetchBatch
	return imbridge.Config{
		Consumer:               run,
		Client:                 imbridge.ClientConfig{CallTimeout: c.IMBridgeCallTimeout},
		CallsPerSecond:         c.IMBridgeCallsPerSecond,
		GroupMessagesPerSecond: c.IMBridgeGroupMsgsPerSec,
		Senders:                c.IMBridgeSenders,
		MaxBatchEvents:         c.IMBridgeMaxBatchEvents,
		RetryDelays:            c.IMBridgeBackOff,
	}
}

// wireIMBridge adds the imbridge role's worker: the bridge from the
// durable "imbridge" to Tencent IM. With no Tencent configuration it logs
// that once and leaves the events in the durable.
func wireIMBridge(d *deps) error {
	if !d.cfg.hasRole(roleIMBridge) {
		return nil
	}
	m, err := imbridge.NewMetrics(d.reg)
	if err != nil {
		return err
	}
	bm, err := bus.NewMetrics(d.reg)
	if err != nil {
		return err
	}
	b, err := imbridge.New(d.nats.JetStream(), d.cfg.imApps, d.cfg.imBridgeConfig(), d.log, m, bm, time.Now)
	if err != nil {
		return fmt.Errorf("imbridge: %w", err)
	}
	d.workers = append(d.workers, worker{name: "imbridge", run: b.Run})
	return nil
}

// imCallbackMount is POST /im/callback, where the rooms of this process
// answer who is present.
func imCallbackMount(d *deps, svc imbridge.Members) (gateway.Mount, error) {
	m, err := imbridge.NewMetrics(d.reg)
	if err != nil {
		return nil, err
	}
	g, err := imbridge.NewGuard(d.cfg.imApps, svc, d.cfg.guardConfig(), m, time.Now)
	if err != nil {
		return nil, fmt.Errorf("im callback: %w", err)
	}
	return gateway.IMCallbackRoutes(g), nil
}
