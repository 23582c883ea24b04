-- The room list (package listprojector): what the projector needs beyond the
-- tables of 00001. room_list_entries.room_version (00001) is the version
-- guard: a card is written only over an older one.

-- +goose Up

ALTER TABLE room_list_entries
  -- The Tencent IM group of the room (equal to room_id today).
  ADD COLUMN im_group_id VARCHAR(64) NOT NULL DEFAULT '' AFTER room_short_id,
  -- Search: room_short_id matches exactly (idx_room_list_short_id), the title
  -- by prefix inside the caller's region.
  ADD KEY idx_room_list_title (app_code, visible_region_id, status, title),
  -- Reconcile: the rooms whose freshness boost may still step down.
  ADD KEY idx_room_list_fresh (status, created_at_ms);

-- A pin applies where app, region and room match an active, unexpired pin and
-- the room's card is active in that same region.
ALTER TABLE room_region_pins
  ADD KEY idx_pins_room_region (app_code, visible_region_id, room_id, status, expires_at_ms);

-- +goose Down
ALTER TABLE room_region_pins DROP KEY idx_pins_room_region;
ALTER TABLE room_list_entries DROP KEY idx_room_list_fresh, DROP KEY idx_room_list_title, DROP COLUMN im_group_id;
