--
-- Ending a lease now (durable_expire_lease): an operator's call against a
-- hung worker, and a test's way to recover a worker's task without
-- sleeping out its lease.  It must settle a task exactly as the
-- reconciler settles the same task once its lease has run out: each case
-- below is set up twice, one ended by the call, its twin by an expired
-- lease and durable_reconcile(), and the two must agree.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 18000) AS first_id_counter;
SELECT durable_create_queue('expire', lease => '1 hour', retry_base => 1, retry_cap => 1);
\set VERBOSITY default

-- one running task with one step in the given state, begun by its worker
-- unless began is false (then its lease costs it nothing: docs/design.md
-- section 4); returns its id
CREATE FUNCTION pg_temp.running_task(task_class text, max_attempts int,
                                     step_class text, receipt text, began boolean)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    t bigint;
    f bigint;
BEGIN
    t := durable_enqueue('expire', '{}', class => task_class, max_attempts => max_attempts);
    SELECT c.fence INTO f FROM durable_claim('expire', 'w-hung') c;
    IF began THEN
        PERFORM durable_begin(t, f);
    END IF;
    IF step_class IS NOT NULL THEN
        PERFORM durable_step(t, f, 's', step_class);
        PERFORM durable_step_start(t, f, 's', 1);
        IF receipt IS NOT NULL THEN
            PERFORM durable_record_receipt(t, f, 's', receipt, 'effect-1');
        END IF;
    END IF;
    RETURN t;
END $$;

CREATE TEMP TABLE cases AS
SELECT n, task_class, max_attempts, step_class, receipt, began,
       pg_temp.running_task(task_class, max_attempts, step_class, receipt, began) AS by_call,
       pg_temp.running_task(task_class, max_attempts, step_class, receipt, began) AS by_reconciler
FROM (VALUES (1, 'idempotent', 3, NULL, NULL, true),
             (2, 'unsafe', 3, NULL, NULL, true),
             (3, 'idempotent', 1, NULL, NULL, true),
             (4, 'idempotent', 3, 'idempotent', NULL, true),
             (5, 'idempotent', 3, 'queryable', NULL, true),
             (6, 'idempotent', 3, 'unsafe', NULL, true),
             (7, 'idempotent', 3, 'unsafe', 'succeeded', true),
             (8, 'idempotent', 3, 'unsafe', 'not_executed', true),
             (9, 'unsafe', 1, NULL, NULL, false),
             (10, 'idempotent', 3, 'unsafe', 'succeeded', false))
     AS v(n, task_class, max_attempts, step_class, receipt, began)
ORDER BY n;

ALTER TABLE cases ADD COLUMN action_of_call text, ADD COLUMN action_of_reconciler text;
UPDATE cases SET action_of_call = durable_expire_lease(by_call, 'worker hung');
UPDATE durable.live_tasks SET lease_until = now() - interval '1 second'
WHERE task_id IN (SELECT by_reconciler FROM cases);
UPDATE cases c SET action_of_reconciler = r.action
FROM durable_reconcile(queue => 'expire') r WHERE r.task_id = c.by_reconciler;

-- the same action, the same task and step afterwards
SELECT n, task_class, max_attempts, step_class, receipt, began, action_of_call,
       action_of_call = action_of_reconciler AS as_the_reconciler
FROM cases ORDER BY n;
SELECT n, a.state, a.attempt, a.state = b.state AND a.fence = b.fence AND a.attempt = b.attempt
          AND a.stop_code IS NOT DISTINCT FROM b.stop_code
          AND a.steps_in_doubt = b.steps_in_doubt AS same_task
FROM cases JOIN durable.tasks a ON a.task_id = by_call
           JOIN durable.tasks b ON b.task_id = by_reconciler
ORDER BY n;
SELECT n, a.state, a.state = b.state AND a.receipt IS NOT DISTINCT FROM b.receipt AS same_step
FROM cases JOIN durable.steps a ON a.task_id = by_call
           JOIN durable.steps b ON b.task_id = by_reconciler AND b.step = a.step
ORDER BY n;

-- the event says who ended the lease and why; the reconciler's says neither,
-- and the rest of its evidence is the same (times and keys aside, which the
-- twins do not share)
SELECT n, e.actor = current_user AS by_caller, e.detail ->> 'reason' AS reason,
       e.detail ->> 'expired_by' = current_user AS expired_by_caller,
       e.detail - 'reason' - 'expired_by' - 'lease_until' - 'run_at' - 'wait_ms' - 'idempotency_key'
         = r.detail - 'lease_until' - 'run_at' - 'wait_ms' - 'idempotency_key' AS evidence_as_the_reconciler,
       r.actor
FROM cases
JOIN durable.events e ON e.task_id = by_call AND e.kind = 'lease_expired'
JOIN durable.events r ON r.task_id = by_reconciler AND r.kind = 'lease_expired'
ORDER BY n;

-- the hung worker is fenced off: its next write is 55U01
SELECT by_call AS t FROM cases WHERE n = 1 \gset
SELECT durable_heartbeat(:t, 1);
SELECT durable_commit(:t, 1);

-- the task comes back after its retry delay, not after the hour of its lease
SELECT state, run_at < now() + interval '1 minute' AS back_soon, owner
FROM durable.tasks WHERE task_id = :t;

-- counted with the leases that ran out
SELECT leases_expired FROM durable.queue_counters WHERE queue_name = 'expire';

-- refused, and nothing written: a task that is not running holds no lease
-- (terse: the message; then the SQLSTATE)
\set VERBOSITY terse
SELECT by_call AS done FROM cases WHERE n = 3 \gset
SELECT durable_expire_lease(:done, 'again');
\echo :SQLSTATE
SELECT durable_enqueue('expire', '{"ready": true}') AS ready \gset
SELECT durable_expire_lease(:ready, 'not claimed');
\echo :SQLSTATE
SELECT durable_expire_lease(-1, 'no such task');
\echo :SQLSTATE
SELECT durable_expire_lease(:ready, '');
\echo :SQLSTATE
SELECT durable_expire_lease(:ready, NULL);
\echo :SQLSTATE
SELECT durable_expire_lease(NULL, 'no task');
\echo :SQLSTATE
\set VERBOSITY default
SELECT state, fence FROM durable.tasks WHERE task_id = :ready;
SELECT task_id = :done AS done, count(*) AS expiries FROM durable.events
WHERE task_id IN (:done, :ready) AND kind = 'lease_expired' GROUP BY 1 ORDER BY 1;

-- the other suites see none of this file's tasks
SELECT count(durable_resolve(task_id, 'cancel', 'test', '{}')) FROM durable.live_tasks
WHERE queue_name = 'expire' AND state = 'needs_review';
SELECT count(durable_cancel(task_id, 'test')) FROM durable.live_tasks WHERE queue_name = 'expire';
SELECT durable_drop_queue('expire');

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'expire'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
