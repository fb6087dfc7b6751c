-- The SQLSTATE contracts of the lease API, and the labels of its functions.
BEGIN;
SELECT plan(18);

-- every API function that changes state runs with definer rights and a pinned search_path
SELECT is((SELECT array_agg(p.proname::text ORDER BY p.proname)
           FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
           JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'durable'
           WHERE p.provolatile = 'v'
             AND NOT (p.prosecdef AND 'search_path=pg_catalog, pg_temp' = ANY (p.proconfig))),
          NULL, 'every volatile API function is SECURITY DEFINER with a pinned search_path');
SELECT is((SELECT count(*) FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
           JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'durable'
           WHERE p.provolatile = 'i' AND NOT p.prosecdef AND p.proparallel = 's'),
          7::bigint, 'the five decision functions, versions_run and budget_period_start are immutable, parallel safe and run with the caller''s rights');

SELECT volatility_is('durable_claim', ARRAY['text', 'text', 'interval', 'integer', 'jsonb'], 'volatile');
SELECT function_returns('durable_claim', ARRAY['text', 'text', 'interval', 'integer', 'jsonb'], 'setof record');
SELECT function_returns('durable_enqueue',
       ARRAY['text', 'jsonb', 'text', 'timestamp with time zone', 'integer', 'text', 'integer', 'interval', 'text', 'jsonb', 'text', 'text', 'jsonb', 'text[]', 'numeric'],
       'bigint');

SELECT durable_create_queue('contracts', lease => '1 minute');
SELECT durable_enqueue('contracts', '{"n": 1}', idempotency_key => 'k-1');
CREATE TEMP TABLE claimed AS SELECT task_id, fence FROM durable_claim('contracts', 'w');

SELECT throws_ok($$SELECT durable_commit(task_id, fence + 1) FROM claimed$$, '55U01', NULL,
                 'a fence that is not current is 55U01');
SELECT throws_ok($$SELECT durable_enqueue('contracts', '{"n": 2}', idempotency_key => 'k-1')$$,
                 '55U03', 'idempotency key "k-1" was already used for a different request');
SELECT lives_ok($$SELECT durable_commit(task_id, fence) FROM claimed$$, 'the current fence commits');
SELECT throws_ok($$SELECT durable_commit(task_id, fence) FROM claimed$$, '55U01', NULL,
                 'a task that is no longer running is 55U01');
SELECT throws_ok($$SELECT durable_cancel(task_id, 'late') FROM claimed$$, '55U04', NULL,
                 'cancelling a completed task is 55U04');
SELECT throws_ok($$SELECT durable_commit(9999, 1)$$, '42704', 'task 9999 does not exist');
SELECT throws_ok($$SELECT * FROM durable_claim('missing', 'w')$$, '42704', 'queue "missing" does not exist');
SELECT throws_ok($$SELECT durable_create_queue('contracts')$$, '42710', NULL, 'a queue exists once');
SELECT throws_ok($$SELECT * FROM durable_claim('contracts', 'w', lease => '-5 s')$$, '22023', NULL,
                 'a negative lease is 22023');
SELECT throws_ok($$SELECT * FROM durable_claim('contracts', NULL)$$, '22004', NULL,
                 'a NULL worker is 22004');
SELECT throws_ok($$SELECT durable_fail(task_id, fence, 'sometimes') FROM claimed$$, '22023', NULL,
                 'an unknown error class is 22023');
SELECT durable_enqueue('contracts', '{"n": 3}');
SELECT throws_ok($$SELECT durable_drop_queue('contracts')$$, '55006', NULL,
                 'dropping a queue with unfinished tasks is 55006');
SET LOCAL durable.max_payload_size = 1;
SELECT throws_ok($$SELECT durable_enqueue('contracts', jsonb_build_object('x', repeat('y', 4000)))$$,
                 '54000', NULL, 'a payload over durable.max_payload_size is 54000');

SELECT * FROM finish();
ROLLBACK;
