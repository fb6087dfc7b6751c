--
-- One commit per task: commit-and-claim-next, and batch commits.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 6000) AS first_id_counter;
SELECT durable_create_queue('pipe', lease => '1 minute');
SELECT count(durable_enqueue('pipe', jsonb_build_object('n', n), priority => -n)) FROM generate_series(1, 5) n;

-- claim one, then each commit hands over the next, in the same transaction
SELECT task_id AS t, fence AS f, payload FROM durable_claim('pipe', 'w1') \gset
\echo :payload
SELECT task_id AS t, fence AS f, payload FROM durable_commit_and_claim(:t, :f, '{"ok": 1}') \gset
\echo :payload
SELECT payload, fence FROM durable_commit_and_claim(:t, :f, '{"ok": 2}', worker => 'w2', batch => 2);
SELECT state, count(*), array_agg(DISTINCT owner ORDER BY owner) AS owners
FROM durable.tasks WHERE queue_name = 'pipe' GROUP BY state ORDER BY state;
-- the commit is checked like any other: a stale fence claims nothing
SELECT * FROM durable_commit_and_claim(:t, :f);
SELECT count(*) AS still_running FROM durable.tasks WHERE queue_name = 'pipe' AND state = 'running';

-- batch commit: all or none
SELECT array_agg(task_id ORDER BY task_id) AS ids, array_agg(fence ORDER BY task_id) AS fences
FROM durable.tasks WHERE queue_name = 'pipe' AND state = 'running' \gset
SELECT durable_commit_batch(:'ids', (SELECT array_agg(f + 1) FROM unnest(:'fences'::bigint[]) f));
SELECT count(*) AS still_running FROM durable.tasks WHERE queue_name = 'pipe' AND state = 'running';
-- results of more than one dimension are refused as the ids' are (22023),
-- even with one result per task, and nothing is committed
\set VERBOSITY sqlstate
SELECT durable_commit_batch(:'ids', :'fences', '{{"{}"}, {"{}"}}'::jsonb[]);
\set VERBOSITY default
SELECT count(*) AS still_running FROM durable.tasks WHERE queue_name = 'pipe' AND state = 'running';
SELECT durable_commit_batch(:'ids', :'fences', ARRAY['{"a": 1}', '{"b": 2}']::jsonb[]) AS committed;
SELECT state, count(*), count(result) AS with_result FROM durable.tasks WHERE queue_name = 'pipe' GROUP BY state;
SELECT durable_commit_batch(:'ids', :'fences');
SELECT durable_commit_batch(ARRAY[]::bigint[], ARRAY[]::bigint[]) AS nothing;
SELECT durable_commit_batch(ARRAY[1, 2], ARRAY[1]);
SELECT durable_commit_batch(ARRAY[NULL]::bigint[], ARRAY[1]);
SELECT durable_commit_batch(NULL, ARRAY[1]);
SELECT count(*) AS completed_events FROM durable.events e JOIN durable.tasks t USING (partition_key, task_id)
WHERE t.queue_name = 'pipe' AND e.kind = 'completed';
SELECT count(*) AS disagreements FROM durable_verify();

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'pipe'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
