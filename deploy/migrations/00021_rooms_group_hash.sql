-- A room's partition in the row: group_hash is FNV-1a (32 bits) of the
-- room's IM GroupId, the hash whose remainder modulo the deployment's P is
-- the room's partition (roomcluster.Partition; P is not known here, so the
-- row holds the hash, not the remainder). A rooms node that takes
-- partitions over lists their rooms with users from the index below
-- instead of every room with users. Existing rows are filled here with
-- the same computation as the code's: the GroupId is the room id when it
-- is a valid GroupId not starting with "vr-", else "vr-" and the first 40
-- hex digits of SHA-256(app_code "/" room_id) (roomevent.IMGroupID).
-- A row an older release writes during an upgrade keeps 0; a takeover
-- reads those too, and the next write of the room fills it.

-- +goose Up

ALTER TABLE rooms
  ADD COLUMN group_hash INT UNSIGNED NOT NULL DEFAULT 0,
  ADD KEY idx_rooms_recover (status, online_count, group_hash);

UPDATE rooms JOIN (
  WITH RECURSIVE g AS (
    SELECT app_code, room_id,
      CAST(IF(room_id REGEXP '^[-A-Za-z0-9_]{1,48}$' AND LEFT(room_id, 3) <> BINARY 'vr-', room_id,
        CONCAT('vr-', LEFT(SHA2(CONCAT(app_code, '/', room_id), 256), 40))) AS BINARY) AS gid
    FROM rooms
  ), f AS (
    SELECT app_code, room_id, gid, 0 AS i, CAST(2166136261 AS UNSIGNED) AS h FROM g
    UNION ALL
    SELECT app_code, room_id, gid, i + 1, ((h ^ ORD(SUBSTRING(gid, i + 1, 1))) * 16777619) & 4294967295
    FROM f WHERE i < LENGTH(gid)
  )
  SELECT app_code, room_id, h FROM f WHERE i = LENGTH(gid)
) x ON x.app_code = rooms.app_code AND x.room_id = rooms.room_id
SET rooms.group_hash = x.h;

-- +goose Down

ALTER TABLE rooms DROP KEY idx_rooms_recover, DROP COLUMN group_hash;
