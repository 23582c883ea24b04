-- Contribution ranks: a gift's ledger row names its receiver, and one index
-- serves "coins of the gifts in room R between t0 and t1, by sender or by
-- receiver" (package roomranks). The index holds every column that query
-- reads, so it never touches the rows. created_at_ms of a gift row is the
-- gift command's time (the event's occurred_at_ms), which puts the gift in
-- the same day and week in MySQL and in Redis. Rows written before this
-- migration have receiver 0: they count for their senders only.

-- +goose Up

ALTER TABLE wallet_ledger
  ADD COLUMN peer_user_id BIGINT NOT NULL DEFAULT 0 AFTER user_id,
  ADD KEY idx_ledger_room (app_code, room_id, kind, created_at_ms, user_id, peer_user_id, delta);

-- +goose Down
ALTER TABLE wallet_ledger DROP KEY idx_ledger_room, DROP COLUMN peer_user_id;
