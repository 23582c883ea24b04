-- room_list_entries loses idx_room_list_owner (00001): no query reads it
-- (the list is read by region and status, through the hot and new
-- indexes, and by primary key). It held updated_at_ms, so every card the
-- projector wrote moved the room's entry in it: a secondary index delete
-- and insert, and their redo, per written card.

-- +goose Up

ALTER TABLE room_list_entries DROP KEY idx_room_list_owner;

-- +goose Down

ALTER TABLE room_list_entries
  ADD KEY idx_room_list_owner (app_code, owner_user_id, updated_at_ms);
