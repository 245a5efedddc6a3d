-- Metadata store schema, PostgreSQL (contract §2.5, §3.8, §4, §4.7, §8.6, §2.12).
-- Request documents and connection metadata are TEXT, never jsonb: key order and number
-- text must round-trip (§4.7).

CREATE TABLE connections (
    id                     TEXT PRIMARY KEY,
    product_name           TEXT,
    config_name            TEXT NOT NULL,
    type                   TEXT NOT NULL,
    host                   TEXT,
    port                   INTEGER,
    database_name          TEXT NOT NULL,
    schema_name            TEXT,
    user_name              TEXT,
    password_encrypted     TEXT,
    ssl_mode               TEXT,
    ssl_ca                 TEXT,
    ssl_cert               TEXT,
    ssl_key_encrypted      TEXT,
    encryption_key_version TEXT NOT NULL,
    metadata_json          TEXT NOT NULL DEFAULT '{}',
    created_at             TIMESTAMPTZ NOT NULL,
    updated_at             TIMESTAMPTZ NOT NULL,
    deleted_at             TIMESTAMPTZ
);

-- §2.6.1: configName is unique among non-deleted connections; a soft delete frees it.
CREATE UNIQUE INDEX connections_config_name_active
    ON connections (config_name) WHERE deleted_at IS NULL;
CREATE INDEX connections_listing ON connections (created_at, id) WHERE deleted_at IS NULL;

CREATE TABLE jobs (
    id                  TEXT PRIMARY KEY,
    status              TEXT NOT NULL
        CHECK (status IN ('pending', 'processing', 'completed', 'failed')),
    request_hash        TEXT NOT NULL,
    dedup_active        BOOLEAN NOT NULL,
    mapped_fields_json  TEXT NOT NULL,
    filters_json        TEXT,
    limits_json         TEXT,
    metadata_json       TEXT NOT NULL,
    connection_ids_json TEXT NOT NULL DEFAULT '{}',
    result_path         TEXT,
    result_hmac         TEXT,
    error               TEXT,
    request_id          TEXT,
    created_at          TIMESTAMPTZ NOT NULL,
    started_at          TIMESTAMPTZ,
    completed_at        TIMESTAMPTZ,
    updated_at          TIMESTAMPTZ NOT NULL
);

-- §3.8 guard: one active job per request hash.
CREATE UNIQUE INDEX jobs_active_request_hash ON jobs (request_hash) WHERE dedup_active;
CREATE INDEX jobs_request_hash_created ON jobs (request_hash, created_at);
CREATE INDEX jobs_active_status ON jobs (status, created_at)
    WHERE status IN ('pending', 'processing');

-- §2.6.5 step 6: the datasource names (top-level mappedFields keys) of each job.
CREATE TABLE job_datasources (
    job_id      TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    config_name TEXT NOT NULL,
    PRIMARY KEY (job_id, config_name)
);
CREATE INDEX job_datasources_config_name ON job_datasources (config_name);

-- §8.6 outbox; §2.12 feed_seq is assigned after commit under an advisory lock.
CREATE TABLE outbox (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    feed_seq     BIGINT UNIQUE,
    ce_id        TEXT NOT NULL UNIQUE,
    job_id       TEXT NOT NULL REFERENCES jobs (id),
    event_type   TEXT NOT NULL CHECK (event_type IN ('completed', 'failed')),
    routing_key  TEXT NOT NULL,
    body         BYTEA NOT NULL,
    headers_json TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    sent_at      TIMESTAMPTZ
);

CREATE INDEX outbox_unsent ON outbox (created_at, id) WHERE sent_at IS NULL;
CREATE INDEX outbox_unnumbered ON outbox (id) WHERE feed_seq IS NULL;
