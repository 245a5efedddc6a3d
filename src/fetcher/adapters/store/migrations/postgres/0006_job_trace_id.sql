-- A job records the trace of the request that created it (issue 36 item 7, contract §15.3):
-- the 32-hex W3C trace ID of the Manager's sampled request span, written once with the job
-- and served as traceId by GET /v1/fetcher/{id}. NULL when the Manager did not trace the
-- request (tracing off, or the sampler dropped it). Only adds a nullable column: code of the
-- previous release ignores it, so rolling back across this migration is safe.
ALTER TABLE jobs ADD COLUMN trace_id TEXT;
