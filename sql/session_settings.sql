--
-- durable's calls leave the caller's settings as they found them, every
-- one of pg_settings: a part of the tick bounds its lock waits for itself
-- (docs/design.md §7), never for the session that called
-- durable_reconcile().  A setting the session gave itself stays too.
--
SELECT durable_create_queue('ss_queue', lease => '1 hour');
SET statement_timeout = '1h';
CREATE TEMP TABLE settings_before AS SELECT name, setting FROM pg_settings;

SELECT count(*) >= 0 AS reconciled FROM durable_reconcile();
SELECT count(*) >= 0 AS reconciled_again FROM durable_reconcile(batch => 1, queue => 'ss_queue');
SELECT durable_enqueue('ss_queue', '{}') > 0 AS enqueued;
SELECT count(durable_commit(task_id, fence)) AS committed FROM durable_claim('ss_queue', 'w');
SELECT length(durable_metrics_prometheus()) > 0 AS scraped;

SELECT b.name, b.setting AS before, s.setting AS after
FROM settings_before b JOIN pg_settings s USING (name)
WHERE b.setting IS DISTINCT FROM s.setting;

-- in a transaction too, and after it
BEGIN;
SELECT count(*) >= 0 AS reconciled_in_a_transaction FROM durable_reconcile();
SELECT b.name, b.setting AS before, s.setting AS after
FROM settings_before b JOIN pg_settings s USING (name)
WHERE b.setting IS DISTINCT FROM s.setting;
COMMIT;
SELECT b.name, b.setting AS before, s.setting AS after
FROM settings_before b JOIN pg_settings s USING (name)
WHERE b.setting IS DISTINCT FROM s.setting;

RESET statement_timeout;
SELECT durable_drop_queue('ss_queue', cascade => true);
