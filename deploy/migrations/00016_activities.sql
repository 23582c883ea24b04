-- Activities (package activity): campaigns an app's operators define, with
-- boards, tasks and rewards, scored from ROOM_EVENTS by the activity role's
-- durable consumer. MySQL is the truth for definitions, scores, task
-- progress and payouts; Redis only serves the boards (rebuilt from here).
-- See activity/doc.go.

-- +goose Up

-- One campaign. Its definition (kind .. reward_coins) never changes after
-- creation; status and the settlement columns move forward only:
--   status: scheduled | running | settling | settled | cancelled (the
--           answer's status is derived from the clock and settle_state for
--           the first three; settled and cancelled are stored);
--   settle_state: open -> frozen -> paying -> settled (or cancelled):
--           frozen when the consumer has passed ends_at_ms + grace and the
--           ranks are written to activity_payouts; paying while payouts are
--           made; settled when none is left unpaid.
-- settle_owner/settle_lease_until_ms: the process holding the settlement
-- (a lease, taken over when it lapses). catchup_*: a retroactive start's
-- read back from ROOM_EVENTS (see activity/doc.go, "Retroactive start").
CREATE TABLE activities (
  app_code              VARCHAR(32)  NOT NULL,
  activity_id           BIGINT       NOT NULL AUTO_INCREMENT,
  name                  VARCHAR(128) NOT NULL,
  kind                  VARCHAR(16)  NOT NULL, -- leaderboard | task
  metric                VARCHAR(32)  NOT NULL, -- gift_value_sent | gift_value_received | room_gift_value | gift_count | mic_seconds
  gift_ids              JSON         NULL,     -- NULL: every gift
  region_ids            JSON         NULL,     -- NULL: every region of the app
  starts_at_ms          BIGINT       NOT NULL,
  ends_at_ms            BIGINT       NOT NULL,
  rewards               JSON         NULL,     -- leaderboard: [{from_rank,to_rank,coins}]
  target                BIGINT       NOT NULL DEFAULT 0, -- task: in the metric's unit
  period                VARCHAR(16)  NOT NULL DEFAULT '', -- task: day | week | window
  reward_coins          BIGINT       NOT NULL DEFAULT 0, -- task: per user per period
  status                VARCHAR(16)  NOT NULL DEFAULT 'scheduled',
  settle_state          VARCHAR(16)  NOT NULL DEFAULT 'open',
  settle_owner          VARCHAR(64)  NOT NULL DEFAULT '',
  settle_lease_until_ms BIGINT       NOT NULL DEFAULT 0,
  catchup_state         VARCHAR(16)  NOT NULL DEFAULT 'none', -- none | reading | joined
  catchup_seq           BIGINT UNSIGNED NOT NULL DEFAULT 0,   -- the last stream sequence the read back scored
  live_from_seq         BIGINT UNSIGNED NOT NULL DEFAULT 0,   -- the first sequence the live durable scores for it
  created_by            VARCHAR(64)  NOT NULL DEFAULT '',
  created_at_ms         BIGINT       NOT NULL,
  updated_at_ms         BIGINT       NOT NULL,
  cancelled_at_ms       BIGINT       NOT NULL DEFAULT 0,
  settled_at_ms         BIGINT       NOT NULL DEFAULT 0,
  PRIMARY KEY (activity_id),
  KEY idx_activities_app (app_code, activity_id),
  KEY idx_activities_open (settle_state, ends_at_ms)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- A subject's score in one period of an activity: a user (user id in
-- decimal) or a room (room id). period_start_ms is the start of the task
-- period (the app's day or week, in its time zone) or the activity's
-- starts_at_ms for a leaderboard and a task of period window.
-- reached_at_ms is the occurred_at_ms of the event that last raised the
-- score: ties go to whoever reached the score first. Rows are never
-- deleted: each period's board stays for audit.
CREATE TABLE activity_scores (
  activity_id     BIGINT      NOT NULL,
  period_start_ms BIGINT      NOT NULL,
  subject         VARCHAR(64) NOT NULL,
  score           BIGINT      NOT NULL,
  reached_at_ms   BIGINT      NOT NULL,
  updated_at_ms   BIGINT      NOT NULL,
  PRIMARY KEY (activity_id, period_start_ms, subject),
  KEY idx_activity_board (activity_id, period_start_ms, score, reached_at_ms)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Each event counted once per activity: a row per (activity, event) in the
-- transaction that adds its score; a redelivered, replayed or read-back
-- event finds its row and counts nothing.
CREATE TABLE activity_seen (
  activity_id BIGINT      NOT NULL,
  event_id    VARCHAR(96) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  PRIMARY KEY (activity_id, event_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Open mic sessions of mic_seconds activities: a RoomMicUp opens one, the
-- event that ends the seat closes it and adds its seconds within the window.
CREATE TABLE activity_mic_open (
  activity_id BIGINT      NOT NULL,
  room_id     VARCHAR(64) NOT NULL,
  user_id     BIGINT      NOT NULL,
  since_ms    BIGINT      NOT NULL,
  PRIMARY KEY (activity_id, room_id, user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Every reward owed: a leaderboard rank (written at freeze, reason 'rank')
-- or a task period reached (written by the scoring transaction that
-- reached the target, reason 'task'). Paid into the wallet through the
-- ledger with entry_key 'activity:<activity_id>:<reason>:<period_start_ms>:<user_id>',
-- once: paid_at_ms is set in the same transaction as the credit.
CREATE TABLE activity_payouts (
  activity_id     BIGINT       NOT NULL,
  reason          VARCHAR(8)   NOT NULL, -- rank | task
  period_start_ms BIGINT       NOT NULL,
  user_id         BIGINT       NOT NULL,
  app_code        VARCHAR(32)  NOT NULL,
  subject         VARCHAR(64)  NOT NULL, -- what ranked: the user, or the room (paid to its owner)
  rank_no         INT          NOT NULL DEFAULT 0,
  score           BIGINT       NOT NULL DEFAULT 0,
  coins           BIGINT       NOT NULL,
  entry_key       VARCHAR(160) NOT NULL,
  created_at_ms   BIGINT       NOT NULL,
  paid_at_ms      BIGINT       NOT NULL DEFAULT 0,
  PRIMARY KEY (activity_id, reason, period_start_ms, user_id),
  KEY idx_activity_payouts_unpaid (activity_id, paid_at_ms)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down

DROP TABLE activity_payouts;
DROP TABLE activity_mic_open;
DROP TABLE activity_seen;
DROP TABLE activity_scores;
DROP TABLE activities;
