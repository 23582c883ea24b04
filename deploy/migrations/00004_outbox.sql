-- The outbox relay's retention (outboxrelay): published rows older than
-- VOICEROOM_OUTBOX_RETENTION are deleted in small batches. Without an index on
-- published_at_ms each retention run would walk every published row.
-- Cross-app, like idx_room_outbox_pending, so it does not start with app_code.

-- +goose Up
CREATE INDEX idx_room_outbox_published ON room_outbox (status, published_at_ms);

-- +goose Down
DROP INDEX idx_room_outbox_published ON room_outbox;
