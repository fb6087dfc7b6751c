--
-- The stop-loss runbook as calls (docs/design.md section 15): pause one partition
-- of a queue, quarantine what cannot go on into dead letters with a
-- reason, replay dead letters in small batches by partition or reason,
-- resume.  Times are compared, never printed.
--
SELECT setval('durable.task_seq', 16000) AS first_id_counter;
SELECT durable_create_queue('stop', lease => '1 minute', partitions => 4, max_attempts => 1);
\set VERBOSITY default
SELECT partition_base AS base FROM durable.queues WHERE queue_name = 'stop' \gset

-- two tasks in each partition (keys spread them; the partitions are the
-- queue's partition_key values)
SELECT count(durable_enqueue('stop', jsonb_build_object('n', n), idempotency_key => 'k' || n))
FROM generate_series(1, 40) n;
SELECT count(DISTINCT partition_key) AS partitions FROM durable.tasks WHERE queue_name = 'stop';

-- pause one partition: claims take from the others only
SELECT durable_pause('stop', partition => :base + 1);
SELECT paused, paused_partitions = ARRAY[:base + 1] AS one_paused
FROM durable.queue_stats WHERE queue_name = 'stop';
SELECT count(*) FILTER (WHERE t.partition_key = :base + 1) AS from_paused, count(*) > 0 AS claimed
FROM durable_claim('stop', 'w', batch => 100) c JOIN durable.tasks t USING (task_id);
SELECT count(*) AS left_in_paused FROM durable.tasks
WHERE queue_name = 'stop' AND state = 'ready' AND partition_key = :base + 1;
SELECT count(*) AS left_elsewhere FROM durable.tasks
WHERE queue_name = 'stop' AND state = 'ready' AND partition_key <> :base + 1;
-- pausing twice is pausing once; a partition of another queue is refused
SELECT durable_pause('stop', partition => :base + 1);
SELECT cardinality(paused_partitions) FROM durable.queues WHERE queue_name = 'stop';
SELECT durable_pause('stop', partition => :base + 4);
SELECT durable_pause('stop', partition => -1);
SELECT durable_pause('nope', partition => 0);

-- the running tasks of the other partitions finish, or are quarantined:
-- one with a step in doubt is refused, one without goes to dead letters
-- with its lease revoked
SELECT task_id AS q1, fence AS qf1 FROM durable.live_tasks
WHERE queue_name = 'stop' AND state = 'running' ORDER BY task_id LIMIT 1 \gset
SELECT task_id AS q2, fence AS qf2 FROM durable.live_tasks
WHERE queue_name = 'stop' AND state = 'running' ORDER BY task_id LIMIT 1 OFFSET 1 \gset
SELECT state FROM durable_step(:q2, :qf2, 'charge', 'unsafe');
SELECT durable_step_start(:q2, :qf2, 'charge', 1);
SELECT durable_quarantine(:q2, 'payments API returns 500');
SELECT durable_quarantine(:q1, 'payments API returns 500');
SELECT state, stop_code, fence = :qf1 + 1 AS fenced, last_error ->> 'reason' AS reason
FROM durable.tasks WHERE task_id = :q1;
SELECT kind, state, actor = current_user AS by_caller, detail FROM durable.events
WHERE task_id = :q1 ORDER BY seq DESC LIMIT 1;
-- its worker is fenced off
SELECT durable_commit(:q1, :qf1);
-- a finished task, an unknown one, no reason
SELECT durable_quarantine(:q1, 'again');
SELECT durable_quarantine(-1, 'x');
SELECT durable_quarantine(:q2, '');
SELECT durable_quarantine(:q2, NULL);
-- a ready task in the paused partition is quarantined too
SELECT task_id AS q3 FROM durable.live_tasks
WHERE queue_name = 'stop' AND state = 'ready' AND partition_key = :base + 1
ORDER BY task_id LIMIT 1 \gset
SELECT durable_quarantine(:q3, 'payments API returns 500');
-- and the other running ones fail for good (max_attempts 1)
SELECT count(durable_fail(task_id, fence, 'transient', '{"status": 500}'))
FROM durable.live_tasks WHERE queue_name = 'stop' AND state = 'running' AND task_id <> :q2;

-- the dead letters, and why
SELECT reason, stop_code, count(*), bool_and(replayable) AS replayable
FROM durable.dead_letters WHERE queue_name = 'stop' GROUP BY 1, 2 ORDER BY 1;

-- after the fix: replay small batches, by reason, by partition
SELECT count(*) AS replayed FROM durable_replay_dead_letters('stop', 1, reason => 'payments API returns 500');
SELECT count(*) AS replayed FROM durable_replay_dead_letters('stop', 5, reason => 'attempts_exhausted',
                                                              partition => :base + 2);
SELECT bool_and(partition_key = :base + 2) AS all_of_that_partition, count(*) > 0 AS some
FROM durable.events e JOIN durable.tasks t USING (partition_key, task_id)
WHERE t.queue_name = 'stop' AND e.kind = 'replayed'
  AND t.task_id NOT IN (SELECT task_id FROM durable.events WHERE kind = 'quarantined');
SELECT count(*) AS replayed FROM durable_replay_dead_letters('stop', 10, reason => 'quarantined');
SELECT count(*) AS quarantined_left FROM durable.dead_letters
WHERE queue_name = 'stop' AND stop_code = 'quarantined';
SELECT durable_replay_dead_letters('stop', 1, partition => :base + 9);
SELECT durable_replay_dead_letters('stop', 1, partition => -2);

-- resume the partition; the queue's own pause is apart
SELECT durable_resume('stop', partition => :base + 1);
SELECT paused, paused_partitions FROM durable.queue_stats WHERE queue_name = 'stop';
SELECT count(*) FILTER (WHERE t.partition_key = :base + 1) > 0 AS from_resumed
FROM durable_claim('stop', 'w', batch => 100) c JOIN durable.tasks t USING (task_id);

-- who paused and resumed what, and when
SELECT kind, partition_key - :base AS partition_index, role = current_user AS by_caller
FROM durable.queue_log WHERE queue_name = 'stop' ORDER BY at, kind;

SELECT * FROM durable_verify();

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'stop'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
