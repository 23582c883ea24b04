package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"voiceroom/bus"
	"voiceroom/gateway"
	"voiceroom/webhooks"
)

// WebhooksConfig is the webhooks sink's and the admin routes'
// configuration, a part of config.
type WebhooksConfig struct {
	WebhooksSecretKey      string          `env:"VOICEROOM_WEBHOOKS_SECRET_KEY"`
	WebhooksAllowHTTP      bool            `env:"VOICEROOM_WEBHOOKS_ALLOW_HTTP" envDefault:"false"`
	WebhooksAllowPrivate   bool            `env:"VOICEROOM_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES" envDefault:"false"`
	WebhooksRotationWindow time.Duration   `env:"VOICEROOM_WEBHOOKS_ROTATION_WINDOW" envDefault:"24h"`
	WebhooksTimeout        time.Duration   `env:"VOICEROOM_WEBHOOKS_TIMEOUT" envDefault:"10s"`
	WebhooksConcurrency    int             `env:"VOICEROOM_WEBHOOKS_CONCURRENCY" envDefault:"16"`
	WebhooksMaxBatchEvents int             `env:"VOICEROOM_WEBHOOKS_MAX_BATCH_EVENTS" envDefault:"100"`
	WebhooksBackOff        []time.Duration `env:"VOICEROOM_WEBHOOKS_BACKOFF" envDefault:"1s" envSeparator:","`
	WebhooksPauseAfter     time.Duration   `env:"VOICEROOM_WEBHOOKS_PAUSE_AFTER" envDefault:"15m"`
	WebhooksMaxHeld        int             `env:"VOICEROOM_WEBHOOKS_MAX_HELD" envDefault:"1000"`
	WebhooksFetchBatch     int             `env:"VOICEROOM_WEBHOOKS_FETCH_BATCH" envDefault:"4096"`
	WebhooksAckWait        time.Duration   `env:"VOICEROOM_WEBHOOKS_ACK_WAIT" envDefault:"30s"`
	WebhooksMaxAckPending  int             `env:"VOICEROOM_WEBHOOKS_MAX_ACK_PENDING" envDefault:"8192"`
	WebhooksLeaseTTL       time.Duration   `env:"VOICEROOM_WEBHOOKS_LEASE_TTL" envDefault:"15s"`
	WebhooksHistoryEvery   time.Duration   `env:"VOICEROOM_WEBHOOKS_HISTORY_INTERVAL" envDefault:"100ms"`
}

// webhooksVars are the variables that set webhooks.Config's and
// webhooks.EndpointsConfig's fields (the consumer's by sinkVars).
func webhooksVars() map[string]string {
	vars := sinkVars(bus.DurableWebhooks)
	for field, name := range map[string]string{
		"Timeout": "VOICEROOM_WEBHOOKS_TIMEOUT", "Concurrency": "VOICEROOM_WEBHOOKS_CONCURRENCY",
		"MaxBatchEvents": "VOICEROOM_WEBHOOKS_MAX_BATCH_EVENTS", "RetryDelays": "VOICEROOM_WEBHOOKS_BACKOFF",
		"PauseAfter": "VOICEROOM_WEBHOOKS_PAUSE_AFTER", "MaxHeld": "VOICEROOM_WEBHOOKS_MAX_HELD",
		"FetchBatch": "VOICEROOM_WEBHOOKS_FETCH_BATCH", "LeaseTTL": "VOICEROOM_WEBHOOKS_LEASE_TTL",
		"HistoryInterval": "VOICEROOM_WEBHOOKS_HISTORY_INTERVAL",
		"RotationWindow":  "VOICEROOM_WEBHOOKS_ROTATION_WINDOW", "Replicas": "VOICEROOM_STREAM_REPLICAS",
	} {
		vars[field] = name
	}
	return vars
}

// validate checks the variables the packages' Configs do not see; errors
// go to errs.
func (c WebhooksConfig) validate(errs *varErrors) {
	if c.WebhooksSecretKey != "" {
		if _, err := webhooks.ParseKey(c.WebhooksSecretKey); err != nil {
			errs.add(&configError{Var: "VOICEROOM_WEBHOOKS_SECRET_KEY", Msg: "want 32 bytes as 64 hex digits or base64 (openssl rand -hex 32)"})
		}
	}
	if c.WebhooksFetchBatch > c.WebhooksMaxAckPending {
		errs.add(&configError{Var: "VOICEROOM_WEBHOOKS_FETCH_BATCH", Msg: fmt.Sprintf("must be at most VOICEROOM_WEBHOOKS_MAX_ACK_PENDING (%d)", c.WebhooksMaxAckPending)})
	}
	if c.WebhooksAckWait < time.Second {
		errs.add(&configError{Var: "VOICEROOM_WEBHOOKS_ACK_WAIT", Msg: fmt.Sprintf("want at least 1s, got %v", c.WebhooksAckWait)})
	}
}

// policy is what an endpoint's URL may be.
func (c WebhooksConfig) policy() webhooks.Policy {
	return webhooks.Policy{AllowHTTP: c.WebhooksAllowHTTP, AllowPrivate: c.WebhooksAllowPrivate}
}

// endpointsConfig is the admin side's configuration.
func (c WebhooksConfig) endpointsConfig() webhooks.EndpointsConfig {
	return webhooks.EndpointsConfig{Policy: c.policy(), RotationWindow: c.WebhooksRotationWindow}
}

// webhooksConfig is the sink's configuration.
func (c *config) webhooksConfig() webhooks.Config {
	run := c.consumerRun(bus.DurableWebhooks)
	run.FetchBatch = c.WebhooksFetchBatch
	return webhooks.Config{
		Consumer:        run,
		Policy:          c.policy(),
		Timeout:         c.WebhooksTimeout,
		Concurrency:     c.WebhooksConcurrency,
		MaxBatchEvents:  c.WebhooksMaxBatchEvents,
		RetryDelays:     c.WebhooksBackOff,
		PauseAfter:      c.WebhooksPauseAfter,
		MaxHeld:         c.WebhooksMaxHeld,
		LeaseTTL:        c.WebhooksLeaseTTL,
		HistoryInterval: c.WebhooksHistoryEvery,
		Replicas:        c.StreamReplicas,
	}
}

// webhooksSealer returns the sealer of signing secrets: the key of
// VOICEROOM_WEBHOOKS_SECRET_KEY or, when it is empty (development), a key
// generated once into $VOICEROOM_DATA_DIR/webhooks-secret-key, as for the
// JWT key. Every process with the api or webhooks role needs the same key.
func (c *config) webhooksSealer(log *slog.Logger) (*webhooks.Sealer, error) {
	raw, err := c.devKey(log, "VOICEROOM_WEBHOOKS_SECRET_KEY", c.WebhooksSecretKey, "webhooks-secret-key", true,
		func() string { return hex.EncodeToString(randomBytes(webhooks.KeySize)) })
	if err != nil {
		return nil, err
	}
	key, err := webhooks.ParseKey(raw)
	if err != nil {
		return nil, badVar("VOICEROOM_WEBHOOKS_SECRET_KEY", "%v", err)
	}
	return webhooks.NewSealer(key)
}

// wireWebhooks adds the admin routes (api role) and the sink (webhooks
// role: it delivers while it holds the delivery lease).
func wireWebhooks(ctx context.Context, d *deps) error {
	api, role := d.cfg.hasRole(roleAPI), d.cfg.hasRole(roleWebhooks)
	if !api && !role {
		return nil
	}
	sealer, err := d.cfg.webhooksSealer(d.log)
	if err != nil {
		return err
	}
	js := d.nats.JetStream()
	if api {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		history, err := webhooks.OpenDeliveryLog(octx, js, d.cfg.StreamReplicas)
		cancel()
		if err != nil {
			return fmt.Errorf("webhooks: %w", err)
		}
		eps, err := webhooks.NewEndpoints(d.db, js, sealer, history, d.cfg.endpointsConfig())
		if err != nil {
			return fmt.Errorf("webhooks: %w", err)
		}
		d.mounts = append(d.mounts, gateway.WebhookRoutes(eps))
	}
	if role {
		m, err := webhooks.NewMetrics(d.reg)
		if err != nil {
			return err
		}
		bm, err := bus.NewMetrics(d.reg)
		if err != nil {
			return err
		}
		holder := d.cfg.NodeID + "-" + hex.EncodeToString(randomBytes(4))
		s, err := webhooks.New(d.db, js, sealer, holder, d.cfg.webhooksConfig(), d.log, m, bm)
		if err != nil {
			return fmt.Errorf("webhooks: %w", err)
		}
		d.workers = append(d.workers, worker{name: "webhooks", run: s.Run})
	}
	return nil
}

// randomBytes returns n random bytes.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
