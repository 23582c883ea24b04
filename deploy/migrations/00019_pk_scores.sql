-- PK battles' scores (package pk): the durable consumer pk counts each
-- RoomGiftSent received in a battle's room inside [starts_at_ms,
-- ends_at_ms) once, by event id, and keeps each side's senders for the
-- top 3. See pk/doc.go, "Scoring".

-- +goose Up

-- score_seq grows by one with every gift scored (the sequence number of
-- RoomPKScoreChanged); told_seq is the last one both rooms were told.
ALTER TABLE pk_battles
  ADD COLUMN score_seq BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN told_seq  BIGINT NOT NULL DEFAULT 0;

-- Each event counted once per battle: a row per (battle, event) in the
-- transaction that adds its value; a redelivered or replayed event finds
-- its row and counts nothing.
CREATE TABLE pk_seen (
  battle_id VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  event_id  VARCHAR(96) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  PRIMARY KEY (battle_id, event_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- The coins each sender gave to one side (room_id) of a battle.
CREATE TABLE pk_senders (
  battle_id VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  room_id   VARCHAR(96) NOT NULL,
  user_id   BIGINT      NOT NULL,
  coins     BIGINT      NOT NULL,
  PRIMARY KEY (battle_id, room_id, user_id),
  KEY idx_pk_senders_top (battle_id, room_id, coins)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
