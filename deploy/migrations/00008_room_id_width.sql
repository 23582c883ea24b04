-- Room ids are "<app_code>_<uuid>": up to 32 + 1 + 36 = 69 bytes
-- (voiceroom.RoomIDMax allows 96), longer than the VARCHAR(64) room_id
-- columns of 00001..00006. Every room_id column becomes VARCHAR(96).
--
-- The tables keep utf8mb4 (4 bytes a character): a room id is ASCII, but
-- changing the charset would change the collation room ids are compared
-- with across tables. 96 characters take at most 384 bytes of an index
-- key; the longest key holding room_id (idx_room_list_title, with
-- app_code and title) stays far below InnoDB's 3072 bytes (DYNAMIC rows,
-- the default since MySQL 5.7 and MariaDB 10.2).
--
-- room_region_hides (00007, the room list's hides) is widened too when it
-- exists; goose applies migrations in order, so a new database creates it
-- before this one runs.

-- +goose Up

ALTER TABLE rooms             MODIFY room_id VARCHAR(96) NOT NULL;
ALTER TABLE room_snapshots    MODIFY room_id VARCHAR(96) NOT NULL;
ALTER TABLE room_command_log  MODIFY room_id VARCHAR(96) NOT NULL;
ALTER TABLE room_outbox       MODIFY room_id VARCHAR(96) NOT NULL;
ALTER TABLE room_list_entries MODIFY room_id VARCHAR(96) NOT NULL;
ALTER TABLE room_region_pins  MODIFY room_id VARCHAR(96) NOT NULL;
ALTER TABLE room_region_audit MODIFY room_id VARCHAR(96) NOT NULL;
ALTER TABLE room_audit        MODIFY room_id VARCHAR(96) NOT NULL;
ALTER TABLE wallet_ledger     MODIFY room_id VARCHAR(96) NOT NULL DEFAULT '';

SET @widen_hides = (SELECT IF(COUNT(*) > 0, 'ALTER TABLE room_region_hides MODIFY room_id VARCHAR(96) NOT NULL', 'DO 0')
  FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'room_region_hides');
PREPARE widen_hides FROM @widen_hides;
EXECUTE widen_hides;
DEALLOCATE PREPARE widen_hides;

-- +goose Down
-- Fails (data truncated) while a room id longer than 64 bytes is stored.
ALTER TABLE wallet_ledger     MODIFY room_id VARCHAR(64) NOT NULL DEFAULT '';
ALTER TABLE room_audit        MODIFY room_id VARCHAR(64) NOT NULL;
ALTER TABLE room_region_audit MODIFY room_id VARCHAR(64) NOT NULL;
ALTER TABLE room_region_pins  MODIFY room_id VARCHAR(64) NOT NULL;
ALTER TABLE room_list_entries MODIFY room_id VARCHAR(64) NOT NULL;
ALTER TABLE room_outbox       MODIFY room_id VARCHAR(64) NOT NULL;
ALTER TABLE room_command_log  MODIFY room_id VARCHAR(64) NOT NULL;
ALTER TABLE room_snapshots    MODIFY room_id VARCHAR(64) NOT NULL;
ALTER TABLE rooms             MODIFY room_id VARCHAR(64) NOT NULL;
