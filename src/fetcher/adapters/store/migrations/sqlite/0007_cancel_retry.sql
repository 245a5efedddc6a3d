-- Cancel and retry (issue 35 items 3 and 4, contract §14.4, §14.5). `canceled` becomes a
-- terminal job status and `canceled` an outbox event type (job.canceled); a retried job records
-- the job it repeats in retry_of. Widening the two CHECKs changes what an earlier release may
-- read (a `canceled` row), so this migration does not only add (docs/upgrades.md).
-- SQLite cannot alter a CHECK; this is its documented in-place edit of the stored schema text
-- (sqlite.org/lang_altertable.html, "making other kinds of table schema changes"), which only
-- widens the constraint, so no stored row needs checking. RESET makes this connection reparse
-- the schema, and the CREATE INDEX after it bumps the schema cookie so every other connection
-- reparses too.
ALTER TABLE jobs ADD COLUMN retry_of TEXT;
PRAGMA writable_schema = ON;
UPDATE sqlite_master
    SET sql = replace(sql, '''completed'', ''failed'')', '''completed'', ''failed'', ''canceled'')')
    WHERE type = 'table' AND name IN ('jobs', 'outbox');
PRAGMA writable_schema = RESET;
CREATE INDEX jobs_retry_of ON jobs (retry_of) WHERE retry_of IS NOT NULL;
