-- PK battles between two rooms (package pk). A battle's row is the truth
-- of its state and its clock: the pk clock (a lease per battle, like an
-- activity's settlement) expires invitations, ends battles when time is
-- up or a room closed, settles each result once and tells both rooms
-- (room commands PKStart and PKEnd) until both have it. See pk/doc.go.

-- +goose Up

-- One battle: room_id invited opponent_room_id. status moves forward only:
--   pending -> running -> ended, or pending -> declined | expired.
-- notified: bits of what the rooms were told, 1 room started, 2 opponent
-- started, 4 room ended, 8 opponent ended. winner_room_id is '' on a draw.
CREATE TABLE pk_battles (
  app_code             VARCHAR(32) NOT NULL,
  battle_id            VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  room_id              VARCHAR(96) NOT NULL,
  opponent_room_id     VARCHAR(96) NOT NULL,
  invited_by           BIGINT      NOT NULL,
  duration_seconds     INT         NOT NULL,
  status               VARCHAR(16) NOT NULL,
  invited_at_ms        BIGINT      NOT NULL,
  invite_expires_at_ms BIGINT      NOT NULL,
  starts_at_ms         BIGINT      NOT NULL DEFAULT 0,
  ends_at_ms           BIGINT      NOT NULL DEFAULT 0,
  ended_at_ms          BIGINT      NOT NULL DEFAULT 0,
  room_score           BIGINT      NOT NULL DEFAULT 0,
  opponent_score       BIGINT      NOT NULL DEFAULT 0,
  reason               VARCHAR(16) NOT NULL DEFAULT '',
  winner_room_id       VARCHAR(96) NOT NULL DEFAULT '',
  notified             INT         NOT NULL DEFAULT 0,
  clock_owner          VARCHAR(64) NOT NULL DEFAULT '',
  clock_lease_until_ms BIGINT      NOT NULL DEFAULT 0,
  updated_at_ms        BIGINT      NOT NULL,
  PRIMARY KEY (battle_id),
  KEY idx_pk_battles_app (app_code, battle_id),
  KEY idx_pk_battles_due (status, ends_at_ms),
  KEY idx_pk_battles_notified (status, notified)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- A room's one battle, pending or running: written with the invitation,
-- deleted when the battle is declined, expires or ends. Its key is the
-- rule "a room is in at most one battle", across every process.
CREATE TABLE pk_room_slots (
  app_code  VARCHAR(32) NOT NULL,
  room_id   VARCHAR(96) NOT NULL,
  battle_id VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  PRIMARY KEY (app_code, room_id),
  KEY idx_pk_room_slots_battle (battle_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
