-- Operators' controls on rooms: one audit trail per room, and the status
-- `banned`.
--
-- room_audit holds every operator action on a room (region change, ban,
-- restore, close by an admin, pin and unpin, hide and unhide): who (the admin
-- token's sub), when, what, why, and the values before and after as JSON.
-- audit_id grows with each row, so newest first is audit_id descending and a
-- page's cursor is the last audit_id it showed.

-- +goose Up

CREATE TABLE room_audit (
  audit_id      BIGINT       NOT NULL AUTO_INCREMENT,
  app_code      VARCHAR(32)  NOT NULL,
  room_id       VARCHAR(64)  NOT NULL,
  -- The room command's version; 0 for actions outside the room's commands
  -- (pins, hides).
  room_version  BIGINT       NOT NULL DEFAULT 0,
  operator      VARCHAR(64)  NOT NULL,
  action        VARCHAR(32)  NOT NULL,
  reason        VARCHAR(256) NOT NULL DEFAULT '',
  before_value  JSON         NULL,
  after_value   JSON         NULL,
  created_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (audit_id),
  KEY idx_room_audit_room (app_code, room_id, audit_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Region changes made before this trail existed join it; new ones are
-- written to both tables.
INSERT INTO room_audit (app_code, room_id, room_version, operator, action, reason, before_value, after_value, created_at_ms)
SELECT app_code, room_id, room_version, operator, 'region_change', reason,
       JSON_OBJECT('visible_region_id', old_region_id), JSON_OBJECT('visible_region_id', new_region_id), created_at_ms
FROM room_region_audit ORDER BY id;

-- Reasons are 1..256 characters wherever an operator gives one.
ALTER TABLE room_region_audit MODIFY reason VARCHAR(256) NOT NULL;

-- A banned room still is its owner's one room (a ban cannot be dodged by
-- opening another) and keeps its short id; closing it frees both.
ALTER TABLE rooms
  MODIFY active_owner_user_id BIGINT AS (IF(status IN ('active', 'banned'), owner_user_id, NULL)) VIRTUAL,
  MODIFY active_short_id VARCHAR(32) AS (IF(status IN ('active', 'banned'), room_short_id, NULL)) VIRTUAL;

-- +goose Down
ALTER TABLE rooms
  MODIFY active_owner_user_id BIGINT AS (IF(status = 'active', owner_user_id, NULL)) VIRTUAL,
  MODIFY active_short_id VARCHAR(32) AS (IF(status = 'active', room_short_id, NULL)) VIRTUAL;
ALTER TABLE room_region_audit MODIFY reason VARCHAR(255) NOT NULL;
DROP TABLE room_audit;
