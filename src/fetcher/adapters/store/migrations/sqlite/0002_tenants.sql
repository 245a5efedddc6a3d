-- Tenancy (contract §12.4, §12.5). Every connection, job and outbox row belongs to one tenant;
-- rows written before this migration (single-tenant mode) get the tenant '' (§12.5 "Switching
-- modes"). configName uniqueness and the §3.8 active-hash guard become per tenant. jobs.product
-- is the normalized source (§3.7) and outbox.product its job's, so the feed of a
-- product-restricted token (§12.4) is an indexed read; the store fills both for older rows
-- right after this script, in the same transaction. The outbox rowid stays the global feed
-- sequence (§2.12).

ALTER TABLE connections ADD COLUMN tenant_id TEXT NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN created_by TEXT;
DROP INDEX connections_config_name_active;
CREATE UNIQUE INDEX connections_config_name_active
    ON connections (tenant_id, config_name) WHERE deleted_at IS NULL;
DROP INDEX connections_listing;
CREATE INDEX connections_listing
    ON connections (tenant_id, created_at, id) WHERE deleted_at IS NULL;

ALTER TABLE jobs ADD COLUMN tenant_id TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN created_by TEXT;
ALTER TABLE jobs ADD COLUMN product TEXT;
DROP INDEX jobs_active_request_hash;
CREATE UNIQUE INDEX jobs_active_request_hash
    ON jobs (tenant_id, request_hash) WHERE dedup_active = 1;
DROP INDEX jobs_request_hash_created;
CREATE INDEX jobs_request_hash_created ON jobs (tenant_id, request_hash, created_at);

ALTER TABLE outbox ADD COLUMN tenant_id TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN product TEXT;
CREATE INDEX outbox_feed_tenant ON outbox (tenant_id, id);
CREATE INDEX outbox_feed_tenant_product ON outbox (tenant_id, product, id);
