-- The queues sampled once a minute by the tick (docs/design.md §7): a row
-- per queue at the start of the minute, taken once whoever ticks again in
-- that minute, and samples older than 48 hours forgotten when the next is
-- taken.  Nothing here depends on where in a minute it runs: a second tick
-- may take the next minute's sample, never a second one of a minute.
SELECT durable_create_queue('samples_a');
SELECT durable_create_queue('samples_b');
SELECT count(durable_enqueue('samples_a', '{}')) FROM generate_series(1, 3);
-- no sample of this minute yet (another test's tick may have taken one
-- before these queues were made), and an old one, from before the 48 hours
DELETE FROM durable.samples;
INSERT INTO durable.samples (at, queue_name, ready, running, waiting, needs_review,
                             oldest_ready_age_seconds)
VALUES (date_trunc('minute', now() - interval '49 hours'), 'samples_a', 7, 0, 0, 0, 0);
SELECT count(*) >= 0 AS ticked FROM durable_reconcile();
SELECT count(*) >= 0 AS ticked_again FROM durable_reconcile();
-- each sample on a minute, no later than now, one per queue and minute
SELECT count(*) AS off_the_minute FROM durable.samples
WHERE at <> date_trunc('minute', at) OR at > now();
SELECT count(*) AS twice FROM (SELECT at, queue_name FROM durable.samples
                               GROUP BY 1, 2 HAVING count(*) > 1) d;
-- the latest sample has every queue, with its counts
SELECT queue_name, ready, running, needs_review
FROM durable.queue_samples
WHERE at = (SELECT max(at) FROM durable.samples) AND queue_name LIKE 'samples\_%'
ORDER BY queue_name;
SELECT count(*) AS older_than_48_hours FROM durable.samples WHERE at < now() - interval '48 hours';
-- a queue operator sees its queues' samples only
CREATE ROLE samples_op IN ROLE durable_queue_operator;
SELECT durable_grant_queue('samples_b', 'durable_producer', 'enqueue');
SET ROLE samples_op;
SELECT DISTINCT queue_name FROM durable.queue_samples WHERE queue_name LIKE 'samples\_%' ORDER BY 1;
RESET ROLE;
DROP ROLE samples_op;
-- a queue dropped takes its samples along: a queue of its name later
-- starts with none
SELECT count(durable_cancel(task_id, 'done')) FROM durable.tasks WHERE queue_name = 'samples_a';
SELECT durable_drop_queue('samples_a', cascade => true);
SELECT durable_drop_queue('samples_b', cascade => true);
SELECT count(*) AS samples_left FROM durable.samples WHERE queue_name LIKE 'samples\_%';
