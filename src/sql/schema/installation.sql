--
-- Ids and keys are never reused, also across DROP and CREATE EXTENSION
-- (docs/design.md section 6).  Nothing of an earlier installation survives its
-- DROP EXTENSION, so every installation gets a random id, which the keys
-- durable derives from task ids mix in (durable_step:
-- durable_idempotency_key(installation_id, task_id, step[, target])).  A
-- task id that comes back never brings back an earlier installation's
-- step key; the id counters start from the clock (sequences.sql).
--
-- A restore runs CREATE EXTENSION (a new row here, the clock seeds) and
-- then copies the dumped rows and sequence values in: the restored tasks
-- keep their ids, the sequences continue after them, and the newest
-- installation row (the restore's own) is the one new keys mix in.
--
CREATE TABLE durable.installation (
    installation_id uuid PRIMARY KEY,
    installed_at    timestamptz NOT NULL
);
COMMENT ON TABLE durable.installation IS 'the random id of this installation (the newest row), mixed into every key derived from a task id';
INSERT INTO durable.installation (installation_id, installed_at)
VALUES (pg_catalog.gen_random_uuid(), pg_catalog.clock_timestamp());
SELECT pg_catalog.pg_extension_config_dump('durable.installation', '');
REVOKE ALL ON durable.installation FROM PUBLIC;
GRANT SELECT ON durable.installation TO durable_operator;
