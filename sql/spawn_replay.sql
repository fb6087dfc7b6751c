--
-- A replayed durable_spawn compares every option (docs/design.md section 12): the
-- same (parent, name) with the same arguments returns the same child, and
-- with any other argument is 55U03 naming the wait, never the first child
-- handed back as if it were the one asked for.
--
SELECT setval('durable.task_seq', 14000) AS first_id_counter;
SELECT durable_create_queue('spawner');
SELECT durable_create_queue('kids');
SELECT durable_create_queue('other_kids');
SELECT durable_enqueue('spawner', '{}') AS p \gset
SELECT fence AS f FROM durable_claim('spawner', 'w') \gset

-- the SQLSTATE of a statement, or 'ok'
CREATE FUNCTION pg_temp.sqlstate_of(sql text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;

SELECT durable_spawn(:p, :f, 'kid', 'kids', '{"n": 1}',
                     run_at => '2030-01-01 00:00:00+00', priority => 5, class => 'queryable',
                     max_attempts => 7, deadline => '1 day', workflow_version => 'v2',
                     metadata => '{"m": 1}', concurrency_key => 'ck') AS kid \gset
SELECT priority, class, max_attempts, run_at = '2030-01-01 00:00:00+00' AS run_at_kept,
       workflow_version, metadata, concurrency_key
FROM durable.live_tasks WHERE task_id = :kid;

-- the same arguments, also under other session settings, return the same child
SET TimeZone = 'Asia/Kolkata';
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'sql_standard';
SELECT durable_spawn(:p, :f, 'kid', 'kids', '{"n": 1}',
                     run_at => '2030-01-01 05:30:00+05:30', priority => 5, class => 'queryable',
                     max_attempts => 7, deadline => '1 day', workflow_version => 'v2',
                     metadata => '{"m": 1}', concurrency_key => 'ck') = :kid AS same_child;
RESET TimeZone;
RESET DateStyle;
RESET IntervalStyle;

-- any other argument is 55U03, one option at a time
\set call 'durable_spawn(' :p ', ' :f ', ''kid'', '
\set same_options 'run_at => ''2030-01-01 00:00:00+00'', priority => 5, class => ''queryable'', max_attempts => 7, deadline => ''1 day'', workflow_version => ''v2'', metadata => ''{"m": 1}'', concurrency_key => ''ck'''
SELECT option, pg_temp.sqlstate_of(format('SELECT %s %s)', :'call', args)) AS sqlstate
FROM (VALUES
    ('same', $$'kids', '{"n": 1}', $$ || :'same_options'),
    ('queue', $$'other_kids', '{"n": 1}', $$ || :'same_options'),
    ('payload', $$'kids', '{"n": 2}', $$ || :'same_options'),
    ('run_at', $$'kids', '{"n": 1}', $$ || replace(:'same_options', '2030-01-01 00:00:00+00', '2030-01-01 00:00:01+00')),
    ('run_at null', $$'kids', '{"n": 1}', $$ || replace(:'same_options', $$run_at => '2030-01-01 00:00:00+00', $$, '')),
    ('priority', $$'kids', '{"n": 1}', $$ || replace(:'same_options', 'priority => 5', 'priority => 6')),
    ('class', $$'kids', '{"n": 1}', $$ || replace(:'same_options', 'queryable', 'idempotent')),
    ('max_attempts', $$'kids', '{"n": 1}', $$ || replace(:'same_options', 'max_attempts => 7', 'max_attempts => 8')),
    ('max_attempts null', $$'kids', '{"n": 1}', $$ || replace(:'same_options', 'max_attempts => 7', 'max_attempts => NULL')),
    ('deadline', $$'kids', '{"n": 1}', $$ || replace(:'same_options', '1 day', '2 days')),
    ('deadline in hours', $$'kids', '{"n": 1}', $$ || replace(:'same_options', '1 day', '24 hours')),
    ('workflow_version', $$'kids', '{"n": 1}', $$ || replace(:'same_options', 'v2', 'v3')),
    ('metadata', $$'kids', '{"n": 1}', $$ || replace(:'same_options', '{"m": 1}', '{"m": 2}')),
    ('metadata null', $$'kids', '{"n": 1}', $$ || replace(:'same_options', $$metadata => '{"m": 1}'$$, 'metadata => NULL')),
    ('concurrency_key', $$'kids', '{"n": 1}', $$ || replace(:'same_options', $$'ck'$$, $$'ck2'$$)),
    ('concurrency_key null', $$'kids', '{"n": 1}', $$ || replace(:'same_options', $$, concurrency_key => 'ck'$$, ''))
) AS v(option, args);

-- the error names the wait and shows both calls
SELECT durable_spawn(:p, :f, 'kid', 'kids', '{"n": 1}', priority => 6);

-- nothing of that made a second child
SELECT count(*) AS children FROM durable.live_tasks WHERE parent_id = :p;

-- a spawn recorded by 0.4.0 (queue and payload only) still replays with
-- the arguments it was made with
SELECT durable_spawn(:p, :f, 'old_kid', 'kids', '{"n": 3}', priority => 2) AS old_kid \gset
UPDATE durable.live_tasks
SET waits = jsonb_set(waits, '{old_kid,args}', (waits -> 'old_kid' -> 'args') - 'options')
WHERE task_id = :p;
SELECT durable_spawn(:p, :f, 'old_kid', 'kids', '{"n": 3}', priority => 2) = :old_kid AS same_old_kid;
SELECT pg_temp.sqlstate_of(format($$SELECT durable_spawn(%s, %s, 'old_kid', 'kids', '{"n": 4}')$$, :p, :f)) AS other_payload;

SELECT durable_cancel(:p, 'ops');
SELECT count(*) AS disagreements FROM durable_verify();

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'kids,other_kids,spawner'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
