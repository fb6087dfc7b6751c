--
-- A NULL argument is 22004, never a NULL result that looks like success.
--
\set VERBOSITY default
SELECT durable_pause(NULL);
SELECT durable_resume(NULL);
SELECT durable_drop_queue(NULL);
SELECT durable_request_hash(NULL);

--
-- Every function of the extension that is not STRICT, generated from
-- pg_proc: each argument in turn is NULL while the others have an ordinary
-- value of their type, and the call's SQLSTATE is listed (00000 where the
-- call accepts NULL there: an optional argument whose NULL means "the
-- default").  A new function or argument shows up here by itself.  All of
-- it runs in a transaction that is rolled back.
--
BEGIN;
-- a queue and a task running in it, so that calls reach their later
-- arguments: arguments named like these take these values
SELECT durable_create_queue('null_args_q');
SELECT durable_enqueue('null_args_q', '{}') IS NOT NULL AS enqueued;
CREATE TEMP TABLE null_arg_task AS
SELECT task_id, fence FROM durable_claim('null_args_q', 'w', '1 minute');
SELECT s.state FROM null_arg_task t,
    LATERAL durable_step(t.task_id, t.fence, 'st', 'idempotent', '{}') s;
CREATE TEMP TABLE null_arg_named (name text PRIMARY KEY, value text);
INSERT INTO null_arg_named
SELECT n, v FROM null_arg_task, LATERAL (VALUES
    ('task_id', task_id::text), ('parent_id', task_id::text), ('fence', fence::text),
    ('queue', '''null_args_q'''), ('step', '''st'''), ('worker', '''w'''),
    ('class', '''idempotent'''), ('error_class', '''transient'''),
    ('receipt', '''succeeded'''), ('decision', '''retry'''),
    ('operator', '''op'''), ('name', '''n'''), ('event', '''e'''),
    ('what', '''work'''), ('cron', '''* * * * *'''), ('timezone', '''UTC'''),
    ('target', '''t'''), ('task_ids', 'ARRAY[' || task_id || ']'),
    ('fences', 'ARRAY[' || fence || ']')) AS v(n, v);
CREATE FUNCTION pg_temp.null_arg_value(t regtype, arg text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT value || '::' || t::text FROM null_arg_named WHERE name = arg),
    CASE
        WHEN t IN ('text'::regtype, 'name'::regtype) THEN '''x'''
        WHEN t IN ('bigint'::regtype, 'integer'::regtype, 'smallint'::regtype,
                   'numeric'::regtype, 'real'::regtype,
                   'double precision'::regtype) THEN '1'
        WHEN t = 'boolean'::regtype THEN 'false'
        WHEN t = 'jsonb'::regtype THEN '''{}'''
        WHEN t = 'interval'::regtype THEN '''1 minute'''
        WHEN t = 'timestamptz'::regtype THEN '''2026-01-01 00:00:00+00'''
        WHEN t = 'regrole'::regtype THEN 'CURRENT_USER::regrole'
        WHEN (SELECT typcategory FROM pg_type WHERE oid = t) = 'A' THEN '''{}'''
        WHEN (SELECT typtype FROM pg_type WHERE oid = t) = 'e' THEN
            quote_literal((SELECT enumlabel FROM pg_enum WHERE enumtypid = t
                           ORDER BY enumsortorder LIMIT 1))
        ELSE '''x'''
    END || '::' || t::text)
$$;
CREATE TEMP TABLE null_arg_calls (fn text, arg text, sqlstate text);
DO $$
DECLARE
    f record;
    k int;
    args text[];
    state text;
BEGIN
    FOR f IN
        SELECT p.oid, p.proname || '/' || p.pronargs AS sig, string_to_array(p.proargtypes::text, ' ')::oid[] AS types,
               coalesce(p.proargnames, '{}') AS names
        FROM pg_proc p
        JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
             AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'durable'
        WHERE NOT p.proisstrict AND p.prokind = 'f' AND p.pronargs > 0
          AND p.prorettype <> 'event_trigger'::regtype
          AND p.prorettype <> 'trigger'::regtype
        ORDER BY 2
    LOOP
        FOR k IN 1 .. cardinality(f.types) LOOP
            args := ARRAY(SELECT CASE WHEN i = k THEN 'NULL::' || f.types[i]::regtype::text
                                      ELSE pg_temp.null_arg_value(f.types[i]::regtype, f.names[i]) END
                          FROM generate_subscripts(f.types, 1) AS i ORDER BY i);
            BEGIN
                EXECUTE format('SELECT %s(%s)', f.oid::regproc, array_to_string(args, ', '));
                state := '00000';
                RAISE EXCEPTION USING ERRCODE = 'DUR00';
            EXCEPTION WHEN OTHERS THEN
                IF SQLSTATE <> 'DUR00' THEN
                    state := SQLSTATE;
                END IF;
            END;
            INSERT INTO null_arg_calls
            VALUES (f.sig, coalesce(nullif(f.names[k], ''), '$' || k), state);
        END LOOP;
    END LOOP;
END
$$;
-- each call's answer (the call itself was rolled back)
SELECT fn, arg, sqlstate FROM null_arg_calls ORDER BY fn COLLATE "C", arg COLLATE "C";
-- none is an internal error, and the list is not cut short
SELECT count(*) FILTER (WHERE sqlstate = 'XX000') AS internal_errors,
       count(DISTINCT fn) >= 50 AS functions_found
FROM null_arg_calls;
ROLLBACK;
SELECT count(*) AS queues_left FROM durable.queues WHERE queue_name = 'null_args_q';

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'null_args_q'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
