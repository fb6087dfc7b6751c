--
-- Operations: stuck alarms, review and resolve, recovery packages, dead
-- letters, verify, retention, and the metrics views.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 3000) AS first_id_counter;
-- step keys mix in the installation's random id; this file pins it
UPDATE durable.installation SET installation_id = '00000000-0000-4000-8000-000000000001';

-- a lease that keeps being renewed while progress stands still: one alarm
-- per episode, and nothing else changes
SELECT durable_create_queue('slow', lease => '1 hour', progress_timeout => '1 ms');
SELECT durable_enqueue('slow', '{}') AS t \gset
SELECT fence FROM durable_claim('slow', 'w1') \gset
SELECT durable_heartbeat(:t, :fence, 'page 1') IS NOT NULL AS renewed;
SELECT pg_sleep(0.01);
SELECT durable_heartbeat(:t, :fence, 'page 1') IS NOT NULL AS renewed_without_progress;
SELECT task_id = :t AS is_t, action FROM durable_reconcile(queue => 'slow');
SELECT count(*) AS alarms_again FROM durable_reconcile(queue => 'slow');
SELECT state, fence FROM durable.tasks WHERE task_id = :t;
SELECT task_id = :t AS is_t, alarmed FROM durable.stuck_tasks WHERE queue_name = 'slow';
-- progress moves: a new episode may alarm again
SELECT durable_heartbeat(:t, :fence, 'page 2') IS NOT NULL AS progressed;
SELECT pg_sleep(0.01);
SELECT count(*) AS new_episode FROM durable_reconcile(queue => 'slow');
SELECT kind, detail->>'progress' AS progress, actor FROM durable.events WHERE task_id = :t AND kind = 'stuck' ORDER BY seq;
SELECT durable_commit(:t, :fence);

-- review: an unsafe step in doubt; the package says what is known
SELECT durable_create_queue('review', lease => '1 hour');
SELECT durable_enqueue('review', '{"invoice": 9}', class => 'unsafe') AS t \gset
SELECT fence FROM durable_claim('review', 'w2') \gset
SELECT (durable_step(:t, :fence, 'send', 'unsafe', '{"to": "x"}')).state;
SELECT durable_step_start(:t, :fence, 'send', 1);
SELECT (durable_step(:t, :fence, 'ledger', 'idempotent')).state;
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s' WHERE task_id = :t;
SELECT task_id = :t AS is_t, action FROM durable_reconcile(queue => 'review');
SELECT task_id = :t AS is_t, step, step_class, step_state, reason, decided FROM durable.review_queue WHERE queue_name = 'review';
SELECT jsonb_object_keys(durable_recovery_package(:t)) AS part ORDER BY 1;
SELECT p->'recommended_action'->>'action' AS action,
       p->'unknown_side_effects'->0->>'step' AS unknown_step,
       p->'idempotency_keys'->>'send' = durable_idempotency_key('00000000-0000-4000-8000-000000000001', :t::text, 'send') AS key,
       jsonb_array_length(p->'events') AS events,
       p->'task'->>'state' AS state
FROM durable_recovery_package(:t) p;
SELECT durable_recovery_package(424242);
SELECT durable_recovery_package(NULL);

-- resolve: the decision and its evidence are recorded, then applied
SELECT durable_resolve(:t, 'retry', 'ops-ann', '{"ticket": "OPS-1"}');
SELECT durable_resolve(:t, 'guess', 'ops-ann', '{}');
SELECT durable_resolve(:t, 'mark_committed', NULL, '{}');
SELECT durable_resolve(:t, 'mark_committed', 'ops-ann', NULL);
SELECT durable_resolve(:t, 'mark_committed', 'ops-ann', '{"mail_log": "sent 12:01"}');
SELECT t.state, s.state AS step_state, s.receipt, s.result FROM durable.tasks t
JOIN durable.steps s USING (partition_key, task_id) WHERE task_id = :t AND step = 'send';
SELECT seq, kind, actor, detail->>'decision' AS decision FROM durable.events
WHERE task_id = :t AND seq > 6 ORDER BY seq;
SELECT durable_resolve(:t, 'cancel', 'ops-ann', '{}');

-- the other decisions, on tasks without steps
SELECT durable_enqueue('review', '{"n": 1}', class => 'unsafe') AS a \gset
SELECT durable_enqueue('review', '{"n": 2}', class => 'unsafe') AS b \gset
SELECT durable_enqueue('review', '{"n": 3}', class => 'unsafe') AS c \gset
SELECT count(*) FROM durable_claim('review', 'w3', batch => 4) c, durable_begin(c.task_id, c.fence) b;
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s' WHERE task_id IN (:a, :b, :c);
SELECT action, count(*) AS to_review FROM durable_reconcile(queue => 'review') GROUP BY 1;
SELECT durable_resolve(:a, 'mark_not_executed', 'ops-bo', '{"checked": "nothing sent"}') AS a,
       durable_resolve(:b, 'mark_failed', 'ops-bo', '{"checked": "rejected"}') AS b,
       durable_resolve(:c, 'cancel', 'ops-bo', '{"reason": "duplicate order"}') AS c;
SELECT task_id = :b AS b, state, stop_code FROM durable.tasks WHERE task_id IN (:a, :b, :c) ORDER BY task_id;

-- dead letters: failed tasks get a new run, resuming after their committed steps
SELECT durable_create_queue('dlq', max_attempts => 1, lease => '1 hour');
SELECT durable_enqueue('dlq', '{"n": 1}') AS d1 \gset
SELECT durable_enqueue('dlq', '{"n": 2}') AS d2 \gset
SELECT count(*) FROM durable_claim('dlq', 'w4', batch => 2);
SELECT (durable_step(:d1, 1, 'first', 'idempotent')).state;
SELECT durable_step_start(:d1, 1, 'first', 1);
SELECT durable_commit(:d1, 1, step => 'first', expected_version => 2);
SELECT durable_fail(:d1, 1, 'transient');
SELECT (durable_step(:d2, 1, 'only', 'idempotent')).state;
SELECT durable_step_start(:d2, 1, 'only', 1);
SELECT durable_fail(:d2, 1, 'permanent', step => 'only');
-- the task whose step failed is no dead letter: its step's failure is final
SELECT task_id = :d1 AS d1, action FROM durable_replay_dead_letters('dlq') ORDER BY task_id;
SELECT task_id = :d1 AS d1, state, attempt, stop_code FROM durable.tasks WHERE queue_name = 'dlq' ORDER BY task_id;
SELECT task_id = :d1 AS d1, attempt, (SELECT state FROM durable_step(:d1, fence, 'first', 'idempotent')) AS first_step
FROM durable_claim('dlq', 'w5');
SELECT count(*) AS nothing_more FROM durable_replay_dead_letters('dlq');
SELECT durable_replay_dead_letters('nope');
-- chosen dead letters, by id, in the order given; what is not one says why
-- (a failed step, a task running or already replayed, no such task)
SELECT ord, action FROM durable_replay_dead_letters(ARRAY[:d2, :b, :d1, 4242424242, :b]::bigint[])
    WITH ORDINALITY AS r(task_id, action, ord) ORDER BY ord;
SELECT state, attempt, stop_code FROM durable.tasks WHERE task_id = :b;
SELECT kind, actor = current_user AS by_caller FROM durable.events WHERE task_id = :b ORDER BY seq DESC LIMIT 1;
SELECT durable_replay_dead_letters(ARRAY[1, NULL]::bigint[]);
SELECT count(*) AS none FROM durable_replay_dead_letters('{}'::bigint[]);

-- verify: rebuilt from the event log, every row agrees; a forged row does
-- not.  A live task's row against its events (a ready one of this file's):
SELECT count(*) AS disagreements FROM durable_verify();
SELECT task_id AS r, state AS r_state FROM durable.live_tasks
WHERE queue_name IN ('slow', 'review', 'dlq') AND state = 'ready' ORDER BY task_id LIMIT 1 \gset
UPDATE durable.live_tasks SET state = 'waiting' WHERE task_id = :r AND state <> 'waiting';
UPDATE durable.live_tasks SET state = 'ready' WHERE task_id = :r AND state = 'waiting' AND :'r_state' = 'waiting';
SELECT task_id = :r AS forged, problem ~ '^row says (waiting|ready) with fence [0-9]+, events say' AS row_against_events
FROM durable_verify();
-- a finished task among the live ones, or an unfinished one in history
UPDATE durable.live_tasks SET state = 'completed' WHERE task_id = :r;
SELECT task_id = :r AS forged, problem FROM durable_verify() WHERE problem LIKE '%kept%';
UPDATE durable.live_tasks SET state = :'r_state' WHERE task_id = :r;
-- a finished task's row in history is also its last event, so its state
-- and fence are the log's; its version must still count its events
UPDATE durable.task_history SET version = version + 1 WHERE task_id = :c;
SELECT task_id = :c AS forged, problem ~ '^version [0-9]+, but [0-9]+ events up to seq [0-9]+$' AS version_against_events
FROM durable_verify();
UPDATE durable.task_history SET version = version - 1 WHERE task_id = :c;
SELECT count(*) AS disagreements FROM durable_verify();

-- retention: finished tasks go with their steps and events, nothing else
-- does.  Tasks that finished more than a day ago (here: made so) are kept
-- outside the days of history and removed one by one...
SELECT count(*) AS finished FROM durable.tasks WHERE finished_at IS NOT NULL \gset
SELECT count(*) AS unfinished FROM durable.tasks WHERE finished_at IS NULL \gset
SELECT count(*) AS finished_live FROM durable.live_tasks WHERE finished_at IS NOT NULL;
UPDATE durable.task_history SET finished_at = finished_at - interval '8 days';
UPDATE durable.step_history SET finished_at = finished_at - interval '8 days';
SELECT count(*) = :finished AS all_outside_the_days FROM durable.task_history_default;
SELECT durable_create_queue('ops');
SELECT durable_inbox_receive('ops', 'c', 'old-message');
SET durable.retention = 0;
SET durable.inbox_retention = 0;
SELECT count(*) = :finished AS removed_all_finished FROM durable_reconcile(10000) WHERE action = 'removed';
SELECT count(*) = :unfinished AS unfinished_kept, count(*) FILTER (WHERE finished_at IS NOT NULL) AS finished_left
FROM durable.tasks;
SELECT count(*) AS orphan_events FROM durable.events e
WHERE NOT EXISTS (SELECT FROM durable.tasks t WHERE t.partition_key = e.partition_key AND t.task_id = e.task_id);
SELECT count(*) AS orphan_steps FROM durable.steps s
WHERE NOT EXISTS (SELECT FROM durable.tasks t WHERE t.partition_key = s.partition_key AND t.task_id = s.task_id);
SELECT count(*) AS inbox_left FROM durable.inbox WHERE queue_name = 'ops';
RESET durable.retention;
RESET durable.inbox_retention;
SELECT count(*) AS disagreements FROM durable_verify();

-- ... and a whole day goes at once, when all of it is older than retention
-- (here: three days from now), with its steps; its events stay while an
-- unfinished task may have some of the same day
SELECT durable_create_queue('days');
SELECT durable_enqueue('days', '{}') AS day_task \gset
SELECT task_id AS day_task, fence AS day_fence FROM durable_claim('days', 'w9') \gset
SELECT state FROM durable_step(:day_task, :day_fence, 'only', 'pure');
SELECT durable_step_start(:day_task, :day_fence, 'only', 1);
SELECT durable_commit(:day_task, :day_fence, '{}', step => 'only', expected_version => 2);
SELECT durable_commit(:day_task, :day_fence);
SELECT count(*) AS day_tasks FROM durable.task_history WHERE task_id = :day_task;
SELECT task_id, regexp_replace(action, '[0-9]{8}', 'YYYYMMDD') AS action
FROM durable.maintain_history(now() + interval '3 days', interval '0', 1000)
ORDER BY 2;
SELECT count(*) AS day_tasks_left FROM durable.tasks WHERE task_id = :day_task;
SELECT count(*) AS day_steps_left FROM durable.steps WHERE task_id = :day_task;
SELECT count(*) > 0 AS day_events_kept FROM durable.events WHERE task_id = :day_task;
SELECT count(*) AS disagreements FROM durable_verify();
-- the default and the days from then on
SELECT count(*) AS days FROM pg_inherits WHERE inhparent = 'durable.task_history'::regclass;

-- the metrics views answer
SELECT queue_name, ready, waiting, running, needs_review, completed, failed, cancelled
FROM durable.queue_stats WHERE queue_name IN ('slow', 'review', 'dlq') ORDER BY 1;
SELECT queue_name, tasks, duplicate_side_effects, claims_per_task >= 1 AS claims_per_task_at_least_1,
       reconciliation_lag
FROM durable.history_metrics WHERE queue_name IN ('review', 'dlq') ORDER BY 1;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'days,dlq,ops,review,slow'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
