--
-- Rate limits (docs/flow-control.md): a claim never hands out a task whose
-- limits have no room; it defers it to when its units will fit, names the
-- limit, and goes on to other tasks.  Times are checked against now() in
-- the claim's transaction; the limits are per hour, so that the
-- milliseconds between statements move no unit.
--

-- the SQLSTATE and message of a call's error
CREATE FUNCTION pg_temp.fails(call text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'SELECT ' || call;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- bad definitions: 22023 (22004 for NULL), nothing written
SELECT pg_temp.fails($$durable_set_rate_limit('rl_bad', 0, '1 minute')$$);
SELECT pg_temp.fails($$durable_set_rate_limit('rl_bad', 10, '1 minute', 0)$$);
SELECT pg_temp.fails($$durable_set_rate_limit('rl_bad', 10, '0 seconds')$$);
SELECT pg_temp.fails($$durable_set_rate_limit('rl_bad', 10, '-1 second')$$);
SELECT pg_temp.fails($$durable_set_rate_limit('rl:bad', 10, '1 minute')$$);
SELECT pg_temp.fails($$durable_set_rate_limit('', 10, '1 minute')$$);
SELECT pg_temp.fails($$durable_set_rate_limit(NULL, 10, '1 minute')$$);
SELECT pg_temp.fails($$durable_set_rate_limit('rl_bad', NULL, '1 minute')$$);
SELECT pg_temp.fails($$durable_set_rate_limit('rl_bad', 10, NULL)$$);
SELECT pg_temp.fails($$durable_drop_rate_limit('rl_nowhere')$$);
SELECT count(*) AS defined FROM durable.rate_limit_definitions WHERE limit_name LIKE 'rl\_%';

-- a limit of 2 an hour: two tasks now, the other three deferred one after
-- the other, half an hour apart (the rate), each naming the limit
SELECT durable_create_queue('rl_basic', partitions => 1);
SELECT durable_set_rate_limit('rl_api', 2, '1 hour');
SELECT name, rate, per, burst, keys, room, deferred FROM durable.rate_limits WHERE name = 'rl_api';
SELECT count(durable_enqueue('rl_basic', jsonb_build_object('i', i), rate_limits => '{"rl_api": 1}'))
FROM generate_series(1, 5) i;
SELECT rate_limited FROM durable.queues WHERE queue_name = 'rl_basic';
BEGIN;
SELECT payload FROM durable_claim('rl_basic', 'w', batch => 5) ORDER BY payload;
-- (in minutes: on Citus the claim may run, delegated, on the node of its
-- partition, whose transaction started a moment apart)
SELECT payload, round(extract(epoch FROM run_at - now()) / 60) AS due_in_minutes, rate_limited_by
FROM durable.live_tasks WHERE queue_name = 'rl_basic' AND state = 'ready' ORDER BY run_at;
COMMIT;
SELECT name, keys, room, deferred FROM durable.rate_limits WHERE name = 'rl_api';
SELECT e.detail->>'limit' AS lim, e.detail->>'units' AS units, count(*)
FROM durable.events e JOIN durable.live_tasks t USING (task_id)
WHERE t.queue_name = 'rl_basic' AND e.kind = 'rate_limited' GROUP BY 1, 2;
-- the next claim finds nothing due: the deferred tasks are not scanned
SELECT count(*) FROM durable_claim('rl_basic', 'w', batch => 5);

-- a task without limits is claimed past one whose limit is out of room,
-- in the same call
SELECT durable_create_queue('rl_mixed', partitions => 1);
SELECT durable_set_rate_limit('rl_one', 1, '1 hour');
SELECT count(durable_enqueue('rl_mixed', '{"k": "limited"}', rate_limits => '{"rl_one": 1}'))
FROM generate_series(1, 3);
SELECT durable_enqueue('rl_mixed', '{"k": "free"}', run_at => now()) IS NOT NULL AS enqueued;
SELECT payload->>'k' AS k FROM durable_claim('rl_mixed', 'w', batch => 1);
SELECT payload->>'k' AS k FROM durable_claim('rl_mixed', 'w', batch => 1);
SELECT count(*) AS deferred FROM durable.live_tasks
WHERE queue_name = 'rl_mixed' AND rate_limited_by = 'rl_one' AND run_at > now();

-- prefix:key: one bucket per key, each with the prefix's definition
SELECT durable_create_queue('rl_keys', partitions => 4);
SELECT durable_set_rate_limit('rl_tenant', 1, '1 hour');
SELECT count(durable_enqueue('rl_keys', jsonb_build_object('t', t),
                             rate_limits => jsonb_build_object('rl_tenant:' || t, 1)))
FROM unnest(ARRAY['a', 'a', 'b', 'b', 'c']) t;
SELECT payload->>'t' AS t FROM durable_claim('rl_keys', 'w', batch => 5) ORDER BY 1;
SELECT limit_key FROM durable.rate_limit_buckets WHERE limit_name = 'rl_tenant' ORDER BY 1;
SELECT name, keys, room, deferred FROM durable.rate_limits WHERE name = 'rl_tenant';
-- a key's tasks share a partition (on Citus, its bucket's)
SELECT count(DISTINCT partition_key) AS partitions FROM durable.live_tasks
WHERE queue_name = 'rl_keys' AND rate_limits ? 'rl_tenant:a';

-- several limits: all have room, or none is taken; units count, not tasks
SELECT durable_create_queue('rl_units', partitions => 1);
SELECT durable_set_rate_limit('rl_requests', 10, '1 hour');
SELECT durable_set_rate_limit('rl_tokens', 1000, '1 hour');
SELECT count(durable_enqueue('rl_units', jsonb_build_object('i', i),
                             rate_limits => '{"rl_requests": 1, "rl_tokens": 400}'))
FROM generate_series(1, 3) i;
BEGIN;
SELECT payload FROM durable_claim('rl_units', 'w', batch => 3) ORDER BY payload;
SELECT payload, rate_limited_by, round(extract(epoch FROM run_at - now())) AS due_in_seconds
FROM durable.live_tasks WHERE queue_name = 'rl_units' AND state = 'ready';
COMMIT;
-- the deferred task took no request: 10 - 2 left
SELECT name, room FROM durable.rate_limits WHERE name IN ('rl_requests', 'rl_tokens') ORDER BY 1;
-- zero units take nothing
SELECT durable_enqueue('rl_units', '{"zero": true}', rate_limits => '{"rl_tokens": 0}') IS NOT NULL AS enqueued;
SELECT payload FROM durable_claim('rl_units', 'w');

-- a claim that rolls back gives its units back
SELECT durable_create_queue('rl_rollback', partitions => 1);
SELECT durable_set_rate_limit('rl_once', 1, '1 hour');
SELECT durable_enqueue('rl_rollback', '{"n": 1}', rate_limits => '{"rl_once": 1}') IS NOT NULL AS enqueued;
BEGIN;
SELECT payload FROM durable_claim('rl_rollback', 'w');
ROLLBACK;
SELECT name, room FROM durable.rate_limits WHERE name = 'rl_once';
SELECT payload FROM durable_claim('rl_rollback', 'w');
SELECT name, room FROM durable.rate_limits WHERE name = 'rl_once';

-- replacing a limit keeps what was taken; a larger burst makes room
SELECT durable_enqueue('rl_rollback', '{"n": 2}', rate_limits => '{"rl_once": 1}') IS NOT NULL AS enqueued;
SELECT durable_set_rate_limit('rl_once', 1, '1 hour', 2);
SELECT name, rate, burst, room FROM durable.rate_limits WHERE name = 'rl_once';
SELECT payload FROM durable_claim('rl_rollback', 'w');

-- a dropped limit holds nothing back, and can no longer be named
SELECT durable_create_queue('rl_dropped', partitions => 1);
SELECT durable_set_rate_limit('rl_gone', 1, '1 hour');
SELECT count(durable_enqueue('rl_dropped', '{}', rate_limits => '{"rl_gone": 1}')) FROM generate_series(1, 3);
SELECT durable_drop_rate_limit('rl_gone');
SELECT count(*) AS claimed FROM durable_claim('rl_dropped', 'w', batch => 3);
SELECT count(*) AS buckets FROM durable.rate_limit_buckets WHERE limit_name = 'rl_gone';

-- composed: a fair queue with a concurrency limit; a deferred task waits
-- for its pass again, and a key's running task still counts
SELECT durable_create_queue('rl_composed', partitions => 1, concurrency_limit => 1);
SELECT durable_set_rate_limit('rl_shared', 2, '1 hour');
SELECT count(durable_enqueue('rl_composed', jsonb_build_object('k', k), concurrency_key => k,
                             fairness_key => k, rate_limits => '{"rl_shared": 1}'))
FROM unnest(ARRAY['x', 'x', 'y', 'z']) k;
SELECT payload->>'k' AS k FROM durable_claim('rl_composed', 'w', batch => 4) ORDER BY 1;
SELECT payload->>'k' AS k, state, fair_pass, rate_limited_by
FROM durable.live_tasks WHERE queue_name = 'rl_composed' AND state <> 'running' ORDER BY 1;

-- bad uses at enqueue: 42704 for an unknown limit, 22023 for the rest;
-- nothing written
SELECT durable_create_queue('rl_errors', partitions => 1);
SELECT pg_temp.fails($$durable_enqueue('rl_errors', '{}', rate_limits => '{"rl_unknown": 1}')$$);
SELECT pg_temp.fails($$durable_enqueue('rl_errors', '{}', rate_limits => '{"rl_unknown:k": 1}')$$);
SELECT pg_temp.fails($$durable_enqueue('rl_errors', '{}', rate_limits => '{"rl_api": -1}')$$);
SELECT pg_temp.fails($$durable_enqueue('rl_errors', '{}', rate_limits => '{"rl_api": 1.5}')$$);
SELECT pg_temp.fails($$durable_enqueue('rl_errors', '{}', rate_limits => '{"rl_api": "1"}')$$);
SELECT pg_temp.fails($$durable_enqueue('rl_errors', '{}', rate_limits => '{"rl_api": 3}')$$);
SELECT pg_temp.fails($$durable_enqueue('rl_errors', '{}', rate_limits => '{"rl_tenant:": 1}')$$);
SELECT pg_temp.fails($$durable_enqueue('rl_errors', '{}', rate_limits => '[1]')$$);
SELECT pg_temp.fails($$durable_enqueue('rl_errors', '{}', rate_limits => '1')$$);
SELECT pg_temp.fails($$durable_enqueue('rl_errors', '{}', rate_limits => '{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1}')$$);
SELECT count(*) AS tasks, bool_or(rate_limited) AS rate_limited
FROM durable.live_tasks t JOIN durable.queues q USING (queue_name) WHERE queue_name = 'rl_errors';
SELECT rate_limited FROM durable.queues WHERE queue_name = 'rl_errors';

-- leave nothing behind
\set cleanup_queues 'rl_basic,rl_mixed,rl_keys,rl_units,rl_rollback,rl_dropped,rl_composed,rl_errors'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
SELECT durable_drop_rate_limit(limit_name) FROM durable.rate_limit_definitions
WHERE limit_name LIKE 'rl\_%' ORDER BY limit_name;
SELECT count(*) AS buckets_left FROM durable.rate_limit_buckets WHERE limit_name LIKE 'rl\_%';
