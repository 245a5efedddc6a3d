-- Cancel and retry (issue 35 items 3 and 4, contract §14.4, §14.5). `canceled` becomes a
-- terminal job status and `canceled` an outbox event type (job.canceled); a retried job records
-- the job it repeats in retry_of. Widening the two CHECKs changes what an earlier release may
-- read (a `canceled` row), so this migration does not only add (docs/upgrades.md).
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('pending', 'processing', 'completed', 'failed', 'canceled'));
ALTER TABLE outbox DROP CONSTRAINT outbox_event_type_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_event_type_check
    CHECK (event_type IN ('completed', 'failed', 'canceled'));
ALTER TABLE jobs ADD COLUMN retry_of TEXT;
