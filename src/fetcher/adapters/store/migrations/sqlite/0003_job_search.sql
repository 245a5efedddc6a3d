-- Job list and search (GET /v1/fetcher, issue 21). A page is newest first, keyset-paginated
-- on (created_at, id) within a tenant (§12.5); each index below serves that order (scanned
-- backward) for one filter: none, a status, a product (§12.4, X-Product-Name).
CREATE INDEX jobs_tenant_listing ON jobs (tenant_id, created_at, id);
CREATE INDEX jobs_tenant_status_listing ON jobs (tenant_id, status, created_at, id);
CREATE INDEX jobs_tenant_product_listing ON jobs (tenant_id, product, created_at, id);

-- The stored connections each job resolved (connection_ids_json values), for the
-- connectionId filter. A trigger fills it on insert, so no store method writes it; the
-- document is written once and never changes.
CREATE TABLE job_connections (
    connection_id TEXT NOT NULL,
    job_id        TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (connection_id, job_id)
) WITHOUT ROWID;

CREATE TRIGGER jobs_job_connections AFTER INSERT ON jobs
BEGIN
    INSERT OR IGNORE INTO job_connections (connection_id, job_id)
    SELECT value, NEW.id FROM json_each(NEW.connection_ids_json);
END;

INSERT OR IGNORE INTO job_connections (connection_id, job_id)
SELECT e.value, j.id FROM jobs j, json_each(j.connection_ids_json) e;
