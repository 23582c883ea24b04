-- PK battles' pruning (package pk, pk.Clock.Prune): once a battle has been
-- settled longer than the retention (VOICEROOM_PK_RETENTION, default 168h),
-- its pk_seen rows are deleted and its pk_senders cut to each side's top
-- 3, which GET /api/v1/pk/{battle_id} shows for good; pruned_at_ms marks
-- it done. See docs/pk.md, "Pruning".

-- +goose Up

ALTER TABLE pk_battles
  ADD COLUMN pruned_at_ms BIGINT NOT NULL DEFAULT 0,
  ADD KEY idx_pk_battles_prune (status, pruned_at_ms, ended_at_ms);

-- +goose Down

ALTER TABLE pk_battles
  DROP KEY idx_pk_battles_prune,
  DROP COLUMN pruned_at_ms;
