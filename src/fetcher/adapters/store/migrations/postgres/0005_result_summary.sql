-- The result summary and the key version of a completed job's object (contract §14.1, §14.3),
-- written by the Worker in the same statement as the terminal status. result_summary_json is
-- JSON text {"sizeBytes","plaintextBytes","rowCount","tables":{ds:{table:rows}}};
-- result_key_version is the APP_ENC_KEY_VERSION whose storage and external keys sealed and
-- MACed the object. Both NULL for jobs completed before this migration (they answer the
-- members they have: path and hmac).
ALTER TABLE jobs ADD COLUMN result_summary_json TEXT;
ALTER TABLE jobs ADD COLUMN result_key_version TEXT;
