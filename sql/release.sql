--
-- Giving claimed tasks back (durable_release) and renewing many leases at
-- once (durable_heartbeat_batch): what a worker that stops, or a worker's
-- heartbeat timer, calls.  Times are compared, never printed.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 12000) AS first_id_counter;
SELECT durable_create_queue('rel', lease => '1 minute', max_attempts => 1);
\set VERBOSITY default

-- a claimed task given back at once: ready, fence + 1, its attempt given back
SELECT durable_enqueue('rel', '{"n": 1}') AS t1 \gset
SELECT task_id = :t1 AS claimed, fence AS f, attempt FROM durable_claim('rel', 'w-1') \gset
SELECT :'claimed' AS claimed, :f AS fence, :attempt AS attempt;
SELECT durable_release(:t1, :f, 'shutdown');
SELECT state, fence = :f + 1 AS fence_moved, attempt, lease_until IS NULL AS no_lease
FROM durable.tasks WHERE task_id = :t1;
SELECT kind, state, fence = :f + 1 AS fence_moved, actor, detail
FROM durable.events WHERE task_id = :t1 ORDER BY seq DESC LIMIT 1;

-- the releasing worker is fenced off: every later write of it is 55U01
SELECT durable_commit(:t1, :f);
SELECT durable_heartbeat(:t1, :f);
SELECT durable_release(:t1, :f);

-- released three times, claimed a fourth: the attempt is still the first,
-- so a queue with max_attempts 1 still retries nothing and exhausts nothing
SELECT fence AS f FROM durable_claim('rel', 'w-2') \gset
SELECT durable_release(:t1, :f);
SELECT fence AS f FROM durable_claim('rel', 'w-3') \gset
SELECT durable_release(:t1, :f, reason => NULL);
SELECT task_id = :t1 AS same_task, fence AS f, attempt FROM durable_claim('rel', 'w-4') \gset
SELECT :'same_task' AS same_task, :attempt AS attempt;
SELECT durable_commit(:t1, :f, '{"done": true}');
SELECT state, attempt, result FROM durable.tasks WHERE task_id = :t1;
SELECT string_agg(kind, ', ' ORDER BY seq) AS history FROM durable.events WHERE task_id = :t1;

-- committed and planned steps stay; the next claim resumes the task
SELECT durable_enqueue('rel', '{"n": 2}') AS t2 \gset
SELECT fence AS f FROM durable_claim('rel', 'w-1') \gset
SELECT version AS v FROM durable_step(:t2, :f, 'reserve', 'idempotent', '{"sku": "A1"}') \gset
SELECT durable_step_start(:t2, :f, 'reserve', :v) AS v \gset
SELECT durable_commit(:t2, :f, '{"reservation": "r-1"}', step => 'reserve', expected_version => :v);
SELECT state FROM durable_step(:t2, :f, 'charge', 'queryable', '{"amount": 5}');
SELECT durable_release(:t2, :f, 'shutdown');
SELECT fence AS f FROM durable_claim('rel', 'w-2') \gset
SELECT state, result FROM durable_step(:t2, :f, 'reserve', 'idempotent', '{"sku": "A1"}');
SELECT state, result FROM durable_step(:t2, :f, 'charge', 'queryable', '{"amount": 5}');

-- a started step may have taken effect: 55U04, and the task stays held
SELECT version AS v FROM durable_step(:t2, :f, 'charge', 'queryable', '{"amount": 5}') \gset
SELECT durable_step_start(:t2, :f, 'charge', :v) AS v \gset
SELECT durable_release(:t2, :f);
SELECT state, fence = :f AS same_fence FROM durable.tasks WHERE task_id = :t2;
-- so does an unknown one
SELECT durable_step_unknown(:t2, :f, 'charge', :v, 'timed out') AS v \gset
SELECT durable_release(:t2, :f);
-- once the step is settled by evidence the task can be given back
SELECT durable_record_receipt(:t2, :f, 'charge', 'succeeded', 'ch_1', '{"charge": "ch_1"}');
SELECT state FROM durable.steps WHERE task_id = :t2 AND step = 'charge';
SELECT durable_release(:t2, :f);
SELECT state FROM durable.tasks WHERE task_id = :t2;

-- not running, no such task, bad arguments
SELECT durable_enqueue('rel', '{"n": 3}') AS t3 \gset
SELECT durable_release(:t3, 0);
SELECT durable_release(4242, 1);
SELECT durable_release(NULL, 1);
SELECT durable_release(:t3, NULL);
SELECT durable_release(:t3, -1);

-- a batch heartbeat renews every task still held, in the order given
SELECT durable_create_queue('beat', lease => '1 minute');
SELECT durable_enqueue('beat', jsonb_build_object('n', n)) FROM generate_series(1, 3) n;
SELECT array_agg(task_id ORDER BY task_id) AS ids, array_agg(fence ORDER BY task_id) AS fences
FROM durable_claim('beat', 'w-1', batch => 3) \gset
SELECT durable_heartbeat((:'ids'::bigint[])[1], (:'fences'::bigint[])[1], progress => 'step 1') IS NOT NULL AS renewed;
SELECT progress_at AS progress_before FROM durable.tasks WHERE task_id = (:'ids'::bigint[])[1] \gset
SELECT b.task_id = i.id AS in_order, b.lease_until = now() + interval '5 minutes' AS renewed
FROM durable_heartbeat_batch(:'ids', :'fences', lease => '5 minutes') WITH ORDINALITY b(task_id, lease_until, n)
JOIN unnest(:'ids'::bigint[]) WITH ORDINALITY i(id, n) USING (n) ORDER BY n;
-- progress is the single heartbeat's: a batch heartbeat leaves it alone
SELECT progress, progress_at = :'progress_before' AS progress_at_kept, lease = '5 minutes' AS lease_kept
FROM durable.tasks WHERE task_id = (:'ids'::bigint[])[1];
-- without a lease, each task's last one (as durable_heartbeat does)
SELECT bool_and(lease_until = now() + interval '5 minutes') AS renewed_for_its_last_lease
FROM durable_heartbeat_batch(:'ids', :'fences');

-- a task no longer held comes back with no lease, and the others are renewed
SELECT durable_release((:'ids'::bigint[])[2], (:'fences'::bigint[])[2]);
SELECT n, lease_until IS NOT NULL AS held
FROM durable_heartbeat_batch(:'ids'::bigint[] || 4242::bigint, :'fences'::bigint[] || 1::bigint)
     WITH ORDINALITY b(task_id, lease_until, n) ORDER BY n;
-- the same task under a stale and its current fence: only the current one
SELECT lease_until IS NOT NULL AS held
FROM durable_heartbeat_batch(ARRAY[(:'ids'::bigint[])[1], (:'ids'::bigint[])[1]],
                             ARRAY[(:'fences'::bigint[])[1] - 1, (:'fences'::bigint[])[1]])
     WITH ORDINALITY b(task_id, lease_until, n) ORDER BY n;
SELECT count(*) AS rows FROM durable_heartbeat_batch('{}', '{}');

-- bad arguments
SELECT * FROM durable_heartbeat_batch(NULL, '{1}');
SELECT * FROM durable_heartbeat_batch('{1}', NULL);
SELECT * FROM durable_heartbeat_batch('{1, 2}', '{1}');
SELECT * FROM durable_heartbeat_batch('{{1}}', '{{1}}');
SELECT * FROM durable_heartbeat_batch('{1, NULL}', '{1, 1}');
SELECT * FROM durable_heartbeat_batch('{1}', '{1}', lease => '0 seconds');
SELECT * FROM durable_heartbeat_batch(array_fill(1::bigint, ARRAY[10001]), array_fill(1::bigint, ARRAY[10001]));

-- a restricted queue: a foreign worker neither releases nor renews its tasks
CREATE ROLE regress_rel_a IN ROLE durable_worker;
CREATE ROLE regress_rel_b IN ROLE durable_worker;
CREATE ROLE regress_rel_producer IN ROLE durable_producer;
SELECT durable_create_queue('rel_only_a', lease => '1 minute');
SELECT durable_grant_queue('rel_only_a', 'regress_rel_a', 'work');
SELECT durable_enqueue('rel_only_a', '{}') AS t4 \gset
SET ROLE regress_rel_a;
SELECT fence AS f FROM durable_claim('rel_only_a', 'a-1') \gset
RESET ROLE;
SET ROLE regress_rel_b;
SELECT durable_release(:t4, :f);
SELECT * FROM durable_heartbeat_batch(ARRAY[:t4]::bigint[], ARRAY[:f]::bigint[]);
RESET ROLE;
SET ROLE regress_rel_producer;
SELECT durable_release(:t4, :f);
SELECT * FROM durable_heartbeat_batch(ARRAY[:t4]::bigint[], ARRAY[:f]::bigint[]);
RESET ROLE;
SET ROLE regress_rel_a;
SELECT lease_until IS NOT NULL AS held FROM durable_heartbeat_batch(ARRAY[:t4]::bigint[], ARRAY[:f]::bigint[]);
SELECT durable_release(:t4, :f, 'scaling down');
RESET ROLE;
SELECT state, actor, role FROM durable.events WHERE task_id = :t4 ORDER BY seq DESC LIMIT 1;

-- the event log tells every release
SELECT count(*) AS disagreements FROM durable_verify();

-- leave nothing behind for the files after this one
SELECT count(durable_cancel(task_id, 'end of test')) AS cancelled FROM durable.tasks
WHERE queue_name IN ('rel', 'beat', 'rel_only_a') AND state NOT IN ('completed', 'failed', 'cancelled');
SELECT durable_drop_queue(q) FROM unnest(ARRAY['rel', 'beat', 'rel_only_a']) q;
DROP ROLE regress_rel_a, regress_rel_b, regress_rel_producer;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'beat,rel,rel_only_a'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
