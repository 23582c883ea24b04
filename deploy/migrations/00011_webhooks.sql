-- Webhook endpoints (package webhooks): each app's own backends, which the
-- webhooks sink POSTs signed room events to. At most a few per app
-- (webhooks.MaxEndpointsPerApp), managed under /admin/v1/webhooks.
--
-- secret and old_secret are the signing keys sealed with AES-256-GCM under
-- VOICEROOM_WEBHOOKS_SECRET_KEY (the app code is the additional data, so a
-- sealed key copied to another app's row does not open): a dump of the
-- table does not give them away. old_secret is the key before the last
-- rotation, still signing until old_secret_until_ms.
--
-- cursor_seq is written only by the process delivering (the webhooks
-- role's lease holder): NULL while every event the endpoint has not had yet
-- is held by the durable consumer "webhooks"; otherwise the ROOM_EVENTS
-- sequence from which the endpoint reads its backlog back from the stream
-- (paused, or catching up). See webhooks/doc.go.

-- +goose Up

CREATE TABLE webhook_endpoints (
  endpoint_id         BIGINT          NOT NULL AUTO_INCREMENT,
  app_code            VARCHAR(32)     NOT NULL,
  url                 VARCHAR(2048)   NOT NULL,
  event_types         VARCHAR(4096)   NOT NULL DEFAULT '',  -- comma-separated; empty: every type
  enabled             TINYINT(1)      NOT NULL DEFAULT 1,
  paused_reason       VARCHAR(512)    NOT NULL DEFAULT '',
  paused_at_ms        BIGINT          NOT NULL DEFAULT 0,
  secret              VARBINARY(128)  NOT NULL,
  old_secret          VARBINARY(128)  NULL,
  old_secret_until_ms BIGINT          NOT NULL DEFAULT 0,
  cursor_seq          BIGINT UNSIGNED NULL,
  created_by          VARCHAR(64)     NOT NULL DEFAULT '',
  created_at_ms       BIGINT          NOT NULL,
  updated_at_ms       BIGINT          NOT NULL,
  PRIMARY KEY (endpoint_id),
  KEY idx_webhook_endpoints_app (app_code, endpoint_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down

DROP TABLE webhook_endpoints;
