-- The tables of spec/region-room-list.md and spec/room-outbox-compensation-worker.md.
-- Times are Unix milliseconds (BIGINT *_at_ms). Every key starts with app_code,
-- except those of cross-app workers (the outbox relay), which say so.

-- +goose Up

-- Regions: a list bucket. region_id 0 is GLOBAL and is never stored here.
CREATE TABLE regions (
  app_code      VARCHAR(32)  NOT NULL,
  region_id     BIGINT       NOT NULL AUTO_INCREMENT,
  region_code   VARCHAR(16)  NOT NULL,
  name          VARCHAR(64)  NOT NULL,
  status        VARCHAR(16)  NOT NULL DEFAULT 'active', -- active | disabled
  created_at_ms BIGINT       NOT NULL,
  updated_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (app_code, region_id),
  UNIQUE KEY uk_regions_code (app_code, region_code),
  KEY idx_regions_id (region_id) -- InnoDB needs the AUTO_INCREMENT column first in some key
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Countries: ISO 3166-1 alpha-2, mapped to a region by the server.
CREATE TABLE countries (
  app_code      VARCHAR(32) NOT NULL,
  country_code  CHAR(2)     NOT NULL,
  name          VARCHAR(64) NOT NULL,
  enabled       BOOLEAN     NOT NULL DEFAULT TRUE,
  region_id     BIGINT      NOT NULL DEFAULT 0,
  created_at_ms BIGINT      NOT NULL,
  updated_at_ms BIGINT      NOT NULL,
  PRIMARY KEY (app_code, country_code),
  KEY idx_countries_region (app_code, region_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Users: the server-computed region of each user (user-service's projection).
CREATE TABLE users (
  app_code        VARCHAR(32) NOT NULL,
  user_id         BIGINT      NOT NULL,
  display_user_id VARCHAR(32) NOT NULL,
  country         CHAR(2)     NOT NULL DEFAULT '',
  region_id       BIGINT      NOT NULL DEFAULT 0,
  created_at_ms   BIGINT      NOT NULL,
  updated_at_ms   BIGINT      NOT NULL,
  PRIMARY KEY (app_code, user_id),
  UNIQUE KEY uk_users_display (app_code, display_user_id),
  KEY idx_users_country (app_code, country),
  KEY idx_users_region (app_code, region_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Rooms: recovery and base metadata. One active room per owner per app and a
-- unique short id among active rooms, enforced by generated columns that are
-- NULL once a room is closed (NULLs never collide in a unique key).
CREATE TABLE rooms (
  app_code          VARCHAR(32) NOT NULL,
  room_id           VARCHAR(64) NOT NULL,
  room_short_id     VARCHAR(32) NOT NULL DEFAULT '',
  owner_user_id     BIGINT      NOT NULL,
  status            VARCHAR(16) NOT NULL, -- active | closed
  visible_region_id BIGINT      NOT NULL DEFAULT 0,
  mode              VARCHAR(32) NOT NULL DEFAULT 'voice',
  room_version      BIGINT      NOT NULL DEFAULT 0,
  created_at_ms     BIGINT      NOT NULL,
  updated_at_ms     BIGINT      NOT NULL,
  active_owner_user_id BIGINT AS (IF(status = 'active', owner_user_id, NULL)) VIRTUAL,
  active_short_id   VARCHAR(32) AS (IF(status = 'active', room_short_id, NULL)) VIRTUAL,
  PRIMARY KEY (app_code, room_id),
  UNIQUE KEY uk_rooms_active_owner (app_code, active_owner_user_id),
  UNIQUE KEY uk_rooms_active_short_id (app_code, active_short_id),
  KEY idx_rooms_short_id (app_code, room_short_id),
  KEY idx_rooms_region_status (app_code, visible_region_id, status)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Room snapshots: the room state as of room_version (JSON), the base that
-- command-log replay starts from.
CREATE TABLE room_snapshots (
  app_code      VARCHAR(32) NOT NULL,
  room_id       VARCHAR(64) NOT NULL,
  room_version  BIGINT      NOT NULL,
  state         MEDIUMBLOB  NOT NULL,
  updated_at_ms BIGINT      NOT NULL,
  PRIMARY KEY (app_code, room_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Room command log: one row per applied command, with its result, so a
-- repeated command_id replays the first result and a restart can replay the
-- log on top of the snapshot.
CREATE TABLE room_command_log (
  app_code      VARCHAR(32)  NOT NULL,
  room_id       VARCHAR(64)  NOT NULL,
  room_version  BIGINT       NOT NULL,
  command_id    VARCHAR(64)  NOT NULL,
  command_type  VARCHAR(48)  NOT NULL,
  actor_user_id BIGINT       NOT NULL DEFAULT 0,
  request_id    VARCHAR(64)  NOT NULL DEFAULT '',
  command       BLOB         NOT NULL,
  result        MEDIUMBLOB   NULL,
  created_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (app_code, room_id, room_version),
  UNIQUE KEY uk_command_log_command (app_code, room_id, command_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Room outbox: events written in the command's transaction. status tracks only
-- the relay hop: pending = not yet stored in JetStream, published = stored.
-- idx_room_outbox_pending serves the cross-app relay ("oldest pending first",
-- id is insertion order), so it does not start with app_code.
CREATE TABLE room_outbox (
  id              BIGINT       NOT NULL AUTO_INCREMENT,
  app_code        VARCHAR(32)  NOT NULL,
  event_id        VARCHAR(64)  NOT NULL,
  room_id         VARCHAR(64)  NOT NULL,
  room_version    BIGINT       NOT NULL,
  event_type      VARCHAR(48)  NOT NULL,
  envelope        BLOB         NOT NULL, -- bus.Envelope JSON
  status          VARCHAR(16)  NOT NULL DEFAULT 'pending', -- pending | published
  retry_count     INT          NOT NULL DEFAULT 0,
  last_error      VARCHAR(255) NULL,
  created_at_ms   BIGINT       NOT NULL,
  published_at_ms BIGINT       NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_room_outbox_event (event_id),
  KEY idx_room_outbox_pending (status, id),
  KEY idx_room_outbox_room (app_code, room_id, room_version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Room list read model (the list projector's), one card per room.
-- room_version guards against applying an older event over a newer card.
CREATE TABLE room_list_entries (
  app_code            VARCHAR(32)  NOT NULL,
  room_id             VARCHAR(64)  NOT NULL,
  room_short_id       VARCHAR(32)  NOT NULL DEFAULT '',
  visible_region_id   BIGINT       NOT NULL DEFAULT 0,
  owner_user_id       BIGINT       NOT NULL,
  host_user_id        BIGINT       NOT NULL,
  title               VARCHAR(128) NOT NULL DEFAULT '',
  cover_url           VARCHAR(512) NOT NULL DEFAULT '',
  mode                VARCHAR(64)  NOT NULL,
  status              VARCHAR(32)  NOT NULL,
  locked              BOOLEAN      NOT NULL DEFAULT FALSE,
  heat                BIGINT       NOT NULL DEFAULT 0,
  online_count        INT          NOT NULL DEFAULT 0,
  seat_count          INT          NOT NULL DEFAULT 0,
  occupied_seat_count INT          NOT NULL DEFAULT 0,
  sort_score          BIGINT       NOT NULL DEFAULT 0,
  room_version        BIGINT       NOT NULL DEFAULT 0,
  created_at_ms       BIGINT       NOT NULL,
  updated_at_ms       BIGINT       NOT NULL,
  PRIMARY KEY (app_code, room_id),
  KEY idx_room_list_region_hot (app_code, visible_region_id, status, sort_score DESC, room_id),
  KEY idx_room_list_region_new (app_code, visible_region_id, status, created_at_ms DESC, room_id),
  KEY idx_room_list_owner (app_code, owner_user_id, updated_at_ms),
  KEY idx_room_list_short_id (app_code, room_short_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Region pins: operators' ordering control of a region's public list.
CREATE TABLE room_region_pins (
  pin_id            BIGINT      NOT NULL AUTO_INCREMENT,
  app_code          VARCHAR(32) NOT NULL,
  visible_region_id BIGINT      NOT NULL,
  room_id           VARCHAR(64) NOT NULL,
  weight            INT         NOT NULL DEFAULT 0,
  status            VARCHAR(16) NOT NULL DEFAULT 'active', -- active | removed
  expires_at_ms     BIGINT      NOT NULL,
  created_by        VARCHAR(64) NOT NULL DEFAULT '',
  created_at_ms     BIGINT      NOT NULL,
  updated_at_ms     BIGINT      NOT NULL,
  PRIMARY KEY (pin_id),
  KEY idx_pins_region (app_code, visible_region_id, status, expires_at_ms),
  KEY idx_pins_room (app_code, room_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE room_region_pins;
DROP TABLE room_list_entries;
DROP TABLE room_outbox;
DROP TABLE room_command_log;
DROP TABLE room_snapshots;
DROP TABLE rooms;
DROP TABLE users;
DROP TABLE countries;
DROP TABLE regions;
