-- Hides (package listprojector): an operator hides a room from one region's
-- lists and search. The room stays joinable by id; other regions and apps
-- are not touched.
--
-- A hide applies while status is 'active' and expires_at_ms is 0 (never) or
-- in the future. The list query reads a region's applying hides on every
-- request (idx_hides_region), so a hide or an unhide is seen by the next
-- list request; nothing about hides is cached.

-- +goose Up

CREATE TABLE room_region_hides (
  hide_id           BIGINT       NOT NULL AUTO_INCREMENT,
  app_code          VARCHAR(32)  NOT NULL,
  visible_region_id BIGINT       NOT NULL,
  room_id           VARCHAR(96)  NOT NULL,
  reason            VARCHAR(256) NOT NULL,
  status            VARCHAR(16)  NOT NULL DEFAULT 'active', -- active | removed
  expires_at_ms     BIGINT       NOT NULL DEFAULT 0,        -- 0: never
  created_by        VARCHAR(64)  NOT NULL DEFAULT '',
  created_at_ms     BIGINT       NOT NULL,
  updated_at_ms     BIGINT       NOT NULL,
  PRIMARY KEY (hide_id),
  KEY idx_hides_region (app_code, visible_region_id, status, room_id, expires_at_ms),
  KEY idx_hides_room (app_code, room_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE room_region_hides;
