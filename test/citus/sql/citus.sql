--
-- durable on a Citus cluster (tools/citus): a coordinator and two workers,
-- durable created on the coordinator and distributed here.
--
SET client_min_messages = warning;

-- bad input first, while nothing is distributed
\set VERBOSITY terse
SELECT durable_enable_citus(0);
SELECT durable_enable_citus(NULL);
\set VERBOSITY default

-- distribute; a second time is refused
SELECT durable_enable_citus();
\set VERBOSITY terse
SELECT durable_enable_citus();
\set VERBOSITY default

-- every table by partition_key in one colocation group, the settings as
-- reference tables
SELECT logicalrelid::text AS table_name, partmethod,
       colocationid = (SELECT colocationid FROM pg_dist_partition
                       WHERE logicalrelid = 'durable.live_tasks'::regclass) AS with_tasks
FROM pg_dist_partition
WHERE logicalrelid::text LIKE 'durable.%' AND logicalrelid::text NOT LIKE '%\_p2%'
ORDER BY 1;

-- Citus records each transaction it commits in two phases (tools/citus
-- keeps the records): a call on a task of one node commits in one.  Only
-- this session's count (the gid names the backend): the reconcilers'
-- ticks commit beside it.
\set my_two_phase '(SELECT FROM pg_dist_transaction WHERE gid ~ (''^citus_[0-9]+_'' || pg_backend_pid() || ''_'')) t'
SELECT count(*) AS before FROM :my_two_phase \gset

-- the lifecycle of a task, its steps, a retry and a replay
SELECT durable_create_queue('jobs', lease => '1 minute', retry_base => 1, retry_cap => 1,
                            partitions => 4);
-- (a queue is written on every node: in two phases)
SELECT count(*) > :before AS queue_in_two_phases FROM :my_two_phase;
SELECT count(*) AS before FROM :my_two_phase \gset
SELECT durable_enqueue('jobs', '{"n": 1}') AS t1 \gset
SELECT durable_enqueue('jobs', '{"n": 2}', idempotency_key => 'k-2') AS t2 \gset
SELECT durable_enqueue('jobs', '{"n": 2}', idempotency_key => 'k-2') = :t2 AS same_task;
\set VERBOSITY terse
SELECT durable_enqueue('jobs', '{"n": 3}', idempotency_key => 'k-2');
\set VERBOSITY default
-- ids carry their partition, and the node that made them (the coordinator, group 0)
SELECT bool_and(task_id & 32767 = partition_key) AS id_has_partition,
       bool_and((task_id >> 15) & 255 = 0) AS made_on_group_0
FROM durable.tasks;
-- a claim asks the first node of its walk (which depends on the backend)
-- in one call, and reads the others before it claims there: it commits
-- in two phases (its two nodes prepared) only when the first had no work
SELECT count(*) - :before AS enqueues_in_two_phases FROM :my_two_phase;
SELECT count(*) AS claims_before FROM :my_two_phase \gset
SELECT count(*) AS claimed FROM durable_claim('jobs', 'w1');
SELECT count(*) - :claims_before IN (0, 2) AS one_phase_or_two_nodes_prepared FROM :my_two_phase;
SELECT count(*) AS claims_before FROM :my_two_phase \gset
SELECT count(*) AS claimed FROM durable_claim('jobs', 'w1');
SELECT count(*) - :claims_before IN (0, 2) AS one_phase_or_two_nodes_prepared FROM :my_two_phase;
SELECT count(*) AS before FROM :my_two_phase \gset
SELECT fence AS f1 FROM durable.tasks WHERE task_id = :t1 \gset
SELECT fence AS f2 FROM durable.tasks WHERE task_id = :t2 \gset
SELECT durable_heartbeat(:t1, :f1, 'phase 1') > now() AS renewed;
SELECT state FROM durable_step(:t1, :f1, 'charge', 'queryable', '{"amount": 5}');
SELECT durable_step_start(:t1, :f1, 'charge', 1) AS v \gset
SELECT durable_commit(:t1, :f1, '{"charged": 5}', step => 'charge', expected_version => :v);
SELECT state, result FROM durable_step(:t1, :f1, 'charge', 'queryable', '{"amount": 5}');
SELECT durable_commit(:t1, :f1, '{"done": 1}');
-- heartbeat, step and commit, each on the task's node only
SELECT count(*) - :before AS two_phase_commits FROM :my_two_phase;

-- a stale writer loses: 55U01
\set VERBOSITY sqlstate
SELECT durable_commit(:t1, :f1);
SELECT durable_heartbeat(:t2, :f2 + 1);
\set VERBOSITY default
SELECT durable_fail(:t2, :f2, 'permanent', '{"reason": "bad"}');
SELECT task_id = :t2 AS is_t2, action FROM durable_replay_dead_letters('jobs');
SELECT task_id = :t1 AS is_t1, state, attempt FROM durable.tasks WHERE task_id IN (:t1, :t2) ORDER BY 1 DESC;
SELECT fence AS f2 FROM durable_claim('jobs', 'w2') WHERE task_id = :t2 \gset
SELECT durable_release(:t2, :f2);
SELECT count(*) AS reclaimed FROM durable_claim('jobs', 'w3');
SELECT fence AS f2 FROM durable.tasks WHERE task_id = :t2 \gset

-- batches, task by task on Citus, all or none
SELECT count(*) AS tasks FROM durable.tasks \gset
\set VERBOSITY terse
SELECT durable_enqueue_batch('jobs', ARRAY['{"b": 1}', '{"b": 2}']::jsonb[],
                             idempotency_keys => ARRAY['b-1', 'k-2']);
\set VERBOSITY default
SELECT count(*) - :tasks AS enqueued_by_the_refused_batch FROM durable.tasks;
SELECT (durable_enqueue_batch('jobs', ARRAY['{"b": 1}', '{"b": 2}', '{"n": 2}']::jsonb[],
                              idempotency_keys => ARRAY['b-1', NULL, 'k-2']))[3] = :t2 AS third_is_t2;
SELECT count(*) AS claimed FROM durable_claim('jobs', 'w4', batch => 10);
\set VERBOSITY sqlstate
SELECT durable_commit_batch(array_agg(task_id), array_agg(fence + 1))
FROM durable.tasks WHERE queue_name = 'jobs' AND state = 'running' AND task_id <> :t2;
SELECT durable_commit_batch(array_agg(task_id) || array_agg(task_id), array_agg(fence) || array_agg(fence))
FROM durable.tasks WHERE queue_name = 'jobs' AND state = 'running' AND task_id <> :t2;
\set VERBOSITY default
SELECT count(*) AS still_running FROM durable.tasks WHERE queue_name = 'jobs' AND state = 'running';
SELECT durable_commit_batch(array_agg(task_id), array_agg(fence), array_agg('{"batch": true}'::jsonb))
FROM durable.tasks WHERE queue_name = 'jobs' AND state = 'running' AND task_id <> :t2;
SELECT state, count(*), count(*) FILTER (WHERE result = '{"batch": true}') AS batch_results
FROM durable.tasks WHERE queue_name = 'jobs' GROUP BY 1 ORDER BY 1;
SELECT count(*) AS claimed_next FROM durable_commit_and_claim(:t2, :f2, '{"last": true}');

-- request keys, the inbox and an outbox message, each on its key's node
SELECT count(*) AS before FROM :my_two_phase \gset
SELECT * FROM durable_idempotent_begin('jobs', 'payments', 'req-1', '{"a": 1}') \gset b_
SELECT * FROM durable_idempotent_begin('jobs', 'payments', 'req-1', '{"a": 1}');
SELECT durable_inbox_receive('jobs', 'billing', 'm-1', '{"x": 1}') AS first,
       durable_inbox_receive('jobs', 'billing', 'm-1', '{"x": 1}') AS again;

SELECT durable_outbox_emit('jobs', 'orders', '{"n": 0}', 'key-0') > 0 AS emitted;
SELECT count(*) - :before AS two_phase_commits FROM :my_two_phase;

-- the outbox: a claim across shards, an ack under its fence, a stale ack
SELECT count(durable_outbox_emit('jobs', 'orders', jsonb_build_object('n', i), 'key-' || i))
FROM generate_series(1, 5) i;
SELECT count(*) AS held, count(DISTINCT fence) AS fences
FROM durable_outbox_claim('jobs', 'p1', batch => 4);
SELECT count(*) AS held_by_p2 FROM durable_outbox_claim('jobs', 'p2', batch => 10);
SELECT durable_outbox_ack('jobs', array_agg(message_id), max(fence)) AS acked
FROM durable.outbox WHERE publisher = 'p1' AND published_at IS NULL;
\set VERBOSITY sqlstate
SELECT durable_outbox_ack('jobs', array_agg(message_id), max(fence) + 1)
FROM durable.outbox WHERE publisher = 'p2' AND published_at IS NULL;
\set VERBOSITY default
-- fences carry their node
SELECT bool_and(fence & 255 = 0) AS fenced_on_group_0 FROM durable.outbox;

-- a sleep, and its replay once it has elapsed: the wait's entry is written
-- on the task's node (0.6.0 failed here with 0A000, so that a workflow
-- never got past its first sleep)
SELECT durable_create_queue('naps');
SELECT durable_enqueue('naps', '{}') AS t5 \gset
SELECT fence AS f5 FROM durable_claim('naps', 'w7') \gset
SELECT clock_timestamp() + interval '1 second' AS nap_until \gset
SELECT durable_sleep(:t5, :f5, 'nap', until => :'nap_until');
SELECT pg_sleep(1.2);
SELECT task_id = :t5 AS woke, fence AS f5 FROM durable_claim('naps', 'w7') \gset
SELECT :'woke' AS woke;
SELECT durable_sleep(:t5, :f5, 'nap', until => :'nap_until') AS replayed;
SELECT waits -> 'nap' ->> 'status' AS nap FROM durable.tasks WHERE task_id = :t5;
SELECT durable_commit(:t5, :f5, '{"rested": true}');
SELECT state FROM durable.tasks WHERE task_id = :t5;

-- an expired lease: durable_reconcile() on the coordinator settles it, if
-- the reconciler of the task's node has not yet
SELECT durable_create_queue('short', lease => '1 ms', retry_base => 1, retry_cap => 1);
SELECT durable_enqueue('short', '{}') AS t3 \gset
-- (begun by its worker: an unbegun task would go back for nothing)
SELECT fence AS f3 FROM durable_claim('short', 'w5') c, durable_begin(c.task_id, c.fence) b \gset
SELECT pg_sleep(0.01);
SELECT count(*) <= 1 AS at_most_one FROM durable_reconcile();
SELECT state, attempt FROM durable.tasks WHERE task_id = :t3;
SELECT durable_recovery_package(:t3) -> 'task' ->> 'state' AS package_state;

-- a queue is dropped with its finished tasks, on every shard
SELECT durable_cancel(:t3, 'done with it');
SELECT durable_drop_queue('short');
SELECT count(*) AS left_of_short FROM durable.tasks WHERE queue_name = 'short';
SELECT count(*) AS events_left FROM durable.events WHERE task_id = :t3;

-- 0.6.0's and 0.7.0's calls that 0.7.0 refused on a cluster (0A000) run:
-- pausing one partition, claims that name their versions (their workers
-- recorded, distributed by queue), a version_timeout, ending a lease,
-- migrating, quarantining, replaying one partition or one reason
SELECT durable_create_queue('v6', partitions => 2);
SELECT durable_enqueue('v6', '{"n": 1}', workflow_version => '1') AS t4 \gset
SELECT durable_create_queue('v6b', version_timeout => '1 hour');
SELECT durable_alter_queue('v6', version_timeout => '1 hour');
SELECT version_timeout FROM durable.queues WHERE queue_name IN ('v6', 'v6b');
SELECT partition_base AS v6_base, (:t4 & 32767) - partition_base AS t4_index
FROM durable.queues WHERE queue_name = 'v6' \gset
SELECT durable_pause('v6', partition => (:t4 & 32767)::int);
SELECT count(*) AS claimed_while_paused FROM durable_claim('v6', 'w6', versions => '{"workflow": "1"}');
SELECT paused_partitions = ARRAY[(:t4 & 32767)::int] AS paused_its_partition
FROM durable.queues WHERE queue_name = 'v6';
SELECT durable_resume('v6', partition => (:t4 & 32767)::int);
SELECT count(*) AS claimed_by_other_code FROM durable_claim('v6', 'w6b', versions => '{"workflow": "2"}');
SELECT task_id = :t4 AS claimed_t4 FROM durable_claim('v6', 'w6', versions => '{"workflow": "1"}') c,
    durable_begin(c.task_id, c.fence) b;
SELECT worker, versions FROM durable.workers WHERE queue_name = 'v6' ORDER BY worker;
SELECT durable_expire_lease(:t4, 'hung');
SELECT state, versions FROM durable.tasks WHERE task_id = :t4;
SELECT state, to_versions, action
FROM durable_migrate(:t4, '{"workflow": "1"}', '{"workflow": "2"}', 'ops', '{"ticket": 6}');
SELECT task_id = :t4 AS is_t4, to_versions, action
FROM durable_migrate('v6', '{"workflow": "2"}', '{"workflow": "3"}', 'ops', '{"ticket": 7}');
SELECT durable_quarantine(:t4, 'suspicious');
SELECT count(*) AS replayed_elsewhere
FROM durable_replay_dead_letters('v6', 10, partition => :v6_base + 1 - :t4_index);
SELECT task_id = :t4 AS is_t4, action FROM durable_replay_dead_letters('v6', 10, reason => 'suspicious');
SELECT state, fence, versions FROM durable.tasks WHERE task_id = :t4;
-- a task no worker seen within its queue's version_timeout runs goes to
-- review, by the coordinator's reconciler or durable_reconcile()
SELECT durable_create_queue('v7', version_timeout => '1 second');
SELECT durable_enqueue('v7', '{}', workflow_version => '9') AS t7 \gset
SELECT count(*) AS claimed FROM durable_claim('v7', 'w7', versions => '{"workflow": "1"}');
SELECT pg_sleep(2.5);
SELECT count(*) AS claimed FROM durable_claim('v7', 'w7', versions => '{"workflow": "1"}');
SELECT count(*) <= 1 AS at_most_one FROM durable_reconcile() WHERE action = 'version_unavailable';
SELECT state, stop_code FROM durable.tasks WHERE task_id = :t7;
-- a whole queue pauses and resumes, and a plain replay runs
SELECT durable_pause('v6');
SELECT count(*) AS claimed_while_paused FROM durable_claim('v6', 'w6');
SELECT paused FROM durable.queues WHERE queue_name = 'v6';
SELECT durable_resume('v6');
SELECT count(*) AS replayed FROM durable_replay_dead_letters('v6', 10);
-- a claim and a commit, counted in the shared memory of the node that ran
-- them, and in durable_metrics_prometheus() there
SELECT fence AS f4 FROM durable_claim('v6', 'w6') WHERE task_id = :t4 \gset
SELECT durable_commit(:t4, :f4, '{"ok": true}');
SELECT state, result FROM durable.tasks WHERE task_id = :t4;
SELECT enqueued, claimed, completed, failed FROM durable.queue_counters WHERE queue_name = 'v6';
-- durable.metrics reads those counters: a row per queue, the lag from the shards
SELECT finished = completed + dead_lettered + cancelled AS finished, m.reconciliation_lag
FROM durable.metrics m JOIN durable.queue_counters c USING (queue_name) WHERE queue_name = 'v6';
SELECT line FROM regexp_split_to_table(durable_metrics_prometheus(), E'\n') line
WHERE line ~ '^durable_tasks_(enqueued|claimed|completed)_total\{queue="v6"\}'
ORDER BY 1;
SELECT count(*) AS tasks_gauges FROM regexp_split_to_table(durable_metrics_prometheus(), E'\n') line
WHERE line LIKE 'durable_tasks{queue="v6",%';
-- the workers answer too (what ran on the coordinator is not counted there)
SELECT success, result ~ '(^|\n)durable_counters_available 1(\n|$)' AS available,
       result ~ '(^|\n)durable_reconciler_ticks_total [1-9]' AS ticks
FROM run_command_on_workers($$SELECT durable_metrics_prometheus()$$);
SELECT success, result FROM run_command_on_workers($$SELECT count(*) FROM durable.queue_counters WHERE queue_name = 'v6' AND completed > 0$$);

-- the operators' views answer on the cluster
SELECT queue_name, ready, running, completed, failed FROM durable.queue_stats
WHERE queue_name = 'jobs';
SELECT queue_name, tasks FROM durable.history_metrics WHERE queue_name = 'jobs';
-- history's metrics and gauges are summed on each shard and send a row per queue
-- to the coordinator, never a row per task: each subplan of their plans
-- is an aggregate (the temporary function and view are this node's only,
-- as Citus warns)
SET client_min_messages = error;
CREATE FUNCTION pg_temp.subplans_of_rows(view text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    line text;
    after_subplan boolean := false;
    n bigint := 0;
BEGIN
    FOR line IN EXECUTE format('EXPLAIN (COSTS OFF) SELECT * FROM %s', view) LOOP
        IF after_subplan AND line !~ 'Aggregate' THEN
            n := n + 1;
        END IF;
        after_subplan := line ~ 'Distributed Subplan';
    END LOOP;
    RETURN n;
END
$$;
SELECT v AS view, pg_temp.subplans_of_rows(v) AS subplans_of_rows
FROM unnest(ARRAY['durable.history_metrics', 'durable.queue_gauges']) v;
-- and they answer as the definition that joins a row per task (0.7.0's)
CREATE TEMP VIEW metrics_by_task AS
WITH per_task AS (
    SELECT t.queue_name, t.partition_key, t.task_id, t.state,
           count(*) FILTER (WHERE e.kind IN ('claimed', 'pinned')) AS claims,
           min(e.at) FILTER (WHERE e.kind = 'lease_expired'
                               AND e.detail->>'action' IS DISTINCT FROM 'not_begun') AS first_expiry,
           min(e.at) FILTER (WHERE e.kind = 'completed') AS completed_at,
           bool_or(e.state = 'needs_review') AS escalated
    FROM durable.tasks t
    JOIN durable.events e ON e.partition_key = t.partition_key AND e.task_id = t.task_id
    GROUP BY t.queue_name, t.partition_key, t.task_id, t.state
), effects AS (
    SELECT t.queue_name, count(*) AS duplicate_side_effects
    FROM (SELECT e.partition_key, e.task_id, e.step
          FROM durable.events e
          WHERE e.kind = 'receipt_recorded' AND e.detail->>'effect_id' IS NOT NULL
          GROUP BY e.partition_key, e.task_id, e.step
          HAVING count(DISTINCT e.detail->>'effect_id') > 1) d
    JOIN durable.tasks t USING (partition_key, task_id)
    GROUP BY t.queue_name
), outcomes AS (
    SELECT t.queue_name,
           count(*) FILTER (WHERE s.state = 'unknown'
                              OR (s.state = 'started' AND t.state <> 'running')) AS ambiguous,
           count(*) AS steps
    FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id)
    GROUP BY t.queue_name
), lag AS (
    SELECT t.queue_name, now() - min(t.lease_until) AS reconciliation_lag
    FROM durable.live_tasks t WHERE t.state = 'running' AND t.lease_until < now()
    GROUP BY t.queue_name
)
SELECT q.queue_name,
       count(p.task_id) AS tasks,
       coalesce(max(f.duplicate_side_effects), 0) AS duplicate_side_effects,
       count(p.task_id) FILTER (WHERE p.first_expiry IS NOT NULL) AS recoveries,
       round(avg((p.state = 'completed')::int) FILTER (WHERE p.first_expiry IS NOT NULL), 3) AS recovery_success_rate,
       avg(p.completed_at - p.first_expiry) FILTER (WHERE p.first_expiry IS NOT NULL AND p.completed_at IS NOT NULL) AS mean_recovery_time,
       round(max(o.ambiguous)::numeric / nullif(max(o.steps), 0), 3) AS ambiguous_outcome_rate,
       round(avg(p.escalated::int), 3) AS human_escalation_rate,
       round(avg(p.claims), 3) AS claims_per_task,
       coalesce(max(l.reconciliation_lag), '0') AS reconciliation_lag
FROM durable.queues q
LEFT JOIN per_task p ON p.queue_name = q.queue_name
LEFT JOIN effects f ON f.queue_name = q.queue_name
LEFT JOIN outcomes o ON o.queue_name = q.queue_name
LEFT JOIN lag l ON l.queue_name = q.queue_name
GROUP BY q.queue_name;
SET client_min_messages = warning;
SELECT count(*) AS differing FROM (
    (SELECT queue_name, tasks, duplicate_side_effects, recoveries, recovery_success_rate,
            mean_recovery_time, ambiguous_outcome_rate, human_escalation_rate, claims_per_task
     FROM durable.history_metrics
     EXCEPT ALL
     SELECT queue_name, tasks, duplicate_side_effects, recoveries, recovery_success_rate,
            mean_recovery_time, ambiguous_outcome_rate, human_escalation_rate, claims_per_task
     FROM metrics_by_task)
    UNION ALL
    (SELECT queue_name, tasks, duplicate_side_effects, recoveries, recovery_success_rate,
            mean_recovery_time, ambiguous_outcome_rate, human_escalation_rate, claims_per_task
     FROM metrics_by_task
     EXCEPT ALL
     SELECT queue_name, tasks, duplicate_side_effects, recoveries, recovery_success_rate,
            mean_recovery_time, ambiguous_outcome_rate, human_escalation_rate, claims_per_task
     FROM durable.history_metrics)) d;
SELECT count(*) > 1 AS queues, sum(tasks) > 0 AS tasks, sum(recoveries) > 0 AS recoveries
FROM durable.history_metrics;
SELECT count(*) AS problems FROM durable_verify();

-- A restricted queue on the cluster (0.9.0): its grants are privileges on
-- a sequence that the first grant makes on the coordinator (0.9.0's first
-- cut refused the grant there with 0A000, twice: a volatile function in
-- its UPDATE of the reference table durable.queues, and a sequence OWNED
-- BY a column of it).  Citus propagates the roles, not the sequence: on a
-- worker the queue's API is for superusers only (docs/scaling-out.md).
CREATE ROLE regress_citus_granted IN ROLE durable_producer, durable_worker;
CREATE ROLE regress_citus_other IN ROLE durable_producer, durable_worker;
SELECT durable_create_queue('granted', partitions => 4);
SELECT durable_grant_queue('granted', 'regress_citus_granted', 'all');
SELECT durable_grant_queue('granted', 'regress_citus_granted', 'all');
SELECT * FROM durable.queue_grants ORDER BY 1, 2, 3;
SELECT count(*) AS grants_sequences FROM pg_class c JOIN durable.queues q ON c.relname = q.grants_sequence
WHERE c.relkind = 'S' AND c.relnamespace = 'durable'::regnamespace;
-- the sequence goes with durable.queues, as on one server
SELECT count(*) AS owned_by_queues FROM pg_depend d JOIN durable.queues q
  ON d.objid = ('durable.' || q.grants_sequence)::regclass
WHERE d.refobjid = 'durable.queues'::regclass AND d.deptype = 'a' AND q.queue_name = 'granted';
SET ROLE regress_citus_granted;
SELECT durable_enqueue('granted', '{"n": 1}') AS g1 \gset
SELECT count(*) AS claimed_and_committed
FROM durable_claim('granted', 'gw') c, LATERAL durable_commit(c.task_id, c.fence) ok;
RESET ROLE;
SET ROLE regress_citus_other;
\set VERBOSITY sqlstate
SELECT durable_enqueue('granted', '{"n": 2}');
SELECT count(*) FROM durable_claim('granted', 'ow');
\set VERBOSITY default
RESET ROLE;
SELECT state FROM durable.tasks WHERE task_id = :g1;
-- a worker has no grants sequence: it refuses every role but superusers,
-- the granted one too
SELECT result FROM run_command_on_workers($$SELECT count(*) FROM pg_class
    WHERE relname LIKE 'queue\_grants\_%' AND relkind = 'S'$$) ORDER BY 1;
SELECT nodeport AS worker1 FROM pg_dist_node WHERE groupid = 1 \gset
SELECT nodeport AS coordinator FROM pg_dist_node WHERE groupid = 0 \gset
\c postgres - 127.0.0.1 :worker1
SET ROLE regress_citus_granted;
\set VERBOSITY sqlstate
SELECT durable_enqueue('granted', '{"n": 3}');
\set VERBOSITY default
RESET ROLE;
SELECT durable_enqueue('granted', '{"n": 4}') > 0 AS superuser_enqueued;
\c postgres - 127.0.0.1 :coordinator
SELECT count(*) AS claimed_and_committed
FROM durable_claim('granted', 'su') c, LATERAL durable_commit(c.task_id, c.fence) ok;
SELECT durable_revoke_queue('granted', 'regress_citus_granted', 'work');
SELECT * FROM durable.queue_grants ORDER BY 1, 2, 3;
-- dropping the queue drops its sequence, and the roles can go
SELECT durable_drop_queue('granted', cascade => true);
SELECT count(*) AS grants_sequences FROM pg_class
WHERE relname LIKE 'queue\_grants\_%' AND relkind = 'S';
DROP ROLE regress_citus_granted;
DROP ROLE regress_citus_other;
-- a session's citus.function_opens_transaction_block = off does not make a
-- call's write on another node commit there on its own: a statement that
-- fails after an enqueue leaves no task (until 0.9.0 it left the task)
SELECT durable_create_queue('opens');
SET citus.function_opens_transaction_block = off;
\set VERBOSITY sqlstate
SELECT durable_enqueue('opens', '{"n": 1}') > 0, durable_enqueue('no_such_queue', '{}') > 0;
\set VERBOSITY default
SELECT count(*) AS left_behind FROM durable.live_tasks WHERE queue_name = 'opens';
SELECT count(*) AS committed FROM durable_enqueue('opens', '{"n": 2}') t,
    LATERAL durable_claim('opens', 'w') c, LATERAL durable_commit(c.task_id, c.fence) ok;
RESET citus.function_opens_transaction_block;
SELECT durable_drop_queue('opens', cascade => true);
