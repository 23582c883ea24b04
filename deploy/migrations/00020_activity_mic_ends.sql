-- A seat's end that found no session open in a mic_seconds activity
-- (activity/score_mic.go): its RoomMicUp has not been scored yet (it was
-- redelivered behind the end, after a process was killed or by another
-- instance of the durable). The RoomMicUp, when it comes, pairs with the
-- first recorded end after it in the room (by room_version) instead of
-- opening a session that nothing would close; matched marks an end so
-- paired. Rows of an activity are deleted when its settlement freezes it.
-- (00018 and 00019 are the PK battles' migrations.)

-- +goose Up

CREATE TABLE activity_mic_ends (
  activity_id BIGINT      NOT NULL,
  room_id     VARCHAR(64) NOT NULL,
  user_id     BIGINT      NOT NULL,
  end_version BIGINT      NOT NULL,
  end_ms      BIGINT      NOT NULL,
  matched     TINYINT     NOT NULL DEFAULT 0,
  PRIMARY KEY (activity_id, room_id, user_id, end_version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down

DROP TABLE activity_mic_ends;
