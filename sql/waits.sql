-- Workflows that wait (docs/design.md section 12): timers, events, children,
-- concurrency keys, batch enqueue.  Times are database time; the few
-- waits that must pass are a second long, and what they check does not
-- depend on how long the machine takes.
SELECT setval('durable.task_seq', 7003) AS first_id_counter;
SELECT durable_create_queue('flow', lease => '1 minute');
SELECT durable_create_queue('labels');

-- Timers
SELECT durable_enqueue('flow', '{"order": 1}') AS t1 \gset
SELECT task_id = :t1 AS claimed, fence AS f1, attempt FROM durable_claim('flow', 'w') \gset
SELECT durable_sleep(:t1, :f1, 'nap', duration => '1 hour');
-- the lease is gone, the attempt given back, the fence moved on
SELECT state, attempt, fence = :f1 + 1 AS revoked, lease_until IS NULL AS no_lease,
       run_at > now() + '59 minutes' AS until_then
FROM durable.live_tasks WHERE task_id = :t1;
-- the worker that slept holds nothing any more
SELECT durable_sleep(:t1, :f1, 'nap', duration => '1 hour');
SELECT durable_claim('flow', 'w');
SELECT task_id, kind, wait_name FROM durable.waiting_tasks WHERE task_id = :t1;
SELECT queue_name, kind, waiting, with_timeout FROM durable.wait_stats
WHERE queue_name IN ('bad', 'both', 'flow', 'waits_gone', 'labels', 'sync') ORDER BY 1, 2;
SELECT durable_recovery_package(:t1) -> 'recommended_action' ->> 'action' AS recommended;

-- a sleep that has elapsed returns 'elapsed' and keeps the lease
SELECT durable_enqueue('flow', '{"order": 2}') AS t2 \gset
SELECT fence AS f2 FROM durable_claim('flow', 'w') \gset
SELECT durable_sleep(:t2, :f2, 'past', until => '2026-01-01 00:00:00+00');
SELECT state FROM durable.live_tasks WHERE task_id = :t2;
SELECT clock_timestamp() + interval '1 second' AS short_until \gset
SELECT durable_sleep(:t2, :f2, 'short', until => :'short_until');
SELECT pg_sleep(1.2);
SELECT task_id = :t2 AS woke, fence AS f2, attempt FROM durable_claim('flow', 'w') \gset
SELECT :'woke', :attempt;
-- replayed, in another time zone: the same time, so the same sleeps
SET TimeZone = 'Asia/Tokyo';
SELECT durable_sleep(:t2, :f2, 'past', until => '2026-01-01 09:00:00+09');
SELECT durable_sleep(:t2, :f2, 'short', until => :'short_until');
RESET TimeZone;
-- the same name with other arguments
SELECT durable_sleep(:t2, :f2, 'past', duration => '1 second');
SELECT durable_sleep(:t2, :f2, 'past', until => '2026-01-02 00:00:00+00');
-- bad arguments
SELECT durable_sleep(:t2, :f2, NULL, duration => '1 second');
SELECT durable_sleep(:t2, :f2, 'x', duration => NULL);
SELECT durable_sleep(:t2, :f2, 'x', duration => '-1 second');
SELECT durable_sleep(:t2, :f2, 'x', until => 'infinity');
SELECT durable_sleep(:t2, :f2, repeat('x', 64), duration => '1 second');
-- a task with a step in doubt cannot wait
SELECT state FROM durable_step(:t2, :f2, 'charge', 'queryable', '{"amount": 5}');
SELECT durable_step_start(:t2, :f2, 'charge', 1);
SELECT durable_sleep(:t2, :f2, 'later', duration => '1 second');
SELECT durable_commit(:t2, :f2, '{"id": "ch_1"}', step => 'charge', expected_version => 2);
SELECT durable_commit(:t2, :f2, '{}');

-- Events: each belongs to a queue
SELECT durable_emit('flow', 'paid:3', '{"amount": 30}');
SELECT durable_emit('flow', 'paid:3', '{"amount": 30}');
SELECT durable_emit('flow', 'paid:3', '{"amount": 31}');
SELECT durable_emit('flow', 'paid:3');
SELECT durable_emit('flow', NULL);
SELECT durable_emit('flow', '');
SELECT durable_emit(NULL, 'signal');
SELECT durable_emit('nowhere', 'signal');
SELECT durable_emit('flow', 'signal');
SELECT durable_emit('flow', 'signal');
SELECT durable_emit('flow', 'signal', '{}');
-- the same name in another queue is another event: its own first emit
SELECT durable_emit('labels', 'paid:3', '{"amount": 99}');
SELECT durable_emit('labels', 'paid:3', '{"amount": 99}');
SELECT queue_name, payload FROM durable.emitted_events WHERE event = 'paid:3' ORDER BY 1;
-- the 0.3.0 form without a queue is gone
SELECT durable_emit('paid:3', '{"amount": 30}'::jsonb);
-- emitted before the await: nothing is lost, the lease stays; the task's
-- own queue's event, unless the await names another queue
SELECT durable_enqueue('flow', '{"order": 3}') AS t3 \gset
SELECT fence AS f3 FROM durable_claim('flow', 'w') \gset
SELECT * FROM durable_await(:t3, :f3, 'payment', 'paid:3');
SELECT state FROM durable.live_tasks WHERE task_id = :t3;
SELECT * FROM durable_await(:t3, :f3, 'payment', 'paid:3');
SELECT * FROM durable_await(:t3, :f3, 'payment', 'paid:3', queue => 'flow');
SELECT * FROM durable_await(:t3, :f3, 'payment', 'paid:4');
SELECT * FROM durable_await(:t3, :f3, 'payment', 'paid:3', queue => 'labels');
SELECT * FROM durable_await(:t3, :f3, 'labels-payment', 'paid:3', queue => 'labels');
SELECT * FROM durable_await(:t3, :f3, 'elsewhere', 'paid:3', queue => 'nowhere');
SELECT * FROM durable_await(:t3, :f3, 'elsewhere', 'paid:3', queue => '');
SELECT waits -> 'payment' -> 'args' AS own_args, waits -> 'labels-payment' -> 'args' AS other_args
FROM durable.live_tasks WHERE task_id = :t3;
-- an await recorded by 0.4.0 names no queue: it replays as one of the
-- task's own queue, as it was
UPDATE durable.live_tasks SET waits = jsonb_set(waits, '{payment,args}', (waits -> 'payment' -> 'args') - 'queue')
WHERE task_id = :t3;
SELECT * FROM durable_await(:t3, :f3, 'payment', 'paid:3');
SELECT * FROM durable_await(:t3, :f3, 'payment', 'paid:3', queue => 'flow');
SELECT * FROM durable_await(:t3, :f3, 'payment', 'paid:3', queue => 'labels');
-- emitted while it waits: the emit into its queue wakes it, the same name
-- in another queue does not
SELECT * FROM durable_await(:t3, :f3, 'shipped', 'shipped:3', timeout => '3 days');
SELECT state, run_at > now() + '2 days' AS until_timeout FROM durable.live_tasks WHERE task_id = :t3;
SELECT queue_name, event FROM durable.event_waits WHERE task_id = :t3;
SELECT durable_emit('labels', 'shipped:3', '{"carrier": "ups"}');
SELECT state, run_at > now() + '2 days' AS still_waiting FROM durable.live_tasks WHERE task_id = :t3;
SELECT task_id = :t3 AS same, event, event_queue FROM durable.waiting_tasks WHERE task_id = :t3;
SELECT substring(durable_recovery_package(:t3) -> 'recommended_action' ->> 'reason' FROM ': (.*)$') AS wakes_it;
SELECT durable_emit('flow', 'shipped:3', '{"carrier": "dhl"}');
SELECT state, run_at <= now() AS woken FROM durable.live_tasks WHERE task_id = :t3;
SELECT count(*) AS registered FROM durable.event_waits WHERE task_id = :t3;
SELECT fence AS f3 FROM durable_claim('flow', 'w') \gset
SELECT * FROM durable_await(:t3, :f3, 'payment', 'paid:3');
SELECT * FROM durable_await(:t3, :f3, 'shipped', 'shipped:3', timeout => '3 days');
SELECT * FROM durable_await(:t3, :f3, 'shipped', 'shipped:3');
-- awaiting another queue's event: its emit there wakes the task
SELECT * FROM durable_await(:t3, :f3, 'label', 'label:3', queue => 'labels');
SELECT queue_name, event FROM durable.event_waits WHERE task_id = :t3;
SELECT durable_emit('flow', 'label:3', '"not this one"');
SELECT state FROM durable.live_tasks WHERE task_id = :t3;
SELECT durable_emit('labels', 'label:3', '"printed"');
SELECT fence AS f3 FROM durable_claim('flow', 'w') \gset
SELECT * FROM durable_await(:t3, :f3, 'label', 'label:3', queue => 'labels');
-- a timeout, for ever: the event that comes later changes nothing
SELECT * FROM durable_await(:t3, :f3, 'review', 'review:3', timeout => '1 second');
SELECT pg_sleep(1.2);
SELECT fence AS f3 FROM durable_claim('flow', 'w') \gset
SELECT * FROM durable_await(:t3, :f3, 'review', 'review:3', timeout => '1 second');
SELECT durable_emit('flow', 'review:3', '"late"');
SELECT * FROM durable_await(:t3, :f3, 'review', 'review:3', timeout => '1 second');
SELECT count(*) AS registered FROM durable.event_waits WHERE task_id = :t3;
-- a queue dropped while a task of another queue awaits its event takes the
-- await with it: a new queue of that name wakes nobody, and the wait
-- times out as any other
SELECT durable_create_queue('waits_gone');
SELECT * FROM durable_await(:t3, :f3, 'gone', 'g:1', timeout => '1 second', queue => 'waits_gone');
SELECT durable_drop_queue('waits_gone');
SELECT count(*) AS registered FROM durable.event_waits WHERE task_id = :t3;
SELECT durable_create_queue('waits_gone');
SELECT durable_emit('waits_gone', 'g:1');
SELECT durable_drop_queue('waits_gone');
SELECT state, waits -> 'gone' ->> 'status' AS wait FROM durable.live_tasks WHERE task_id = :t3;
SELECT pg_sleep(1.2);
SELECT fence AS f3 FROM durable_claim('flow', 'w') \gset
SELECT * FROM durable_await(:t3, :f3, 'gone', 'g:1', timeout => '1 second', queue => 'waits_gone');
SELECT * FROM durable_await(:t3, :f3, 'x', NULL);
SELECT * FROM durable_await(:t3, :f3, 'x', 'e', timeout => '0 seconds');
SELECT durable_commit(:t3, :f3, '{}');
SELECT kind, detail - 'until' AS detail FROM durable.events WHERE task_id = :t3 ORDER BY seq;

-- events go with durable.retention: emitted ones, and awaited ones that
-- nobody awaits any more; a recent one stays
SELECT durable_emit('flow', 'old:1', '{"v": 1}');
INSERT INTO durable.emitted_events (partition_key, queue_name, event, created_at)
VALUES (1, 'flow', 'lonely', now() - interval '8 days');
UPDATE durable.emitted_events SET emitted_at = now() - interval '8 days',
       created_at = now() - interval '8 days' WHERE event IN ('old:1');
DO $$ BEGIN PERFORM durable_reconcile(); END $$;  -- the tick runs; what it retained is read below
SELECT event FROM durable.emitted_events WHERE event IN ('old:1', 'lonely', 'review:3') ORDER BY event;
-- Children
SELECT durable_enqueue('flow', '{"order": 4}') AS t4 \gset
SELECT fence AS f4 FROM durable_claim('flow', 'w') \gset
SELECT * FROM durable_join(:t4, :f4, 'none');
SELECT durable_spawn(:t4, :f4, 'label-a', 'labels', '{"box": "a"}') AS ca \gset
SELECT durable_spawn(:t4, :f4, 'label-b', 'labels', '{"box": "b"}') AS cb \gset
SELECT durable_spawn(:t4, :f4, 'label-a', 'labels', '{"box": "a"}') = :ca AS same_child;
SELECT durable_spawn(:t4, :f4, 'label-a', 'labels', '{"box": "z"}');
SELECT durable_spawn(:t4, :f4, 'label-c', 'nowhere', '{}');
SELECT parent_id = :t4 AS records_parent FROM durable.live_tasks WHERE task_id = :ca;
SELECT * FROM durable_join(:t4, :f4, 'labels', ARRAY['label-a', 'label-x']);
SELECT * FROM durable_join(:t4, :f4, 'labels', timeout => '1 day');
SELECT state FROM durable.live_tasks WHERE task_id = :t4;
-- the first child to finish does not wake the parent, the last one does
SELECT fence AS fa FROM durable_claim('labels', 'l') \gset
SELECT durable_commit(:ca, :fa, '{"label": "A-1"}');
SELECT state, run_at > now() AS still_waiting FROM durable.live_tasks WHERE task_id = :t4;
SELECT fence AS fb FROM durable_claim('labels', 'l') \gset
SELECT durable_fail(:cb, :fb, 'permanent', '{"reason": "no such address"}');
SELECT state, run_at <= now() AS woken FROM durable.live_tasks WHERE task_id = :t4;
SELECT fence AS f4 FROM durable_claim('flow', 'w') \gset
SELECT status, jsonb_path_query_array(children, '$[*].name') AS names,
       jsonb_path_query_array(children, '$[*].state') AS states,
       children -> 0 -> 'result' AS first_result, children -> 1 -> 'error' AS second_error
FROM durable_join(:t4, :f4, 'labels', timeout => '1 day');
SELECT status FROM durable_join(:t4, :f4, 'labels', timeout => '2 days');
SELECT status, jsonb_array_length(children) FROM durable_join(:t4, :f4, 'just-a', ARRAY['label-a']);
-- a join that times out: the children as they were, for ever
SELECT durable_spawn(:t4, :f4, 'slow', 'labels', '{"box": "slow"}') AS cs \gset
SELECT status FROM durable_join(:t4, :f4, 'late', ARRAY['slow'], timeout => '1 second');
SELECT pg_sleep(1.2);
SELECT fence AS f4 FROM durable_claim('flow', 'w') \gset
SELECT status, children -> 0 ->> 'state' AS slow FROM durable_join(:t4, :f4, 'late', ARRAY['slow'], timeout => '1 second');
SELECT fence AS fcs FROM durable_claim('labels', 'l') WHERE task_id = :cs \gset
SELECT durable_commit(:cs, :fcs, '{}');
SELECT status, children -> 0 ->> 'state' AS slow FROM durable_join(:t4, :f4, 'late', ARRAY['slow'], timeout => '1 second');
SELECT durable_commit(:t4, :f4, '{}');
-- a child that retention has removed had finished: the join is done
SELECT durable_enqueue('flow', '{"order": 7}') AS t7 \gset
SELECT fence AS f7 FROM durable_claim('flow', 'w') \gset
SELECT durable_spawn(:t7, :f7, 'old', 'labels', '{"box": "old"}') AS c7 \gset
SELECT fence AS fc7 FROM durable_claim('labels', 'l') WHERE task_id = :c7 \gset
SELECT durable_commit(:c7, :fc7, '{}');
DELETE FROM durable.event_log WHERE task_id = :c7;   -- as retention removes a day
DELETE FROM durable.task_history WHERE task_id = :c7;
SELECT status, children -> 0 -> 'state' AS state FROM durable_join(:t7, :f7, 'old-one');
SELECT durable_commit(:t7, :f7, '{}');
-- cancelling a parent cancels its unfinished children, and theirs
SELECT durable_enqueue('flow', '{"order": 5}') AS t5 \gset
SELECT fence AS f5 FROM durable_claim('flow', 'w') \gset
SELECT durable_spawn(:t5, :f5, 'kid', 'flow', '{"kid": 1}') AS c5 \gset
SELECT durable_spawn(:t5, :f5, 'done-kid', 'labels', '{"kid": 2}') AS d5 \gset
SELECT fence AS fd5 FROM durable_claim('labels', 'l') \gset
SELECT durable_commit(:d5, :fd5, '{}');
SELECT task_id = :c5 AS kid_claimed, fence AS fc5 FROM durable_claim('flow', 'w') \gset
SELECT :'kid_claimed';
SELECT durable_spawn(:c5, :fc5, 'grandkid', 'labels', '{"kid": 3}') AS g5 \gset
SELECT durable_cancel(:t5, 'order withdrawn');
SELECT task_id = :c5 AS kid, task_id = :g5 AS grandkid, state, stop_code
FROM durable.tasks WHERE task_id IN (:t5, :c5, :g5, :d5) ORDER BY task_id;
SELECT durable_commit(:c5, :fc5, '{}');
-- a task cancelled while it awaits an event leaves no registration behind
SELECT durable_enqueue('flow', '{"order": 6}') AS t6 \gset
SELECT fence AS f6 FROM durable_claim('flow', 'w') \gset
SELECT status FROM durable_await(:t6, :f6, 'never', 'never:6');
SELECT count(*) AS registered FROM durable.event_waits WHERE task_id = :t6;
SELECT durable_cancel(:t6, 'gave up');
SELECT count(*) AS registered FROM durable.event_waits WHERE task_id = :t6;
SELECT durable_emit('flow', 'never:6');
SELECT state FROM durable.tasks WHERE task_id = :t6;
SELECT * FROM durable_verify();

-- Batch enqueue
SELECT count(*) AS before FROM durable.live_tasks WHERE queue_name = 'labels' \gset
SELECT array_length(durable_enqueue_batch('labels', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[]), 1);
SELECT ids[1] = ids[3] AS repeated_key_same_task, ids[1] <> ids[2] AS others_new
FROM durable_enqueue_batch('labels', ARRAY['{"n": 4}', '{"n": 5}', '{"n": 4}']::jsonb[],
                           ARRAY['k-4', NULL, 'k-4']) ids;
SELECT durable_enqueue_batch('labels', ARRAY['{"n": 4}']::jsonb[], ARRAY['k-4'])
     = ARRAY[durable_enqueue('labels', '{"n": 4}', idempotency_key => 'k-4')];
-- all or nothing
SELECT count(*) AS mid FROM durable.live_tasks WHERE queue_name = 'labels' \gset
SELECT durable_enqueue_batch('labels', ARRAY['{"n": 6}', '{"n": 7}']::jsonb[], ARRAY['k-6', 'k-4']);
SELECT durable_enqueue_batch('labels', ARRAY['{"n": 6}', NULL]::jsonb[]);
SELECT durable_enqueue_batch('labels', ARRAY['{"n": 6}']::jsonb[], ARRAY['a', 'b']);
SELECT durable_enqueue_batch('labels', ARRAY['{"n": 6}']::jsonb[], ARRAY['']);
SELECT durable_enqueue_batch('nowhere', ARRAY['{"n": 6}']::jsonb[]);
SELECT durable_enqueue_batch('labels', NULL);
SELECT durable_enqueue_batch('labels', '{}');
SELECT count(*) - :mid AS added_by_failures, :mid - :before AS added FROM durable.live_tasks WHERE queue_name = 'labels';
SELECT count(*) AS enqueue_events FROM durable.events e JOIN durable.live_tasks t USING (partition_key, task_id)
WHERE t.queue_name = 'labels' AND e.kind = 'enqueued';

-- Concurrency keys
SELECT durable_create_queue('sync', concurrency_limit => 1);
SELECT durable_enqueue('sync', '{"n": 1}', concurrency_key => 'customer-1') AS s1 \gset
SELECT durable_enqueue('sync', '{"n": 2}', concurrency_key => 'customer-1') AS s2 \gset
SELECT durable_enqueue('sync', '{"n": 3}', concurrency_key => 'customer-2') AS s3 \gset
SELECT durable_enqueue('sync', '{"n": 4}') AS s4 \gset
SELECT array_agg(task_id ORDER BY task_id) = ARRAY[:s1, :s3, :s4]::bigint[] AS one_per_key
FROM durable_claim('sync', 'w', batch => 10);
SELECT count(*) AS nothing_more FROM durable_claim('sync', 'w', batch => 10);
SELECT durable_commit(:s1, (SELECT fence FROM durable.live_tasks WHERE task_id = :s1));
SELECT task_id = :s2 AS next_of_key FROM durable_claim('sync', 'w', batch => 10);
SELECT durable_alter_queue('sync', concurrency_limit => 2);
SELECT durable_enqueue('sync', '{"n": 5}', concurrency_key => 'customer-2') AS s5 \gset
SELECT task_id = :s5 AS second_slot FROM durable_claim('sync', 'w', batch => 10);
SELECT durable_alter_queue('sync', clear => ARRAY['concurrency_limit']);
SELECT concurrency_limit FROM durable.queues WHERE queue_name = 'sync';
-- a task lives in its concurrency key's partition, also with an
-- idempotency key, whose binding stays in the key's own partition: the key
-- still finds its task, and another payload under it is still 55U03
SELECT durable_create_queue('both', partitions => 8);
SELECT durable_enqueue('both', '{"n": 1}', idempotency_key => 'order-1',
                       concurrency_key => 'customer-1') AS b1 \gset
SELECT durable_enqueue('both', '{"n": 2}', concurrency_key => 'customer-1') AS b2 \gset
SELECT (:b1 & 32767) = (:b2 & 32767) AS one_partition_per_key,
       (SELECT partition_key FROM durable.task_keys WHERE idempotency_key = 'order-1')
       <> (:b1 & 32767) AS key_bound_elsewhere;
SELECT durable_enqueue('both', '{"n": 1}', idempotency_key => 'order-1',
                       concurrency_key => 'customer-2') = :b1 AS same_task;
\set VERBOSITY terse
SELECT durable_enqueue('both', '{"n": 9}', idempotency_key => 'order-1');
\set VERBOSITY default
SELECT (durable_enqueue_batch('both', ARRAY['{"n": 1}', '{"n": 3}']::jsonb[],
                              ARRAY['order-1', 'order-3'],
                              concurrency_keys => ARRAY['customer-7', 'customer-1'])) AS batch \gset
SELECT (:'batch'::bigint[])[1] = :b1 AS batch_same_task,
       ((:'batch'::bigint[])[2] & 32767) = (:b2 & 32767) AS batch_one_partition_per_key;
\set VERBOSITY terse
SELECT durable_enqueue_batch('both', ARRAY['{"n": 4}']::jsonb[], ARRAY['order-3']);
\set VERBOSITY default
SELECT count(*) AS tasks, count(DISTINCT partition_key) AS partitions
FROM durable.live_tasks WHERE queue_name = 'both';
-- retention keeps the binding of a live task's key, however old, though
-- the task lives in another partition than the binding
SELECT now() - interval '400 days' AS long_ago \gset
UPDATE durable.task_keys SET created_at = :'long_ago'
WHERE queue_name = 'both' AND idempotency_key = 'order-1';
SELECT count(*) AS failed_parts
FROM durable.maintain_history(now(), interval '365 days', 1000) WHERE action = 'failed';
SELECT count(*) AS still_bound FROM durable.task_keys
WHERE queue_name = 'both' AND idempotency_key = 'order-1';
SELECT durable_enqueue('both', '{"n": 1}', idempotency_key => 'order-1') = :b1 AS same_task_still;
SELECT durable_create_queue('bad', concurrency_limit => 0);
SELECT durable_enqueue('sync', '{}', concurrency_key => '');

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'bad,both,flow,waits_gone,labels,sync'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
