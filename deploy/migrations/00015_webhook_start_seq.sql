-- webhook_endpoints gains start_seq: the ROOM_EVENTS sequence from which an
-- endpoint must receive every event it wants, set by the admin side when an
-- endpoint is created or a PATCH widens its event types (the stream's last
-- sequence + 1, read before the answer: an event committed after the
-- answer is stored above it). The process delivering clears it once it has
-- made sure of it (the endpoint takes every event from there through the
-- durable, or its stored cursor_seq is at or below it); until then every
-- tenure reads the endpoint's events back from it. NULL: nothing pending.
-- See webhooks/doc.go.

-- +goose Up

ALTER TABLE webhook_endpoints ADD COLUMN start_seq BIGINT UNSIGNED NULL AFTER cursor_seq;

-- +goose Down

ALTER TABLE webhook_endpoints DROP COLUMN start_seq;
