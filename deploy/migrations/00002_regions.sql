-- Regions (issue 3): what 00001's regions, countries and users lack for the
-- user-region change sources of spec/region-room-list.md.

-- +goose Up

-- region_source says where a user's region_id came from:
--   country: computed from the user's country (registration, a country change,
--            a region rebuild); a rebuild may change it.
--   admin:   set by an operator (PUT /admin/v1/users/:user_id/region, e.g. a
--            BD leader); a rebuild or a country change keeps it while its
--            region stays active.
ALTER TABLE users
  ADD COLUMN region_source VARCHAR(16) NOT NULL DEFAULT 'country' AFTER region_id;

-- One row per change of a user's region, and per operator action on it even
-- when the region stays the same: who (operator), when, old, new, why.
-- source: user (changed their country) | rebuild | admin.
CREATE TABLE user_region_audit (
  id            BIGINT       NOT NULL AUTO_INCREMENT,
  app_code      VARCHAR(32)  NOT NULL,
  user_id       BIGINT       NOT NULL,
  old_region_id BIGINT       NOT NULL,
  new_region_id BIGINT       NOT NULL,
  source        VARCHAR(16)  NOT NULL,
  operator      VARCHAR(64)  NOT NULL,
  reason        VARCHAR(255) NOT NULL DEFAULT '',
  created_at_ms BIGINT       NOT NULL,
  PRIMARY KEY (id),
  KEY idx_user_region_audit_user (app_code, user_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE user_region_audit;
ALTER TABLE users DROP COLUMN region_source;
