-- mic_seconds counts a speaker's seconds from all their seat events in
-- room order, whatever order they are scored in (activity/score_mic.go):
-- one row per seat event of a speaker in a room (user_id 0: a room's
-- close or ban, which ends every seat; room_version 2^63-1: the window's
-- end, written by settlement). kind: 1 start, 2 end, 3 a seat change.
-- activity_mic_open stays the session each speaker has open in that
-- order. (00018 and 00019 are the PK battles'.)

-- +goose Up

CREATE TABLE activity_mic_seats (
  activity_id  BIGINT      NOT NULL,
  room_id      VARCHAR(64) NOT NULL,
  user_id      BIGINT      NOT NULL,
  room_version BIGINT      NOT NULL,
  kind         TINYINT     NOT NULL,
  at_ms        BIGINT      NOT NULL,
  PRIMARY KEY (activity_id, room_id, user_id, room_version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- The sessions open before: their starts, as rows.
INSERT IGNORE INTO activity_mic_seats (activity_id, room_id, user_id, room_version, kind, at_ms)
  SELECT activity_id, room_id, user_id, since_version, 1, since_ms FROM activity_mic_open;

-- +goose Down

DROP TABLE activity_mic_seats;
