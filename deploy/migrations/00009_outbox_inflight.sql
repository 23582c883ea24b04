-- Outbox rows the fast path publishes are not marked one by one. A group
-- commit whose events the fast path takes writes its room_outbox rows with
-- status 'published' (published_at_ms NULL) and one row here covering
-- their ids, first_id..last_id (one multi-row INSERT: consecutive ids under
-- innodb_autoinc_lock_mode 0 or 1). While that row exists the group's
-- rows are in flight: pending, for every reader (the relay, the
-- operators' outbox report, the pending metrics, a room's load). Once the
-- fast path has every event of the group acked by the stream it deletes
-- the row: one row written and one deleted per group, instead of one
-- UPDATE per event. If it cannot publish one of them, or its process
-- dies, the group's rows are set back to pending (by the fast path at
-- once, or by a relay once the row is older than its in-flight grace) and
-- the relay publishes them as any other pending row.

-- +goose Up

CREATE TABLE room_outbox_inflight (
  first_id      BIGINT      NOT NULL,
  last_id       BIGINT      NOT NULL,
  created_at_ms BIGINT      NOT NULL,
  PRIMARY KEY (first_id),
  KEY idx_room_outbox_inflight_created (created_at_ms)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down

DROP TABLE room_outbox_inflight;
