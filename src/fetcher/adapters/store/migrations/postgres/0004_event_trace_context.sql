-- Job events carry the job's W3C trace context (issue 22, docs/tracing.md): captured when
-- the Worker writes the terminal transition, stored with the outbox row so every publish of
-- the row (relay, repairer, re-emission) sends the same ce-traceparent / ce-tracestate.
-- NULL when tracing was off or no span was current (the reaper): then no header is sent.
-- Outside headers_json, which holds the eleven §8.4 headers the feed (§2.12) shows.
ALTER TABLE outbox ADD COLUMN traceparent TEXT;
ALTER TABLE outbox ADD COLUMN tracestate TEXT;
