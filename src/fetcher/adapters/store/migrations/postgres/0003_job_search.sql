-- Job list and search (GET /v1/fetcher, issue 21). A page is newest first, keyset-paginated
-- on (created_at, id) within a tenant (§12.5); each index below serves that order (scanned
-- backward) for one filter: none, a status, a product (§12.4, X-Product-Name).
CREATE INDEX jobs_tenant_listing ON jobs (tenant_id, created_at, id);
CREATE INDEX jobs_tenant_status_listing ON jobs (tenant_id, status, created_at, id);
CREATE INDEX jobs_tenant_product_listing ON jobs (tenant_id, product, created_at, id);

-- The stored connections each job resolved (connection_ids_json values), for the
-- connectionId filter, with the job's tenant and creation time: a connection's page is one
-- range of job_connections_listing. A trigger fills it on insert, so no store method writes
-- it; a job's tenant, creation time and connections are written once and never change.
CREATE TABLE job_connections (
    connection_id TEXT NOT NULL,
    job_id        TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    tenant_id     TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (job_id, connection_id)
);
CREATE INDEX job_connections_listing
    ON job_connections (connection_id, tenant_id, created_at, job_id);

CREATE FUNCTION fetcher_job_connections() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_connections (connection_id, job_id, tenant_id, created_at)
    SELECT DISTINCT value, NEW.id, NEW.tenant_id, NEW.created_at
    FROM json_each_text(NEW.connection_ids_json::json);
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_job_connections AFTER INSERT ON jobs
    FOR EACH ROW EXECUTE FUNCTION fetcher_job_connections();

INSERT INTO job_connections (connection_id, job_id, tenant_id, created_at)
SELECT DISTINCT e.value, j.id, j.tenant_id, j.created_at
FROM jobs j, json_each_text(j.connection_ids_json::json) e;
