-- A retroactive activity's read back from ROOM_EVENTS (activity/catchup.go):
--   catchup_state gains 'joining' (none | reading | joining | joined): the
--           read back reached the stream's end and the live durable scores
--           the activity from live_from_seq + 1 on, while the read back goes
--           on until every live consumer's list knows it;
--   catchup_owner/catchup_lease_until_ms: the process reading it back (one
--           per activity at a time; taken over when the lease lapses);
--   activity_mic_open.since_version: the room_version of the event that
--           opened a session. An end closes only a session opened by an
--           earlier event of the room, so that an end read late (the read
--           back and the live durable both score the seam) never closes a
--           session opened after it.
-- See activity/doc.go, "Retroactive start".

-- +goose Up

ALTER TABLE activities
  ADD COLUMN catchup_owner          VARCHAR(64) NOT NULL DEFAULT '' AFTER live_from_seq,
  ADD COLUMN catchup_lease_until_ms BIGINT      NOT NULL DEFAULT 0 AFTER catchup_owner,
  ADD KEY idx_activities_catchup (catchup_state);

ALTER TABLE activity_mic_open ADD COLUMN since_version BIGINT NOT NULL DEFAULT 0 AFTER since_ms;

-- +goose Down

ALTER TABLE activity_mic_open DROP COLUMN since_version;
ALTER TABLE activities DROP KEY idx_activities_catchup, DROP COLUMN catchup_lease_until_ms, DROP COLUMN catchup_owner;
