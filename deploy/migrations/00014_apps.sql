-- Apps and their signing keys (package apps): each app's backend signs its
-- users' and its admins' tokens with a key of its own, named by the
-- token's kid, so that no app can act for another. Platform operators'
-- keys are configuration only (VOICEROOM_PLATFORM_KEYS), never here.
--
-- apps.updated_at_ms moves forward (GREATEST(updated_at_ms + 1, now)) on
-- every change to the app, its keys or its identity provider, in the same
-- transaction: each api process reads COUNT(*) and SUM(updated_at_ms)
-- every VOICEROOM_AUTH_REFRESH_INTERVAL and reloads the keys only when
-- they moved.
--
-- app_keys.secret is the HS256 secret sealed with AES-256-GCM under
-- VOICEROOM_APPS_SECRET_KEY, bound to app and key id (a sealed secret
-- copied to another row does not open). retire_at_ms is when the key
-- stops verifying: 0 while it is the app's current key, the end of its
-- grace period once rotated out, the moment of its revocation.
--
-- The apps that already have data are registered here, active and without
-- keys: during the upgrade window (VOICEROOM_JWT_SECRET_UNTIL) the single
-- secret keeps working for them while their backends move to keys of
-- their own (docs/auth.md, "Upgrading from one secret").

-- +goose Up

CREATE TABLE apps (
  app_code       VARCHAR(32)   NOT NULL,
  status         VARCHAR(16)   NOT NULL DEFAULT 'active', -- active | disabled
  jwks_url       VARCHAR(2048) NOT NULL DEFAULT '',
  jwks_issuer    VARCHAR(512)  NOT NULL DEFAULT '',
  jwks_audience  VARCHAR(512)  NOT NULL DEFAULT '',
  jwks_app_claim VARCHAR(256)  NOT NULL DEFAULT '',
  created_by     VARCHAR(64)   NOT NULL DEFAULT '',
  updated_by     VARCHAR(64)   NOT NULL DEFAULT '',
  created_at_ms  BIGINT        NOT NULL,
  updated_at_ms  BIGINT        NOT NULL,
  PRIMARY KEY (app_code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE app_keys (
  app_code      VARCHAR(32)                            NOT NULL,
  key_id        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  secret        VARBINARY(128)                         NOT NULL,
  created_by    VARCHAR(64)                            NOT NULL DEFAULT '',
  created_at_ms BIGINT                                 NOT NULL,
  retire_at_ms  BIGINT                                 NOT NULL DEFAULT 0,
  PRIMARY KEY (app_code, key_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT IGNORE INTO apps (app_code, status, created_by, updated_by, created_at_ms, updated_at_ms)
SELECT app_code, 'active', 'migration 00014', 'migration 00014',
       CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED), CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)
FROM (SELECT app_code FROM users
      UNION SELECT app_code FROM rooms
      UNION SELECT app_code FROM regions
      UNION SELECT app_code FROM wallets
      UNION SELECT app_code FROM webhook_endpoints) AS existing;

-- +goose Down

DROP TABLE app_keys;
DROP TABLE apps;
