--
-- Tasks under leases: enqueue, claim, heartbeat, commit, fail, cancel,
-- reconcile, and the errors of each.  Times are compared, never printed.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 1000) AS first_id_counter;
SELECT durable_create_queue('jobs', lease => '1 minute', retry_base => 1, retry_cap => 1);

-- enqueue, with and without options
SELECT durable_enqueue('jobs', '{"n": 1}') AS t1 \gset
SELECT durable_enqueue('jobs', '{"n": 2}', priority => 5, class => 'pure',
                       max_attempts => 7, deadline => '1 day', workflow_version => 'v2',
                       metadata => '{"model": "m-1"}') AS t2 \gset
SELECT durable_enqueue('jobs', '{"n": 3}', run_at => now() + interval '1 hour') AS t_later \gset
SELECT task_id = :t1 AS t1, state, class, priority, attempt, max_attempts, fence, version,
       deadline, workflow_version, metadata, payload
FROM durable.tasks WHERE queue_name = 'jobs' ORDER BY task_id;
-- ids carry their partition and grow in order
SELECT bool_and(task_id & 32767 = partition_key) AS id_has_partition,
       :t1 < :t2 AND :t2 < :t_later AS ordered
FROM durable.tasks WHERE queue_name = 'jobs';

-- idempotent enqueue: same key and payload, same task; other payload, 55U03
SELECT durable_enqueue('jobs', '{"n": 4, "to": "x"}', idempotency_key => 'order-4') AS t4 \gset
SELECT durable_enqueue('jobs', '{"to": "x", "n": 4}', idempotency_key => 'order-4') = :t4 AS same_task;
\set VERBOSITY default
SELECT durable_enqueue('jobs', '{"n": 5}', idempotency_key => 'order-4');
SELECT count(*) AS tasks_with_key FROM durable.tasks WHERE idempotency_key = 'order-4';

-- bad enqueues
SELECT durable_enqueue('nope', '{}');
SELECT durable_enqueue(NULL, '{}');
SELECT durable_enqueue('jobs', NULL);
SELECT durable_enqueue('jobs', '{}', class => 'risky');
SELECT durable_enqueue('jobs', '{}', class => NULL);
SELECT durable_enqueue('jobs', '{}', priority => NULL);
SELECT durable_enqueue('jobs', '{}', idempotency_key => '');
SELECT durable_enqueue('jobs', '{}', idempotency_key => repeat('k', 256));
SELECT durable_enqueue('jobs', '{}', max_attempts => 0);
SELECT durable_enqueue('jobs', '{}', deadline => '-1 s');
SELECT durable_enqueue('jobs', '{}', run_at => 'infinity');
SET durable.max_payload_size = '1kB';
SELECT durable_enqueue('jobs', jsonb_build_object('blob', repeat('x', 2000)));
RESET durable.max_payload_size;

-- claim: highest priority first, run_at respected, a batch at most
SELECT task_id = :t2 AS is_t2, fence, attempt, payload, checkpoint,
       lease_until = now() + interval '1 minute' AS lease_from_queue
FROM durable_claim('jobs', 'w1');
SELECT task_id = :t1 AS is_t1, fence, attempt,
       lease_until = now() + interval '5 minutes' AS lease_given
FROM durable_claim('jobs', 'w1', lease => '5 minutes');
SELECT count(*) AS claimed FROM durable_claim('jobs', 'w2', batch => 10);
SELECT count(*) AS nothing_left FROM durable_claim('jobs', 'w2', batch => 10);
SELECT state, owner, fence, attempt FROM durable.tasks WHERE task_id IN (:t1, :t2) ORDER BY task_id;

-- bad claims
SELECT * FROM durable_claim('nope', 'w1');
SELECT * FROM durable_claim('jobs', NULL);
SELECT * FROM durable_claim('jobs', '');
SELECT * FROM durable_claim('jobs', 'w1', lease => '0 s');
SELECT * FROM durable_claim('jobs', 'w1', batch => 0);
SELECT * FROM durable_claim('jobs', 'w1', batch => 10001);

-- a paused queue hands out nothing; resumed, it does again
SELECT durable_enqueue('jobs', '{"n": 6}') AS t6 \gset
SELECT durable_pause('jobs');
SELECT count(*) AS from_paused FROM durable_claim('jobs', 'w1');
SELECT durable_resume('jobs');
SELECT task_id = :t6 AS is_t6, fence FROM durable_claim('jobs', 'w1');

-- heartbeat: extends the lease, records progress; progress_at moves only on change
BEGIN;
SELECT durable_heartbeat(:t1, 1, 'step-1') = now() + interval '5 minutes' AS extended;
SELECT progress, progress_at = now() AS progress_now, heartbeat_at = now() AS heartbeat_now
FROM durable.tasks WHERE task_id = :t1;
COMMIT;
BEGIN;
SELECT durable_heartbeat(:t1, 1, 'step-1', lease => '10 minutes') = now() + interval '10 minutes' AS new_lease;
SELECT progress, lease, progress_at < now() AS same_progress_keeps_its_time, heartbeat_at = now() AS heartbeat_now
FROM durable.tasks WHERE task_id = :t1;
COMMIT;
SELECT durable_heartbeat(:t1, 2);
SELECT durable_heartbeat(:t1, NULL);
SELECT durable_heartbeat(NULL, 1);
SELECT durable_heartbeat(424242, 1);
SELECT durable_heartbeat(-1, 1);
SELECT durable_heartbeat(:t1, 1, lease => '-1 s');
SELECT durable_heartbeat(:t1, 1, repeat('p', 1025));

-- commit: once, under the current fence
SELECT durable_commit(:t1, 1, '{"sent": true}');
SELECT state, result, owner FROM durable.tasks WHERE task_id = :t1;
SELECT durable_commit(:t1, 1);
SELECT durable_commit(:t2, 7);
SELECT durable_commit(424242, 1);
SET durable.max_payload_size = '1kB';
SELECT durable_commit(:t2, 1, jsonb_build_object('blob', repeat('x', 2000)));
RESET durable.max_payload_size;
SELECT state FROM durable.tasks WHERE task_id = :t2;

-- a stale write rolls back the caller's own writes in the same transaction
CREATE TABLE sent_emails (task_id bigint);
BEGIN;
INSERT INTO sent_emails VALUES (:t1);
SELECT durable_commit(:t1, 1);
COMMIT;
SELECT count(*) AS rows_from_stale_transaction FROM sent_emails;
DROP TABLE sent_emails;

-- fail: the retry budget decides and durable_fail applies it
SELECT durable_fail(:t2, 1, 'transient', '{"http": 503}');
SELECT state, owner, last_error, run_at > now() AS later FROM durable.tasks WHERE task_id = :t2;
SELECT run_at = at + make_interval(secs => durable_retry_delay(task_id::text, 1, 1, 1)) AS delay_from_table
FROM durable.tasks JOIN durable.events e USING (partition_key, task_id)
WHERE task_id = :t2 AND e.kind = 'retry_scheduled';
SELECT durable_fail(:t2, 1, 'transient');
SELECT pg_sleep(1.1);
-- the retry comes back with the next fence and attempt
SELECT task_id = :t2 AS is_t2, fence, attempt FROM durable_claim('jobs', 'w3');
-- a Retry-After later than the delay wins, and is recorded
SELECT durable_fail(:t2, 2, 'transient', retry_after => '1 hour');
SELECT run_at BETWEEN now() + interval '59 minutes' AND now() + interval '61 minutes' AS retry_after_wins
FROM durable.tasks WHERE task_id = :t2;
SELECT detail->>'retry_after_ms' AS retry_after_ms, detail->>'action' AS action
FROM durable.events WHERE task_id = :t2 AND kind = 'retry_scheduled' ORDER BY seq DESC LIMIT 1;
SELECT durable_cancel(:t2, 'done testing');

-- permanent, unknown, exhausted, deadline
SELECT durable_enqueue('jobs', '{"k": "permanent"}') AS tp \gset
SELECT durable_enqueue('jobs', '{"k": "unknown"}') AS tu \gset
SELECT durable_enqueue('jobs', '{"k": "exhausted"}', max_attempts => 1) AS tx \gset
SELECT durable_enqueue('jobs', '{"k": "deadline"}', deadline => '0.5 s') AS td \gset
SELECT count(*) FROM durable_claim('jobs', 'w4', batch => 4);
SELECT durable_fail(:tp, 1, 'permanent', '{"http": 400}') AS permanent,
       durable_fail(:tu, 1, 'unknown') AS unknown,
       durable_fail(:tx, 1, 'transient') AS exhausted,
       durable_fail(:td, 1, 'transient') AS deadline;
SELECT task_id = :tp AS permanent, state, stop_code, last_error
FROM durable.tasks WHERE task_id IN (:tp, :tu, :tx, :td) ORDER BY task_id;

-- bad failures
SELECT durable_fail(:tp, 1, 'transient');
SELECT durable_fail(:tp, 1, 'flaky');
SELECT durable_fail(:tp, 1, NULL);
SELECT durable_fail(:tp, 1, 'transient', retry_after => '-1 s');
-- a month and a day are not always the same length: parts of both signs
-- would make a delay that depends on the date
SELECT durable_fail(:tp, 1, 'transient', retry_after => '1 mon -29 days');
SELECT durable_fail(:tp, 1, 'transient', retry_after => '-1 day 25 hours');
SELECT durable_fail(424242, 1, 'transient');

-- cancel: any unfinished task; a running one loses its lease
SELECT durable_enqueue('jobs', '{"k": "cancel me"}') AS tc \gset
SELECT fence FROM durable_claim('jobs', 'w5');
SELECT durable_cancel(:tc, 'customer withdrew');
SELECT state, fence FROM durable.tasks WHERE task_id = :tc;
SELECT durable_commit(:tc, 1);
SELECT durable_cancel(:tc, 'again');
SELECT durable_cancel(:tu, 'in review');
SELECT durable_cancel(:tc, NULL);

-- retry tokens: one token, refilled every two seconds; the second retry is
-- deferred, not dropped, and first attempts are not held back
SELECT durable_create_queue('lease_limited', retry_capacity => 1, retry_refill_rate => 0.5,
                            retry_base => 1, retry_cap => 1);
SELECT durable_enqueue('lease_limited', '{"n": 1}') AS l1 \gset
SELECT durable_enqueue('lease_limited', '{"n": 2}') AS l2 \gset
SELECT durable_enqueue('lease_limited', '{"n": 3}') AS l3 \gset
SELECT count(*) FROM durable_claim('lease_limited', 'w6', batch => 2);
SELECT durable_fail(:l1, 1, 'transient') AS first_retry, durable_fail(:l2, 1, 'transient') AS second_retry;
SELECT task_id = :l2 AS deferred, detail->>'deferral_reason' AS reason,
       (detail->>'run_at')::timestamptz = (detail->>'deferred_until')::timestamptz AS waits_for_token
FROM durable.events WHERE task_id IN (:l1, :l2) AND kind = 'retry_scheduled' ORDER BY task_id;
SELECT task_id = :l3 AS first_attempt_still_claimed FROM durable_claim('lease_limited', 'w6');
SELECT retry_tokens < 0 AS tokens_reserved_ahead FROM durable.queues WHERE queue_name = 'lease_limited';

-- reconcile: expired leases go through the recovery table
SELECT durable_create_queue('short', lease => '1 ms', retry_base => 1, retry_cap => 1);
SELECT durable_enqueue('short', '{"c": "idempotent"}', class => 'idempotent') AS ri \gset
SELECT durable_enqueue('short', '{"c": "unsafe"}', class => 'unsafe') AS ru \gset
SELECT durable_enqueue('short', '{"c": "queryable"}', class => 'queryable') AS rq \gset
SELECT durable_enqueue('short', '{"c": "last"}', max_attempts => 1) AS rx \gset
-- (each begun by its worker: an unbegun task would go back for nothing, begin.sql)
SELECT count(*) FROM durable_claim('short', 'w7', batch => 4) c, durable_begin(c.task_id, c.fence) b;
SELECT pg_sleep(0.01);
SELECT task_id = :ri AS idempotent, task_id = :ru AS unsafe, task_id = :rq AS queryable,
       task_id = :rx AS exhausted, action
FROM durable_reconcile(queue => 'short') ORDER BY task_id;
SELECT state, fence, stop_code, owner FROM durable.tasks
WHERE task_id IN (:ri, :ru, :rq, :rx) ORDER BY task_id;
SELECT detail - 'lease_until' - 'run_at' - 'wait_ms' AS evidence, actor
FROM durable.events WHERE task_id = :ru AND kind = 'lease_expired';
SELECT count(*) AS nothing_left FROM durable_reconcile(queue => 'short');
-- the old worker's late writes are rejected
SELECT durable_commit(:ri, 1);
SELECT durable_heartbeat(:ru, 1);
SELECT durable_fail(:rx, 1, 'transient');
SELECT * FROM durable_reconcile(0);

-- a fence that is still current is accepted after its lease ran out, as
-- long as nobody took over
SELECT durable_enqueue('short', '{"c": "slow"}') AS rs \gset
SELECT fence FROM durable_claim('short', 'w8');
SELECT pg_sleep(0.01);
SELECT durable_commit(:rs, 1, '{"late": "but first"}');
SELECT state FROM durable.tasks WHERE task_id = :rs;

-- a claim never hands out an expired lease: it settles it first
SELECT durable_enqueue('short', '{"c": "crashed"}') AS rc \gset
SELECT fence FROM durable_claim('short', 'w9') c, durable_begin(c.task_id, c.fence) b;
SELECT pg_sleep(0.01);
SELECT count(*) AS claimed FROM durable_claim('short', 'w10');
SELECT state, fence, owner FROM durable.tasks WHERE task_id = :rc;

-- the whole history of one task
SELECT seq, kind, state, fence, actor FROM durable.events WHERE task_id = :t2 ORDER BY seq;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'jobs,lease_limited,short'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
