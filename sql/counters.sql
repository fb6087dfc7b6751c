--
-- Counters in shared memory (the test server preloads durable): what a
-- transaction did counts when it commits, never when it rolls back, a
-- refusal counts at once; durable_metrics_prometheus() shows them, with
-- the gauges of the live tasks, in the text exposition format.  Each
-- database counts apart, so nothing else the suites do shows here.
--
SELECT setval('durable.task_seq', 17000) AS first_id_counter;
SELECT durable_create_queue('cnt', lease => '1 minute', max_attempts => 2);
SELECT durable_reset_counters();
\set VERBOSITY default

-- enqueued, and an idempotent replay
SELECT count(durable_enqueue('cnt', jsonb_build_object('n', n))) FROM generate_series(1, 3) n;
SELECT durable_enqueue('cnt', '{"k": 1}', idempotency_key => 'k1') = durable_enqueue('cnt', '{"k": 1}', idempotency_key => 'k1') AS same;

-- claimed and completed; a claim rolled back counts nothing
BEGIN;
SELECT count(*) FROM durable_claim('cnt', 'w', batch => 4);
ROLLBACK;
SELECT count(durable_commit(task_id, fence)) FROM durable_claim('cnt', 'w', batch => 2);
-- a failed attempt and its retry; in a savepoint rolled back, nothing
SELECT task_id AS t, fence AS f FROM durable_claim('cnt', 'w') \gset
BEGIN;
SAVEPOINT s;
SELECT durable_fail(:t, :f, 'transient');
ROLLBACK TO SAVEPOINT s;
SELECT durable_fail(:t, :f, 'transient');
COMMIT;
-- a stale write and a version conflict count at once, though refused
SELECT durable_commit(:t, :f);
SELECT task_id AS u, fence AS g FROM durable_claim('cnt', 'w') \gset
SELECT state FROM durable_step(:u, :g, 'charge', 'unsafe');
SELECT durable_step_start(:u, :g, 'charge', 7);
-- sent to review, resolved; quarantined, replayed
SELECT durable_fail(:u, :g, 'unknown');
SELECT durable_resolve(:u, 'cancel', 'ops', '{}');
SELECT durable_quarantine(:t, 'test');
SELECT count(*) FROM durable_replay_dead_letters('cnt');

SELECT enqueued, claimed, completed, failed, cancelled, retried, leases_expired, sent_to_review,
       resolved_mark_committed + resolved_mark_not_executed + resolved_mark_failed + resolved_retry AS resolved_else,
       resolved_cancel, dead_lettered, quarantined, replayed, migrated, stale_writes,
       version_conflicts, idempotent_replays, events_emitted, wakeups,
       stats_reset <= now() AS reset_before
FROM durable.queue_counters WHERE queue_name = 'cnt';

-- in the exposition format: every counter, the histograms' counts, the
-- gauges of the live tasks (times vary: not shown here)
SELECT line FROM regexp_split_to_table(durable_metrics_prometheus(), E'\n') line
WHERE line LIKE '%queue="cnt"%' AND line NOT LIKE '%seconds%'
   OR line LIKE 'durable_latency_seconds_count%' OR line LIKE 'durable_counters_available%'
   OR line LIKE '%seconds_count{queue="cnt"}%';
-- each family is declared once, before its samples
SELECT count(*) AS types, count(DISTINCT line) AS distinct_types
FROM regexp_split_to_table(durable_metrics_prometheus(), E'\n') line WHERE line LIKE '# TYPE %';

-- a queue's name is a label value: quotes and backslashes escaped
SELECT durable_create_queue(E'we"ird\\q');
SELECT durable_enqueue(E'we"ird\\q') > 0 AS enqueued;
SELECT line FROM regexp_split_to_table(durable_metrics_prometheus(), E'\n') line
WHERE line LIKE 'durable_tasks_enqueued_total{queue="we%';

-- a reset zeroes them
SELECT durable_reset_counters();
SELECT enqueued, claimed, completed, stale_writes FROM durable.queue_counters WHERE queue_name = 'cnt';

SELECT count(durable_cancel(task_id, 'test')) FROM durable.live_tasks WHERE queue_name = E'we"ird\\q';
SELECT durable_drop_queue(E'we"ird\\q');

-- the other suites see none of this file's tasks
SELECT count(durable_cancel(task_id, 'test')) FROM durable.live_tasks WHERE queue_name = 'cnt';
SELECT durable_drop_queue('cnt');

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'cnt'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
