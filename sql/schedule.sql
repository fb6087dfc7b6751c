-- Cron expressions and schedules (docs/design.md section 12).  durable_cron_next
-- is a pure function: reference vectors, then a model.
SET TimeZone = 'UTC';
SELECT c, durable_cron_next(c, '2026-12-01 13:22:16+00') AS next
FROM unnest(ARRAY[
    '* * * * *',            -- every minute
    '30 * * * *',           -- minute field
    '0 9 * * *',            -- hour
    '0 0 1 * *',            -- day of month
    '0 0 1 3 *',            -- month
    '0 0 * * 1',            -- day of week (Monday)
    '0 0 * * 7',            -- 7 is Sunday too
    '*/15 * * * *',         -- steps
    '5/20 * * * *',         -- a/n: from 5 to the end
    '0 8-10/2 * * *',       -- a range with a step
    '0 0 1,15 * *',         -- lists
    '0 12 * JAN,jun mon-fri', -- names, either case
    '0 0 13 * fri',         -- day of month or day of week
    '0 0 29 2 *',           -- a leap day: 2028
    '@hourly', '@daily', '@midnight', '@weekly', '@monthly', '@yearly', '@annually',
    '  1  2  3  4  *  '     -- spaces
]) c;
-- time zones and DST changes (America/New_York: 2026-03-08 02:00 -> 03:00,
-- 2026-11-01 02:00 -> 01:00; Europe/Berlin: 2026-03-29, 2026-10-25)
SELECT c, tz, after, durable_cron_next(c, after::timestamptz, tz) AS next
FROM (VALUES
    ('0 9 * * *', 'Europe/Berlin', '2026-12-01 13:22:16+00'),
    ('0 9 * * *', 'Asia/Kolkata', '2026-12-01 13:22:16+00'),
    ('0 9 * * *', 'America/New_York', '2026-07-01 00:00:00+00'),
    ('30 2 * * *', 'America/New_York', '2026-03-08 06:00:00+00'),   -- 02:30 is skipped: 03:30 EDT
    ('*/30 * * * *', 'America/New_York', '2026-03-08 06:45:00+00'),
    ('30 1 * * *', 'America/New_York', '2026-11-01 04:00:00+00'),   -- 01:30 twice: once
    ('30 1 * * *', 'America/New_York', '2026-11-01 06:30:00+00'),
    ('0 * * * *', 'America/New_York', '2026-11-01 04:30:00+00'),
    ('0 * * * *', 'America/New_York', '2026-11-01 05:30:00+00'),
    ('0 3 * * *', 'Europe/Berlin', '2026-03-28 12:00:00+00'),
    ('0 2 * * *', 'Europe/Berlin', '2026-10-24 12:00:00+00'),
    ('0 0 * * *', 'UTC', '2026-12-31 23:59:59+00')
) v(c, tz, after);
-- the next after an occurrence is the one after it
SELECT durable_cron_next('0 9 * * *', durable_cron_next('0 9 * * *', '2026-12-01 13:22:16+00', 'Europe/Berlin'), 'Europe/Berlin');
-- bad expressions, each with a clear error
SELECT durable_cron_next(c, now()) FROM unnest(ARRAY['']) c;
SELECT durable_cron_next('* * * *', now());
SELECT durable_cron_next('* * * * * *', now());
SELECT durable_cron_next('60 * * * *', now());
SELECT durable_cron_next('* 24 * * *', now());
SELECT durable_cron_next('* * 0 * *', now());
SELECT durable_cron_next('* * * 13 *', now());
SELECT durable_cron_next('* * * * 8', now());
SELECT durable_cron_next('5-1 * * * *', now());
SELECT durable_cron_next('*/0 * * * *', now());
SELECT durable_cron_next('*/ * * * *', now());
SELECT durable_cron_next('1,,2 * * * *', now());
SELECT durable_cron_next('* * * foo *', now());
SELECT durable_cron_next('* * * * mon-', now());
SELECT durable_cron_next('100 * * * *', now());
SELECT durable_cron_next('0 0 30 2 *', now());
SELECT durable_cron_next('0 0 31 4,6 *', now());
SELECT durable_cron_next('@often', now());
SELECT durable_cron_next('@daily 1', now());
SELECT durable_cron_next('0 0 * * *', now(), 'Mars/Olympus');
SELECT durable_cron_next(NULL, now());
SELECT durable_cron_next('* * * * *', NULL);
SELECT durable_cron_next('* * * * *', now(), NULL);
SELECT durable_cron_next('* * * * *', 'infinity');

-- The model: the first local minute after "after" whose fields match,
-- read in the zone, found by walking every minute.  Random expressions
-- from parts whose sets the model knows, random times near DST changes.
SELECT setseed(0.14);
CREATE FUNCTION pg_temp.field_set(part text, lo int, hi int) RETURNS int[] LANGUAGE sql AS $$
    SELECT CASE
        WHEN part = '*' THEN array(SELECT generate_series(lo, hi))
        WHEN part LIKE '*/%' THEN array(SELECT generate_series(lo, hi, split_part(part, '/', 2)::int))
        WHEN part LIKE '%-%/%' THEN array(SELECT generate_series(split_part(part, '-', 1)::int,
                                        split_part(split_part(part, '-', 2), '/', 1)::int, split_part(part, '/', 2)::int))
        WHEN part = 'mon-fri' THEN ARRAY[1, 2, 3, 4, 5]
        WHEN part = 'sat,sun' THEN ARRAY[6, 0]
        WHEN part LIKE '%-%' THEN array(SELECT generate_series(split_part(part, '-', 1)::int, split_part(part, '-', 2)::int))
        ELSE string_to_array(part, ',')::int[]
    END
$$;
CREATE TEMP TABLE cases AS
WITH parts AS (
    SELECT n,
           (ARRAY['*', '*/7', '5', '10-40/10', '0,30,59'])[1 + floor(random() * 5)::int] AS mi,
           (ARRAY['*', '*/5', '2', '1-3', '0,12,23'])[1 + floor(random() * 5)::int] AS h,
           (ARRAY['*', '*', '1,15', '10-20', '31'])[1 + floor(random() * 5)::int] AS dom,
           (ARRAY['*', '*', 'mon-fri', '0', 'sat,sun'])[1 + floor(random() * 5)::int] AS dow,
           (ARRAY['UTC', 'America/New_York', 'Europe/Berlin', 'Australia/Lord_Howe', 'Asia/Kolkata'])[1 + floor(random() * 5)::int] AS tz,
           (ARRAY['2026-03-08 06:00+00', '2026-11-01 05:00+00', '2026-03-28 23:00+00',
                  '2026-10-25 00:00+00', '2026-04-04 14:00+00', '2026-12-31 22:00+00'])[1 + floor(random() * 6)::int]::timestamptz
             + make_interval(mins => floor(random() * 600)::int) AS after
    FROM generate_series(1, 50) n
)
SELECT n, format('%s %s %s * %s', mi, h, dom, dow) AS cron, tz, after,
       pg_temp.field_set(mi, 0, 59) AS minutes, pg_temp.field_set(h, 0, 23) AS hours,
       CASE WHEN dom = '*' THEN NULL ELSE pg_temp.field_set(dom, 1, 31) END AS days,
       CASE WHEN dow = '*' THEN NULL ELSE pg_temp.field_set(dow, 0, 6) END AS weekdays
FROM parts;
SELECT count(*) AS cases,
       count(*) FILTER (WHERE model IS NOT DISTINCT FROM durable_cron_next(cron, after, tz)) AS agree
FROM (
    SELECT c.*, (
        SELECT min(m) AT TIME ZONE c.tz
        FROM generate_series(date_trunc('minute', c.after AT TIME ZONE c.tz) + interval '1 minute',
                             date_trunc('minute', c.after AT TIME ZONE c.tz) + interval '62 days',
                             interval '1 minute') m
        WHERE extract(minute FROM m)::int = ANY (c.minutes)
          AND extract(hour FROM m)::int = ANY (c.hours)
          AND CASE WHEN c.days IS NULL AND c.weekdays IS NULL THEN true
                   WHEN c.days IS NULL THEN extract(dow FROM m)::int = ANY (c.weekdays)
                   WHEN c.weekdays IS NULL THEN extract(day FROM m)::int = ANY (c.days)
                   ELSE extract(dow FROM m)::int = ANY (c.weekdays)
                     OR extract(day FROM m)::int = ANY (c.days) END
          AND (m AT TIME ZONE c.tz) > c.after) AS model
    FROM cases c) x;

-- Schedules
SELECT durable_create_queue('nightly');
SELECT durable_schedule('export', '0 3 * * *', 'nightly', '{"job": "export"}', 'Europe/Berlin')
     = durable_cron_next('0 3 * * *', now(), 'Europe/Berlin') AS next_run;
SELECT schedule_name, cron, timezone, queue_name, payload, backfill, last_run
FROM durable.schedule_list WHERE queue_name = 'nightly';
SELECT durable_schedule('export', '0 4 * * *', 'nightly', '{"job": "export"}', 'Europe/Berlin')
     = durable_cron_next('0 4 * * *', now(), 'Europe/Berlin') AS replaced;
SELECT count(*) FROM durable.schedules WHERE queue_name = 'nightly';
-- not due: nothing
SELECT count(*) AS scheduled FROM durable_reconcile() WHERE action = 'scheduled';
-- after three days of downtime only the latest occurrence missed is enqueued
UPDATE durable.schedules SET next_run = durable_cron_next(cron, now() - interval '3 days', timezone);
SELECT count(*) AS scheduled FROM durable_reconcile() WHERE action = 'scheduled';
SELECT last_run = (SELECT max(o) FROM generate_series(0, 3) d,
                   LATERAL durable_cron_next('0 4 * * *', now() - make_interval(days => d + 1), 'Europe/Berlin') o
                   WHERE o <= now()) AS latest_missed,
       next_run > now() AS moved_on
FROM durable.schedules WHERE queue_name = 'nightly';
SELECT payload, metadata ->> 'schedule' AS schedule, idempotency_key LIKE 'schedule:export:%' AS keyed
FROM durable.tasks WHERE queue_name = 'nightly';
SELECT count(*) AS scheduled FROM durable_reconcile() WHERE action = 'scheduled';
-- with backfill, every occurrence missed
SELECT durable_schedule('hourly', '0 * * * *', 'nightly', backfill => true) > now();
UPDATE durable.schedules SET next_run = date_trunc('hour', now()) - interval '4 hours' WHERE schedule_name = 'hourly';
SELECT count(*) AS scheduled FROM durable_reconcile() WHERE action = 'scheduled';
SELECT count(DISTINCT idempotency_key) AS occurrences FROM durable.tasks WHERE metadata ->> 'schedule' = 'hourly';
-- an occurrence enqueued again (a schedule set back) is the same task
UPDATE durable.schedules SET next_run = date_trunc('hour', now()) - interval '4 hours' WHERE schedule_name = 'hourly';
SELECT count(*) AS reported FROM durable_reconcile() WHERE action = 'scheduled';
SELECT count(*) AS still FROM durable.tasks WHERE metadata ->> 'schedule' = 'hourly';
-- paused, a schedule enqueues nothing, however late; run now, it enqueues
-- an occurrence apart from its expression, paused or not; resumed, it runs
-- on from its next occurrence after now, none of those it missed (one
-- transaction: no occurrence falls between the resume and the tick)
SELECT count(*) AS before_pause FROM durable.tasks WHERE metadata ->> 'schedule' = 'hourly' \gset
SELECT durable_pause_schedule('hourly'), durable_pause_schedule('hourly') AS again;
SELECT paused_at IS NOT NULL AS paused FROM durable.schedule_list WHERE schedule_name = 'hourly';
UPDATE durable.schedules SET next_run = date_trunc('hour', now()) - interval '4 hours' WHERE schedule_name = 'hourly';
SELECT count(*) FILTER (WHERE action = 'scheduled') AS while_paused FROM durable_reconcile();
SELECT count(*) - :before_pause AS enqueued_while_paused FROM durable.tasks WHERE metadata ->> 'schedule' = 'hourly';
SELECT durable_trigger_schedule('hourly') AS t_now \gset
SELECT idempotency_key LIKE 'schedule:hourly:now:%' AS keyed, metadata ->> 'triggered_by' = current_user AS by_caller,
       payload, state FROM durable.tasks WHERE task_id = :t_now;
BEGIN;
SELECT durable_resume_schedule('hourly') = durable_cron_next('0 * * * *', now(), 'UTC') AS resumed_at_next;
SELECT durable_resume_schedule('hourly') = durable_cron_next('0 * * * *', now(), 'UTC') AS again;
SELECT paused_at IS NULL AS running, next_run > now() AS ahead FROM durable.schedule_list WHERE schedule_name = 'hourly';
SELECT count(*) FILTER (WHERE action = 'scheduled') AS missed_not_enqueued FROM durable_reconcile();
COMMIT;
-- a schedule whose expression cannot fire (changed by hand) is not
-- resumed (22023), and stays paused
SELECT durable_schedule('never', '0 4 * * *', 'nightly') > now() AS made;
SELECT durable_pause_schedule('never');
UPDATE durable.schedules SET cron = '0 0 31 2 *' WHERE schedule_name = 'never';
SELECT durable_resume_schedule('never');
SELECT paused_at IS NOT NULL AS still_paused FROM durable.schedule_list WHERE schedule_name = 'never';
SELECT durable_unschedule('never');
SELECT durable_pause_schedule('nowhere');
SELECT durable_trigger_schedule('nowhere');
SELECT durable_resume_schedule(NULL);
SELECT durable_unschedule('hourly'), durable_unschedule('hourly');
SELECT durable_schedule('bad', 'nope', 'nightly');
SELECT durable_schedule('bad', '* * * * *', 'nowhere');
SELECT durable_schedule('bad', '* * * * *', 'nightly', timezone => 'Nowhere/Land');
SELECT durable_schedule(NULL, '* * * * *', 'nightly');
SELECT durable_schedule('bad', '* * * * *', 'nightly', payload => NULL);
SELECT durable_unschedule('export');

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'nightly'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
