-- A retroactive activity's read back (package activity, catchup.go) that
-- found events deleted from ROOM_EVENTS (retention: max age, bytes or
-- messages) before it read them records the stream sequences lost:
-- the lowest and highest over every gap it met (0: none). Its scores are
-- then a lower bound; GET /admin/v1/activities/{id} shows it in catchup.
-- See docs/activities.md, "A start in the past".

-- +goose Up

ALTER TABLE activities
  ADD COLUMN catchup_lost_from_seq BIGINT UNSIGNED NOT NULL DEFAULT 0,
  ADD COLUMN catchup_lost_to_seq BIGINT UNSIGNED NOT NULL DEFAULT 0;

-- +goose Down

ALTER TABLE activities
  DROP COLUMN catchup_lost_from_seq,
  DROP COLUMN catchup_lost_to_seq;
