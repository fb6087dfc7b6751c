--
-- No single row, setting or partition stops the tick (docs/design.md section 7).
-- Each part of a tick runs in a subtransaction of its own: one that fails
-- is skipped for that tick, said once (a WARNING when it starts failing),
-- and shown in durable.status (a schedule's also in schedule_list), while
-- every other part goes on: expired leases are settled whatever fails.
--
-- Every claim here is begun by its worker (durable_begin), so that a lease
-- that runs out is judged by the recovery table; an unbegun one would go
-- back for nothing (begin.sql).
SET TimeZone = 'UTC';
SELECT setval('durable.task_seq', 14000) AS first_id_counter;
CREATE FUNCTION pg_temp.failing()
RETURNS TABLE (part text, sqlstate text, failures bigint) LANGUAGE sql AS $$
    SELECT f->>'part', f->>'sqlstate', (f->>'failures')::bigint
    FROM durable.status, jsonb_array_elements(failures) f ORDER BY 1
$$;
SELECT failing_parts, failing_since IS NULL AS none_since FROM durable.status;

-- an expired lease in each of two queues (two partitions)
SELECT durable_create_queue('iso_a', lease => '1 hour', max_attempts => 5);
-- (retries wait an hour: none comes due while the file runs, so each claim
-- takes the task just enqueued, however slow the server)
SELECT durable_create_queue('iso_b', lease => '1 hour', max_attempts => 5,
                            retry_base => 3600, retry_cap => 3600);
SELECT durable_enqueue('iso_a', '{}') AS ta \gset
SELECT durable_enqueue('iso_b', '{}') AS tb \gset
SELECT fence AS fa FROM durable_claim('iso_a', 'w') c, durable_begin(c.task_id, c.fence) b \gset
SELECT fence AS fb FROM durable_claim('iso_b', 'w') c, durable_begin(c.task_id, c.fence) b \gset
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s' WHERE task_id IN (:ta, :tb);

-- a row that cannot be settled: its partition's part fails, the other
-- partition's lease is settled all the same
ALTER TABLE durable.live_tasks ADD CONSTRAINT poison CHECK (task_id <> :ta OR fence = :fa);
SELECT task_id = :tb AS is_tb, action FROM durable_reconcile() WHERE task_id IN (:ta, :tb);
SELECT task_id = :ta AS is_ta, state, fence FROM durable.tasks WHERE task_id IN (:ta, :tb) ORDER BY task_id;
SELECT * FROM pg_temp.failing();
-- said once: the next tick fails the part again quietly, and counts it
SELECT count(*) AS settled FROM durable_reconcile() WHERE task_id IN (:ta, :tb);
SELECT * FROM pg_temp.failing();
-- the row mended, the part runs again and leaves durable.status
ALTER TABLE durable.live_tasks DROP CONSTRAINT poison;
SELECT task_id = :ta AS is_ta, action FROM durable_reconcile() WHERE task_id IN (:ta, :tb);
SELECT failing_parts FROM durable.status;

-- a day of history that cannot be dropped (a view holds it): that day is
-- skipped and shown; the lease expired meanwhile is settled, and history
-- still removes what else is due
SELECT durable_enqueue('iso_a', '{}') AS tc \gset
SELECT fence AS fc FROM durable_claim('iso_a', 'w') c, durable_begin(c.task_id, c.fence) b \gset
SELECT durable_commit(:tc, :fc);
CREATE TABLE durable.task_history_p20000101
    (LIKE durable.task_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE durable.task_history ATTACH PARTITION durable.task_history_p20000101
    FOR VALUES FROM ('2000-01-01 00:00:00+00') TO ('2000-01-02 00:00:00+00');
CREATE TABLE durable.task_history_p20000102
    (LIKE durable.task_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE durable.task_history ATTACH PARTITION durable.task_history_p20000102
    FOR VALUES FROM ('2000-01-02 00:00:00+00') TO ('2000-01-03 00:00:00+00');
CREATE VIEW public.holds_a_day AS SELECT * FROM durable.task_history_p20000101;
SELECT durable_enqueue('iso_b', '{}') AS td \gset
SELECT fence AS fd FROM durable_claim('iso_b', 'w') c, durable_begin(c.task_id, c.fence) b \gset
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s' WHERE task_id = :td;
SET durable.retention = '30d';
SELECT task_id = :td AS is_td, action FROM durable_reconcile()
WHERE task_id = :td OR action LIKE 'removed durable.task_history_p2000%' ORDER BY 2;
SELECT * FROM pg_temp.failing();
SELECT count(*) AS days_of_2000 FROM pg_class WHERE relname LIKE 'task_history_p2000%';
DROP VIEW public.holds_a_day;
SELECT action FROM durable_reconcile() WHERE action LIKE 'removed durable.task_history_p2000%';
SELECT failing_parts FROM durable.status;
RESET durable.retention;

-- schedules: one whose payload is over a lowered size limit, one whose
-- occurrence key another request took; each is skipped with its error,
-- the other schedules and the leases go on
-- (yearly, due since this New Year: the occurrence due stays the same
-- whatever the minute the test runs in)
SELECT durable_schedule('iso_big', '0 0 1 1 *', 'iso_a', jsonb_build_object('blob', repeat('x', 2000))) IS NOT NULL AS big;
SELECT durable_schedule('iso_taken', '0 0 1 1 *', 'iso_a', '{"n": 1}') IS NOT NULL AS taken;
SELECT durable_schedule('iso_fine', '0 0 1 1 *', 'iso_b', '{"n": 2}') IS NOT NULL AS fine;
SELECT durable_schedule('iso_gone', '0 0 1 1 *', 'iso_b', '{"n": 4}') IS NOT NULL AS gone;
UPDATE durable.schedules SET next_run = date_trunc('year', now(), 'UTC')
WHERE schedule_name LIKE 'iso_%';
-- the keys of iso_taken's and iso_gone's occurrence, taken by other requests
SELECT durable_enqueue(q, '{"someone": "else"}',
                       idempotency_key => 'schedule:' || s || ':' ||
                           extract(epoch FROM date_trunc('year', now(), 'UTC'))::bigint) IS NOT NULL AS key_taken
FROM (VALUES ('iso_a', 'iso_taken'), ('iso_b', 'iso_gone')) v(q, s);
SELECT durable_create_queue('iso_c', lease => '1 hour');
SELECT durable_enqueue('iso_c', '{}') AS te \gset
SELECT fence AS fe FROM durable_claim('iso_c', 'w') c, durable_begin(c.task_id, c.fence) b \gset
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s' WHERE task_id = :te;
SET durable.max_payload_size = '1kB';
SET client_min_messages = error;	-- the key's time varies
SELECT task_id = :te AS is_te, action, count(*) FROM durable_reconcile()
WHERE task_id = :te OR action = 'scheduled' GROUP BY 1, 2 ORDER BY 1, 2;
RESET client_min_messages;
RESET durable.max_payload_size;
SELECT schedule_name, regexp_replace(last_error, '[0-9]{6,}', 'N') AS error,
       last_error_at > now() - interval '1 minute' AS since_tick, next_run > now() AS moved_on,
       last_task_id IS NOT NULL AS enqueued
FROM durable.schedule_list WHERE schedule_name LIKE 'iso_%' ORDER BY 1;
SELECT * FROM pg_temp.failing();
-- a schedule removed takes its failure with it
SELECT durable_unschedule('iso_gone');
SELECT * FROM pg_temp.failing();
-- the next occurrence enqueues again: the error goes
UPDATE durable.schedules SET next_run = now() WHERE schedule_name LIKE 'iso_%';
SELECT count(*) AS scheduled FROM durable_reconcile() WHERE action = 'scheduled';
SELECT schedule_name, last_error, last_error_at FROM durable.schedule_list
WHERE schedule_name LIKE 'iso_%' ORDER BY 1;
SELECT failing_parts FROM durable.status;

-- a schedule replaced in a transaction that began before an occurrence
-- the reconciler enqueued: it runs on from that last run, never again
-- over it (its key would be taken by another request for ever)
UPDATE durable.schedules SET last_run = '2999-01-01 00:00:00+00' WHERE schedule_name = 'iso_fine';
SELECT durable_schedule('iso_fine', '* * * * *', 'iso_b', '{"n": 3}') AS next_run;

-- a schedule far behind, without backfill: the latest occurrence missed
-- only, found from now backwards (a walk forward from the year 1000 would
-- take minutes, in one tick)
SELECT durable_unschedule(s) FROM unnest(ARRAY['iso_big', 'iso_taken', 'iso_fine']) s;
SELECT durable_schedule('iso_weekly', '0 3 * * 1', 'iso_b', '{}', 'America/New_York') IS NOT NULL AS weekly;
SELECT durable_schedule('iso_minutely', '* * * * *', 'iso_b', '{}') IS NOT NULL AS minutely;
UPDATE durable.schedules SET next_run = '1000-01-06 08:00:00+00'
WHERE schedule_name IN ('iso_weekly', 'iso_minutely');
SET statement_timeout = '60s';
SELECT count(*) AS scheduled FROM durable_reconcile() WHERE action = 'scheduled';
RESET statement_timeout;
SELECT (t.metadata->>'occurrence')::timestamptz = date_trunc('minute', now()) AS latest,
       s.next_run = date_trunc('minute', now()) + interval '1 minute' AS next
FROM durable.schedule_list s JOIN durable.tasks t ON t.task_id = s.last_task_id
WHERE s.schedule_name = 'iso_minutely';
SELECT durable_unschedule('iso_minutely');
SELECT (t.metadata->>'occurrence')::timestamptz
           = durable_cron_next('0 3 * * 1', now() - interval '7 days', 'America/New_York') AS latest,
       s.next_run = durable_cron_next('0 3 * * 1', now(), 'America/New_York') AS next
FROM durable.schedule_list s JOIN durable.tasks t ON t.task_id = s.last_task_id
WHERE s.schedule_name = 'iso_weekly';
SELECT durable_unschedule('iso_weekly');

-- a queue whose retry tokens cannot be taken (a deficit past the
-- timestamp range): that queue's part fails, its retry starts at its own
-- delay, and the lease of the other queue is settled
SELECT durable_create_queue('iso_deep', lease => '1 hour', retry_capacity => 1,
                            retry_refill_rate => 0.000001, retry_base => 1, retry_cap => 1);
SELECT durable_enqueue('iso_deep', '{}', class => 'idempotent') AS tf \gset
SELECT fence AS ff FROM durable_claim('iso_deep', 'w') c, durable_begin(c.task_id, c.fence) b \gset
SELECT durable_enqueue('iso_b', '{}') AS tg \gset
SELECT fence AS fg FROM durable_claim('iso_b', 'w') c, durable_begin(c.task_id, c.fence) b \gset
UPDATE durable.queues SET retry_tokens = -1e13 WHERE queue_name = 'iso_deep';
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s' WHERE task_id IN (:tf, :tg);
SET client_min_messages = error;	-- the warning names the task
SELECT task_id = :tf AS is_tf, action FROM durable_reconcile() WHERE task_id IN (:tf, :tg) ORDER BY 1;
RESET client_min_messages;
SELECT task_id = :tf AS is_tf, state, run_at < now() + interval '1 minute' AS own_delay
FROM durable.tasks WHERE task_id IN (:tf, :tg) ORDER BY 1;
SELECT * FROM pg_temp.failing();
UPDATE durable.queues SET retry_tokens = 1 WHERE queue_name = 'iso_deep';
SELECT count(*) AS ticked FROM durable_reconcile() WHERE task_id = :tf;
-- the part runs again only when it has tokens to take: it is still shown
SELECT * FROM pg_temp.failing();
-- pg_monitor reads how many parts fail and since when, not their errors
SET ROLE pg_monitor;
SELECT failing_parts, failing_since IS NOT NULL AS since FROM durable.status;
SELECT failures FROM durable.status;
RESET ROLE;
-- a queue dropped takes what the tick failed to do for it
SELECT durable_cancel(:tf, 'the queue goes');
SELECT durable_drop_queue('iso_deep');
SELECT * FROM pg_temp.failing();

-- a queue whose progress timeout reaches past the timestamp range: the
-- statement that finds the partitions with work fails, so every partition
-- is looked at on its own, as without it; that queue's partition fails
-- its stuck alarms, and the other queue's expired lease is settled
SELECT durable_create_queue('iso_far', lease => '1 hour', progress_timeout => '1 minute');
SELECT durable_enqueue('iso_far', '{}') AS th \gset
SELECT fence AS fh FROM durable_claim('iso_far', 'w') c, durable_begin(c.task_id, c.fence) b \gset
SELECT durable_enqueue('iso_b', '{}') IS NOT NULL AS enqueued;
SELECT task_id AS ti, fence AS fi FROM durable_claim('iso_b', 'w') c, durable_begin(c.task_id, c.fence) b \gset
UPDATE durable.queues SET progress_timeout = interval '100000000 days' WHERE queue_name = 'iso_far';
UPDATE durable.live_tasks SET lease_until = now() - interval '1 s' WHERE task_id = :ti;
SELECT task_id = :ti AS is_ti, action FROM durable_reconcile() WHERE task_id IN (:th, :ti);
SELECT * FROM pg_temp.failing();
-- mended, both parts run again and leave durable.status
UPDATE durable.queues SET progress_timeout = interval '1 hour' WHERE queue_name = 'iso_far';
SELECT count(*) AS settled FROM durable_reconcile() WHERE task_id IN (:th, :ti);
SELECT * FROM pg_temp.failing();
SELECT durable_cancel(:th, 'done');
SELECT durable_drop_queue('iso_far');

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'iso_a,iso_b,iso_c,iso_deep,iso_far'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
