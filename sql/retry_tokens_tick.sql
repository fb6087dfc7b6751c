--
-- Within a reconciler tick, retries owe their tokens until the end of the
-- tick, so that the queue's bucket is locked from then to the commit only;
-- the retries whose token comes later than their delay are deferred then.
--
-- Every claim here is begun by its worker (durable_begin), so that a lease
-- that runs out is judged by the recovery table; an unbegun one would go
-- back for nothing (begin.sql).
SELECT setval('durable.task_seq', 10000) AS first_id_counter;
-- (a retry's own delay is 100 s: no retried task comes due while the file
-- runs, so a claim takes the task it was meant to, however slow the server)
SELECT durable_create_queue('tokens', lease => '1 ms', retry_base => 100, retry_cap => 100,
                            retry_capacity => 1, retry_refill_rate => 0.001);
SELECT count(durable_enqueue('tokens', jsonb_build_object('n', i))) FROM generate_series(1, 3) i;
SELECT count(*) FROM durable_claim('tokens', 'w', batch => 3) c, durable_begin(c.task_id, c.fence) b;
SELECT pg_sleep(0.01);
SELECT action, count(*) FROM durable_reconcile() r
WHERE (SELECT t.queue_name FROM durable.tasks t WHERE t.task_id = r.task_id) IN ('tokens')
GROUP BY action;

-- one token was there; the next two come 1000 and 2000 seconds later
SELECT e.detail->>'retry_token' AS token FROM durable.events e
WHERE e.kind = 'lease_expired' AND e.task_id IN (SELECT task_id FROM durable.tasks WHERE queue_name = 'tokens')
GROUP BY 1;
SELECT t.state, round(extract(epoch FROM t.run_at - now()) / 1000) AS kiloseconds_ahead,
       (SELECT count(*) FROM durable.events e WHERE e.partition_key = t.partition_key
          AND e.task_id = t.task_id AND e.kind = 'retry_deferred') AS deferrals
FROM durable.tasks t WHERE t.queue_name = 'tokens' ORDER BY t.run_at;
SELECT (SELECT count(*) FROM durable.events e WHERE e.kind = 'retry_deferred'
          AND (e.detail->>'deferred_until')::timestamptz = t.run_at) AS deferral_says_run_at
FROM durable.tasks t WHERE t.queue_name = 'tokens' ORDER BY t.run_at;
SELECT round(retry_tokens) AS tokens_left FROM durable.queues WHERE queue_name = 'tokens';
SELECT count(*) AS disagreements FROM durable_verify();

-- outside a tick (durable_fail) the token is taken at once, as before
SELECT durable_enqueue('tokens', '{}') AS t \gset
UPDATE durable.live_tasks SET run_at = now() WHERE task_id = :t;
SELECT fence AS f FROM durable_claim('tokens', 'w2') c, durable_begin(c.task_id, c.fence) b WHERE task_id = :t \gset
SELECT durable_fail(:t, :f, 'transient', '{}');
SELECT detail ? 'deferred_until' AS deferred_at_once FROM durable.events
WHERE task_id = :t AND kind = 'retry_scheduled';

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'tokens'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
