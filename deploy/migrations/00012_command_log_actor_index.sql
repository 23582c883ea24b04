-- room_command_log loses idx_command_log_actor (00003): no query reads
-- it. A command is looked up by its room and command_id (a repeated
-- CreateRoom too: its room id is derived from the Idempotency-Key), which
-- uk_command_log_command serves, and a room's log by its primary key.
-- Every command paid for the index: one more entry to insert, and its
-- redo, per durable command.

-- +goose Up

ALTER TABLE room_command_log DROP KEY idx_command_log_actor;

-- +goose Down

ALTER TABLE room_command_log
  ADD KEY idx_command_log_actor (app_code, actor_user_id, command_type, command_id);
