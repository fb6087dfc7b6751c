-- Security (docs/design.md section 9): the tables are not writable by application
-- roles; the fenced API is the only way to change state, and each role
-- reaches only its part of it.
BEGIN;
SELECT plan(120);

SELECT has_role(r) FROM unnest(ARRAY['durable_producer', 'durable_worker', 'durable_operator',
                                     'durable_queue_operator']) r;

-- no application role may write a table; the operator may read them
SELECT table_privs_are('durable', t, r, ARRAY[]::text[],
                       r || ' has no privilege on durable.' || t)
FROM unnest(ARRAY['queues', 'tasks', 'events', 'steps', 'inbox', 'outbox', 'idempotency_keys']) t,
     unnest(ARRAY['durable_producer', 'durable_worker']) r;
SELECT table_privs_are('durable', t, 'durable_operator', ARRAY['SELECT'],
                       'durable_operator may only read durable.' || t)
FROM unnest(ARRAY['queues', 'tasks', 'events', 'steps', 'inbox', 'outbox', 'idempotency_keys']) t;
SELECT table_privs_are('durable', t, 'public', ARRAY[]::text[], 'PUBLIC has no privilege on durable.' || t)
FROM unnest(ARRAY['queues', 'tasks', 'events', 'steps', 'inbox', 'outbox', 'idempotency_keys']) t;

-- pg_monitor (and PUBLIC) read aggregates only: every column either can
-- read in the extension's relations, wherever they live, taken from the
-- catalog and compared with this list.  A view granted to pg_monitor later
-- with a payload, a result, an error text, an event name or a task id in it
-- fails here until someone decides it belongs on the list.
SELECT set_eq(
    $$SELECT c.oid::regclass::text || '.' || a.attname
      FROM pg_depend d
      JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      WHERE d.refclassid = 'pg_extension'::regclass
        AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'durable')
        AND d.deptype = 'e'
        AND (has_column_privilege('pg_monitor', c.oid, a.attnum, 'SELECT')
             OR has_column_privilege('public', c.oid, a.attnum, 'SELECT'))$$,
    $$SELECT 'durable.' || v FROM unnest(ARRAY[
        'queue_stats.queue_name', 'queue_stats.paused', 'queue_stats.ready', 'queue_stats.waiting',
        'queue_stats.running', 'queue_stats.needs_review', 'queue_stats.completed', 'queue_stats.failed',
        'queue_stats.cancelled', 'queue_stats.oldest_due_age', 'queue_stats.oldest_heartbeat_age',
        'queue_stats.expired_leases', 'queue_stats.stuck', 'queue_stats.paused_partitions',
        'metrics.queue_name', 'metrics.finished', 'metrics.duplicate_side_effects', 'metrics.recoveries',
        'metrics.recovery_success_rate', 'metrics.mean_recovery_time', 'metrics.ambiguous_outcome_rate',
        'metrics.human_escalation_rate', 'metrics.claims_per_task', 'metrics.reconciliation_lag',
        'metrics.since',
        'history_metrics.queue_name', 'history_metrics.tasks', 'history_metrics.duplicate_side_effects',
        'history_metrics.recoveries', 'history_metrics.recovery_success_rate',
        'history_metrics.mean_recovery_time', 'history_metrics.ambiguous_outcome_rate',
        'history_metrics.human_escalation_rate', 'history_metrics.claims_per_task',
        'history_metrics.reconciliation_lag',
        'wait_stats.queue_name', 'wait_stats.kind', 'wait_stats.waiting', 'wait_stats.oldest_wait',
        'wait_stats.with_timeout',
        'schedule_stats.queue_name', 'schedule_stats.schedules', 'schedule_stats.due',
        'schedule_stats.oldest_due_age',
        'queue_counters.queue_name', 'queue_counters.enqueued', 'queue_counters.claimed',
        'queue_counters.completed', 'queue_counters.failed', 'queue_counters.cancelled',
        'queue_counters.retried', 'queue_counters.leases_expired', 'queue_counters.sent_to_review',
        'queue_counters.resolved_mark_committed', 'queue_counters.resolved_mark_not_executed',
        'queue_counters.resolved_mark_failed', 'queue_counters.resolved_retry',
        'queue_counters.resolved_cancel', 'queue_counters.dead_lettered', 'queue_counters.quarantined',
        'queue_counters.replayed', 'queue_counters.migrated', 'queue_counters.stale_writes',
        'queue_counters.version_conflicts', 'queue_counters.idempotent_replays',
        'queue_counters.events_emitted', 'queue_counters.wakeups', 'queue_counters.rate_limited',
        'queue_counters.steps_started', 'queue_counters.steps_left_in_doubt',
        'queue_counters.duplicate_effects', 'queue_counters.finished_after_expiry',
        'queue_counters.recovered', 'queue_counters.stats_reset',
        'queue_gauges.queue_name', 'queue_gauges.paused', 'queue_gauges.paused_partitions',
        'queue_gauges.ready', 'queue_gauges.running', 'queue_gauges.waiting',
        'queue_gauges.needs_review', 'queue_gauges.scheduled', 'queue_gauges.oldest_ready_age_seconds',
        'queue_gauges.oldest_heartbeat_age_seconds',
        'queue_samples.at', 'queue_samples.queue_name', 'queue_samples.ready',
        'queue_samples.running', 'queue_samples.waiting', 'queue_samples.needs_review',
        'queue_samples.oldest_ready_age_seconds', 'queue_samples.enqueued',
        'queue_samples.completed', 'queue_samples.failed', 'queue_samples.dead_lettered',
        'queue_samples.leases_expired', 'queue_samples.sent_to_review',
        'queue_samples.counters_since',
        -- how many parts of the tick fail and since when, not their errors
        'status.preloaded', 'status.reconciler', 'status.reconciler_pid', 'status.reconciler_database',
        'status.node_id', 'status.failing_parts', 'status.failing_since',
        'status.library_version']) v$$,
    'pg_monitor and PUBLIC read exactly the aggregate columns listed, in every relation of durable');

-- and call only the pure functions and those that tell the reconciler's
-- state (durable.status reads them)
SELECT set_eq(
    $$SELECT p.oid::regprocedure::text
      FROM pg_depend d JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
      WHERE d.refclassid = 'pg_extension'::regclass
        AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'durable')
        AND d.deptype = 'e'
        AND (has_function_privilege('pg_monitor', p.oid, 'EXECUTE')
             OR has_function_privilege('public', p.oid, 'EXECUTE'))$$,
    ARRAY['durable_next_action(integer,integer,interval,interval,text,interval)',
          'durable_recovery_action(boolean,text,boolean,integer,integer,boolean)',
          'durable_idempotency_key(text[])',
          'durable_retry_delay(text,integer,integer,integer)',
          'durable_request_hash(jsonb)',
          'durable_cron_next(text,timestamp with time zone,text)',
          'durable.library_status()',
          'durable.reconciler_pid()',
          'durable.failing_parts_of_nodes()',
          'durable.queue_counters()',
          'durable_metrics_prometheus()',
          'durable.metric_samples(text[])',
          -- a reader's own scope, which the views ask of every row
          'durable.queues_in_scope()', 'durable.queue_in_scope(text)',
          'durable.task_in_scope(bigint)'],
    'pg_monitor and PUBLIC call only the pure functions, the reconciler''s state and the counters (and the metrics, as text or rows)');

-- a queue operator reads the views that show its queues' rows, and
-- nothing else of durable's (the views filter the rows: test/t/032)
SELECT set_eq(
    $$SELECT c.oid::regclass::text
      FROM pg_depend d JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
      WHERE d.refclassid = 'pg_extension'::regclass
        AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'durable')
        AND d.deptype = 'e' AND c.relkind IN ('r', 'v', 'p', 'm', 'f')
        AND has_table_privilege('durable_queue_operator', c.oid, 'SELECT')$$,
    ARRAY['durable.tasks', 'durable.unfinished_tasks', 'durable.finished_tasks', 'durable.steps',
          'durable.events', 'durable.dead_letters', 'durable.review_queue', 'durable.stuck_tasks',
          'durable.waiting_tasks', 'durable.queue_gauges', 'durable.fairness_keys',
          'durable.queue_settings', 'durable.queue_samples'],
    'durable_queue_operator reads only the views that show its queues');
-- and calls the operator's functions on a task or a queue, which check
-- its grants, and those of the API open to every role
SELECT set_eq(
    $$SELECT p.oid::regprocedure::text
      FROM pg_depend d JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
      WHERE d.refclassid = 'pg_extension'::regclass
        AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'durable')
        AND d.deptype = 'e'
        AND has_function_privilege('durable_queue_operator', p.oid, 'EXECUTE')
        AND NOT has_function_privilege('public', p.oid, 'EXECUTE')$$,
    ARRAY['durable_resolve(bigint,text,text,jsonb,text,numeric)',
          'durable_recovery_package(bigint)',
          'durable_quarantine(bigint,text)',
          'durable_cancel(bigint,text)',
          'durable_expire_lease(bigint,text)',
          'durable_replay_dead_letters(text,integer,integer,text)',
          'durable_replay_dead_letters(bigint[])',
          'durable_migrate(bigint,jsonb,jsonb,text,jsonb,boolean)',
          'durable_migrate(text,jsonb,jsonb,text,jsonb,boolean,integer)',
          'durable_pause(text,integer)',
          'durable_resume(text,integer)',
          'durable_emit(text,text,jsonb)',
          -- pages of history's ids, of a queue in its scope only
          'durable.finished_task_ids(text,integer[],durable.task_state[],bigint,bigint,integer)',
          'durable.dead_letter_ids(text,integer[],timestamp with time zone,bigint,integer)'],
    'durable_queue_operator calls only the operator functions that check its grants');

-- who may call what
SELECT function_privs_are('public', 'durable_enqueue',
       ARRAY['text', 'jsonb', 'text', 'timestamp with time zone', 'integer', 'text', 'integer', 'interval', 'text', 'jsonb', 'text', 'text', 'jsonb', 'text[]', 'numeric'],
       'durable_producer', ARRAY['EXECUTE']);
SELECT function_privs_are('public', 'durable_enqueue',
       ARRAY['text', 'jsonb', 'text', 'timestamp with time zone', 'integer', 'text', 'integer', 'interval', 'text', 'jsonb', 'text', 'text', 'jsonb', 'text[]', 'numeric'],
       'durable_worker', ARRAY[]::text[]);
SELECT function_privs_are('public', f, args, 'durable_worker', ARRAY['EXECUTE'])
FROM (VALUES ('durable_claim', ARRAY['text', 'text', 'interval', 'integer', 'jsonb']),
             ('durable_heartbeat', ARRAY['bigint', 'bigint', 'text', 'interval']),
             ('durable_commit', ARRAY['bigint', 'bigint', 'jsonb', 'text', 'integer', 'numeric']),
             ('durable_fail', ARRAY['bigint', 'bigint', 'text', 'jsonb', 'interval', 'text'])) AS v(f, args);
-- giving tasks back and renewing many leases: workers only
SELECT function_privs_are('public', f, args, r, CASE WHEN r = 'durable_worker' THEN ARRAY['EXECUTE'] ELSE ARRAY[]::text[] END)
FROM (VALUES ('durable_release', ARRAY['bigint', 'bigint', 'text']),
             ('durable_heartbeat_batch', ARRAY['bigint[]', 'bigint[]', 'interval'])) AS v(f, args),
     unnest(ARRAY['durable_worker', 'durable_producer', 'durable_operator']) r;
SELECT function_privs_are('public', f, args, 'durable_producer', ARRAY[]::text[])
FROM (VALUES ('durable_claim', ARRAY['text', 'text', 'interval', 'integer', 'jsonb']),
             ('durable_commit', ARRAY['bigint', 'bigint', 'jsonb', 'text', 'integer', 'numeric'])) AS v(f, args);
SELECT function_privs_are('public', f, args, 'durable_operator', ARRAY['EXECUTE'])
FROM (VALUES ('durable_pause', ARRAY['text', 'integer']),
             ('durable_resume', ARRAY['text', 'integer']),
             ('durable_cancel', ARRAY['bigint', 'text']),
             ('durable_reconcile', ARRAY['integer', 'text']),
             ('durable_drop_queue', ARRAY['text', 'boolean']),
             ('durable_migrate', ARRAY['bigint', 'jsonb', 'jsonb', 'text', 'jsonb', 'boolean']),
             ('durable_migrate', ARRAY['text', 'jsonb', 'jsonb', 'text', 'jsonb', 'boolean', 'integer']),
             ('durable_quarantine', ARRAY['bigint', 'text']),
             ('durable_expire_lease', ARRAY['bigint', 'text']),
             ('durable_replay_dead_letters', ARRAY['text', 'integer', 'integer', 'text'])) AS v(f, args);
SELECT function_privs_are('public', f, args, 'durable_worker', ARRAY[]::text[])
FROM (VALUES ('durable_pause', ARRAY['text', 'integer']),
             ('durable_cancel', ARRAY['bigint', 'text']),
             ('durable_reconcile', ARRAY['integer', 'text']),
             ('durable_migrate', ARRAY['bigint', 'jsonb', 'jsonb', 'text', 'jsonb', 'boolean']),
             ('durable_quarantine', ARRAY['bigint', 'text']),
             ('durable_expire_lease', ARRAY['bigint', 'text'])) AS v(f, args);

-- the calls of workflows that wait and of flow control: who may start a
-- wait, emit, schedule, debounce, throttle, weigh a fairness key
SELECT function_privs_are('public', f, args, r,
       CASE WHEN r = ANY (who) THEN ARRAY['EXECUTE'] ELSE ARRAY[]::text[] END)
FROM (VALUES ('durable_sleep', ARRAY['bigint', 'bigint', 'text', 'timestamp with time zone'], ARRAY['durable_worker']),
             ('durable_sleep', ARRAY['bigint', 'bigint', 'text', 'interval'], ARRAY['durable_worker']),
             ('durable_await', ARRAY['bigint', 'bigint', 'text', 'text', 'interval', 'text'], ARRAY['durable_worker']),
             ('durable_join', ARRAY['bigint', 'bigint', 'text', 'text[]', 'interval'], ARRAY['durable_worker']),
             ('durable_emit', ARRAY['text', 'text', 'jsonb'], ARRAY['durable_worker', 'durable_producer', 'durable_operator']),
             ('durable_enqueue_batch', ARRAY['text', 'jsonb[]', 'text[]', 'timestamp with time zone', 'integer',
                                             'text', 'integer', 'interval', 'text', 'jsonb', 'text[]', 'text[]'],
              ARRAY['durable_producer']),
             ('durable_debounce', ARRAY['text', 'text', 'jsonb', 'interval', 'interval', 'text'], ARRAY['durable_producer']),
             ('durable_throttle', ARRAY['text', 'text', 'jsonb', 'interval'], ARRAY['durable_producer']),
             ('durable_set_fairness', ARRAY['text', 'text', 'real'], ARRAY['durable_operator']),
             ('durable_schedule', ARRAY['text', 'text', 'text', 'jsonb', 'text', 'boolean'], ARRAY['durable_operator']),
             ('durable_unschedule', ARRAY['text'], ARRAY['durable_operator'])) AS v(f, args, who),
     unnest(ARRAY['durable_worker', 'durable_producer', 'durable_operator']) r;

-- events belong to a queue: the forms of 0.3.0 without one are gone
SELECT hasnt_function('public', 'durable_emit', ARRAY['text', 'jsonb'],
                      'durable_emit(event, payload) is gone');
SELECT hasnt_function('public', 'durable_await', ARRAY['bigint', 'bigint', 'text', 'text', 'interval'],
                      'durable_await without a queue argument is gone');

-- the refusals, for real
SELECT durable_create_queue('priv');
SELECT durable_create_queue('priv_events');
SELECT durable_grant_queue('priv_events', 'durable_operator', 'all');
SET LOCAL ROLE durable_worker;
SELECT throws_ok($$UPDATE durable.tasks SET state = 'completed'$$, '42501', NULL,
                 'a worker cannot update tasks directly');
SELECT throws_ok($$INSERT INTO durable.events (partition_key, task_id, seq, state, fence, at, kind)
                   VALUES (1, 1, 1, 'ready', 0, now(), 'forged')$$, '42501', NULL,
                 'a worker cannot forge events');
SELECT throws_ok($$SELECT durable_enqueue('priv', '{}')$$, '42501', NULL,
                 'a worker cannot enqueue');
SELECT throws_ok($$SELECT durable_pause('priv')$$, '42501', NULL, 'a worker cannot pause a queue');
RESET ROLE;
SET LOCAL ROLE durable_producer;
SELECT throws_ok($$SELECT durable_emit('priv_events', 'paid:1', '{"forged": true}')$$, '42501', NULL,
                 'a producer without the queue''s enqueue grant cannot emit its events');
RESET ROLE;
-- a worker without the queue's work grant gets one answer for its tasks,
-- 42501, whatever the fence and for an id that does not exist
SELECT durable_enqueue('priv_events', '{}');
SELECT task_id AS priv_task, fence AS priv_fence FROM durable_claim('priv_events', 'w0') \gset
SET LOCAL ROLE durable_worker;
SELECT throws_ok(format('SELECT durable_heartbeat(%s, %s)', :priv_task, :priv_fence), '42501', NULL,
                 'a worker without the work grant cannot heartbeat the task under its fence');
SELECT throws_ok(format('SELECT durable_heartbeat(%s, %s)', :priv_task, :priv_fence + 1), '42501', NULL,
                 'nor under another fence');
SELECT throws_ok(format('SELECT durable_heartbeat_batch(ARRAY[%s]::bigint[], ARRAY[%s]::bigint[])',
                        :priv_task, :priv_fence + 1), '42501', NULL,
                 'nor in a batch under another fence');
SELECT throws_ok('SELECT durable_heartbeat(4242, 1)', '42501', NULL,
                 'and an unknown task answers the same');
SELECT throws_ok('SELECT durable_heartbeat_batch(ARRAY[4242]::bigint[], ARRAY[1]::bigint[])', '42501', NULL,
                 'also in a batch');
RESET ROLE;
SELECT throws_ok('SELECT durable_heartbeat(4242, 1)', '42704', NULL,
                 'a role that may work on every queue is told the task does not exist');

-- and the calls each role is there for
SET LOCAL ROLE durable_producer;
SELECT lives_ok($$SELECT durable_enqueue('priv', jsonb_build_object('n', n)) FROM generate_series(1, 3) n$$,
                'a producer enqueues');
RESET ROLE;
SET LOCAL ROLE durable_worker;
SELECT is((SELECT count(*) FROM durable_claim('priv', 'w1')), 1::bigint, 'a worker claims');
SELECT lives_ok($$SELECT durable_heartbeat(t.task_id, t.fence, 'p') FROM durable_claim('priv', 'w1') t$$,
                'a worker heartbeats');
SELECT lives_ok($$SELECT durable_commit(t.task_id, t.fence) FROM durable_claim('priv', 'w1') t$$,
                'a worker commits');
RESET ROLE;
SET LOCAL ROLE durable_operator;
SELECT lives_ok($$SELECT durable_pause('priv')$$, 'an operator pauses');
SELECT lives_ok($$SELECT durable_resume('priv')$$, 'an operator resumes');
SELECT is((SELECT count(*) FROM durable.tasks WHERE queue_name = 'priv'), 3::bigint,
          'an operator reads tasks');
RESET ROLE;

-- the enqueue event names the role that called, not the definer
SELECT is((SELECT array_agg(DISTINCT actor) FROM durable.events e JOIN durable.tasks t USING (partition_key, task_id)
           WHERE t.queue_name = 'priv' AND e.kind = 'enqueued'),
          ARRAY['durable_producer'], 'events name the calling role');

SELECT * FROM finish();
ROLLBACK;
