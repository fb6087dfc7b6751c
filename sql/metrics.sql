--
-- durable.metrics counts what durable.history_metrics computes from the
-- history retained (docs/design.md, section 7): a random workload of lost
-- leases, retries, cancels, receipts and duplicate effects, each action in
-- its own transaction, then the two views must agree on every metric they
-- define alike.  The counters are the test server's (it preloads durable),
-- counted per database from a reset.
--
SELECT setval('durable.task_seq', 18000) AS first_id_metrics;
SELECT durable_create_queue('mx', lease => '1 minute', max_attempts => 5);
SELECT durable_reset_counters();

-- a claim, begun by its worker unless began is false
CREATE PROCEDURE mx_claim(INOUT task bigint, INOUT fence bigint, began boolean DEFAULT true)
LANGUAGE plpgsql AS $$
BEGIN
    -- whatever retry delay the last move chose, the task is due now
    UPDATE durable.live_tasks SET run_at = now() WHERE task_id = task;
    SELECT c.task_id, c.fence INTO task, fence FROM durable_claim('mx', 'w') c;
    IF began THEN
        PERFORM durable_begin(task, fence);
    END IF;
END $$;

CREATE PROCEDURE mx_workload(n int) LANGUAGE plpgsql AS $$
DECLARE
    t bigint;
    f bigint;
    v int;
    path int;
BEGIN
    FOR i IN 1..n LOOP
        path := floor(random() * 8);
        t := durable_enqueue('mx', jsonb_build_object('i', i, 'path', path));
        COMMIT;
        -- path 7 loses a lease before it begins: nothing to recover
        CALL mx_claim(t, f, path <> 7);
        COMMIT;
        IF path = 7 THEN
            PERFORM durable_expire_lease(t, 'a crashed batch');
            COMMIT;
            CALL mx_claim(t, f);
            COMMIT;
        END IF;
        IF path IN (1, 2, 3) THEN
            -- a lost lease, once or twice, then a completion or a cancel
            FOR e IN 1..(CASE WHEN path = 2 THEN 2 ELSE 1 END) LOOP
                PERFORM pg_sleep(0.002);
                PERFORM durable_expire_lease(t, 'a hung worker');
                COMMIT;
                CALL mx_claim(t, f);
                COMMIT;
            END LOOP;
            IF path = 3 THEN
                PERFORM durable_cancel(t, 'given up');
                COMMIT;
                CONTINUE;
            END IF;
        ELSIF path = 4 THEN
            -- a failed attempt retried: more than one attempt, no lost lease
            PERFORM durable_fail(t, f, 'transient');
            COMMIT;
            CALL mx_claim(t, f);
            COMMIT;
        ELSIF path IN (5, 6) THEN
            -- a step with receipts; path 6 loses the lease with it started
            SELECT s.version INTO v FROM durable_step(t, f, 'pay', 'idempotent') s;
            v := durable_step_start(t, f, 'pay', v);
            COMMIT;
            IF path = 6 THEN
                PERFORM durable_expire_lease(t, 'a hung worker');
                COMMIT;
                CALL mx_claim(t, f);
                SELECT s.version INTO v FROM durable_step(t, f, 'pay', 'idempotent') s;
                IF (SELECT state FROM durable.steps WHERE task_id = t AND step = 'pay') = 'planned' THEN
                    v := durable_step_start(t, f, 'pay', v);
                END IF;
                COMMIT;
            END IF;
            IF (SELECT state FROM durable.steps WHERE task_id = t AND step = 'pay') = 'started' THEN
                PERFORM durable_record_receipt(t, f, 'pay', 'succeeded', effect_id => 'e' || i);
                IF random() < 0.5 THEN
                    PERFORM durable_record_receipt(t, f, 'pay', 'succeeded', effect_id => 'again' || i);
                END IF;
                SELECT s.version INTO v FROM durable_step(t, f, 'pay', 'idempotent') s;
                PERFORM durable_commit(t, f, NULL, step => 'pay', expected_version => v);
                COMMIT;
            END IF;
        END IF;
        PERFORM pg_sleep(0.002);
        -- a batch commits by a statement of its own
        IF i % 2 = 0 THEN
            PERFORM durable_commit_batch(ARRAY[t], ARRAY[f]);
        ELSE
            PERFORM durable_commit(t, f);
        END IF;
        COMMIT;
    END LOOP;
END $$;

SELECT setseed(0.42);
CALL mx_workload(60);

-- the workload went through every path that counts
SELECT m.finished = 60 AS all_finished, m.recoveries > 0 AS recovered_some,
       m.recovery_success_rate < 1 AS cancelled_some,
       m.duplicate_side_effects > 0 AS duplicated_some,
       m.ambiguous_outcome_rate > 0 AS left_some_in_doubt,
       (SELECT count(*) > 0 FROM durable.events e JOIN durable.tasks t USING (task_id)
        WHERE t.queue_name = 'mx' AND e.detail->>'action' = 'not_begun') AS lost_some_unbegun
FROM durable.metrics m WHERE m.queue_name = 'mx';

-- counted as computed from history
SELECT m.finished = h.tasks AS tasks,
       m.duplicate_side_effects = h.duplicate_side_effects AS duplicates,
       m.recoveries = h.recoveries AS recoveries,
       m.recovery_success_rate = h.recovery_success_rate AS success_rate,
       abs(extract(epoch FROM m.mean_recovery_time - h.mean_recovery_time)) < 0.001 AS recovery_time,
       m.claims_per_task = h.claims_per_task AS claims,
       m.human_escalation_rate = h.human_escalation_rate AS escalations,
       m.reconciliation_lag = '0' AS lag
FROM durable.metrics m JOIN durable.history_metrics h USING (queue_name)
WHERE m.queue_name = 'mx';

-- in doubt: the steps a lost lease left started, of the steps started
SELECT c.steps_left_in_doubt = (SELECT count(*) FROM durable.events e
                                JOIN durable.tasks t USING (task_id)
                                WHERE t.queue_name = 'mx' AND e.kind = 'lease_expired'
                                AND e.detail->>'step' = 'pay') AS left_in_doubt,
       c.steps_started = (SELECT count(*) FROM durable.events e
                          JOIN durable.tasks t USING (task_id)
                          WHERE t.queue_name = 'mx' AND e.kind = 'step_started') AS started
FROM durable.queue_counters c WHERE c.queue_name = 'mx';

-- the Prometheus names of the new counters and histogram
SELECT DISTINCT m[1] AS family
FROM regexp_matches(durable_metrics_prometheus(),
     '(durable_(?:steps_started|steps_left_in_doubt|duplicate_effects|tasks_finished_after_expiry|tasks_recovered)_total|durable_recovery_time_seconds_count)\{queue="mx"', 'g') m
ORDER BY 1;

DROP PROCEDURE mx_workload(int);
DROP PROCEDURE mx_claim(bigint, bigint, boolean);
SELECT durable_drop_queue('mx', cascade => true);
