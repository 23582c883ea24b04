-- Rooms: the live presence count kept on the room row (recovery finds rooms
-- that may still hold users), the gift catalog, coin wallets with their
-- ledger, and the audit of visible-region changes.

-- +goose Up

ALTER TABLE rooms
  ADD COLUMN online_count INT NOT NULL DEFAULT 0 AFTER room_version,
  -- Cross-app start-up query of the rooms role: active rooms that still list
  -- users, loaded so the presence sweeper can clear them.
  ADD KEY idx_rooms_online (status, online_count);

-- Command ids are looked up by room; this index also serves "which room did
-- this create key make".
ALTER TABLE room_command_log
  ADD KEY idx_command_log_actor (app_code, actor_user_id, command_type, command_id);

CREATE TABLE gifts (
  app_code      VARCHAR(32) NOT NULL,
  gift_id       BIGINT      NOT NULL,
  name          VARCHAR(64) NOT NULL,
  price         BIGINT      NOT NULL, -- coins per gift
  heat          BIGINT      NOT NULL, -- heat per gift
  enabled       BOOLEAN     NOT NULL DEFAULT TRUE,
  created_at_ms BIGINT      NOT NULL,
  updated_at_ms BIGINT      NOT NULL,
  PRIMARY KEY (app_code, gift_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Coin balances. The CHECK is a last line of defence: debits are
-- conditional updates (balance >= amount) in the command's transaction.
CREATE TABLE wallets (
  app_code      VARCHAR(32) NOT NULL,
  user_id       BIGINT      NOT NULL,
  balance       BIGINT      NOT NULL DEFAULT 0,
  updated_at_ms BIGINT      NOT NULL,
  PRIMARY KEY (app_code, user_id),
  CONSTRAINT chk_wallets_balance CHECK (balance >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- One row per balance change, keyed so that a repeated credit or gift
-- command cannot move coins twice: "credit:<idempotency key>" or
-- "gift:<room_id>:<command_id>".
CREATE TABLE wallet_ledger (
  app_code      VARCHAR(32)  NOT NULL,
  entry_key     VARCHAR(160) NOT NULL,
  user_id       BIGINT       NOT NULL,
  delta         BIGINT       NOT NULL,
  kind          VARCHAR(16)  NOT NULL, -- credit | gift
  room_id       VARCHAR(64)  NOT NULL DEFAULT '',
  operator      VARCHAR(64)  NOT NULL DEFAULT '',
  created_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (app_code, entry_key),
  KEY idx_ledger_user (app_code, user_id, created_at_ms)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE room_region_audit (
  id            BIGINT       NOT NULL AUTO_INCREMENT,
  app_code      VARCHAR(32)  NOT NULL,
  room_id       VARCHAR(64)  NOT NULL,
  room_version  BIGINT       NOT NULL,
  old_region_id BIGINT       NOT NULL,
  new_region_id BIGINT       NOT NULL,
  operator      VARCHAR(64)  NOT NULL,
  reason        VARCHAR(255) NOT NULL,
  created_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (id),
  KEY idx_room_region_audit_room (app_code, room_id, created_at_ms)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE room_region_audit;
DROP TABLE wallet_ledger;
DROP TABLE wallets;
DROP TABLE gifts;
ALTER TABLE room_command_log DROP KEY idx_command_log_actor;
ALTER TABLE rooms DROP KEY idx_rooms_online, DROP COLUMN online_count;
