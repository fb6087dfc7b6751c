--
-- durable's functions reach durable's own objects only (docs/design.md section 9):
-- a database owner who renames the schema the API lives in and shadows a
-- durable function there never gets a superuser to run that code.
--
SELECT current_database() AS regress_db \gset
CREATE ROLE regress_mallory;
CREATE DATABASE regress_foreign OWNER regress_mallory;
\c regress_foreign
SET client_min_messages = warning;
CREATE EXTENSION durable;
RESET client_min_messages;
SELECT durable_create_queue('foreign_code_q', lease => '1 ms');
SELECT durable_enqueue('foreign_code_q', '{}') AS t \gset
SELECT fence AS f FROM durable_claim('foreign_code_q', 'w') \gset
SELECT state FROM durable_step(:t, :f, 'call', 'queryable');
SELECT durable_step_start(:t, :f, 'call', 1);

-- the database owner moves the API away and plants functions of its own
SET ROLE regress_mallory;
ALTER SCHEMA public RENAME TO api;
CREATE SCHEMA public;
CREATE FUNCTION public.durable_recovery_action(bool, text, bool, int, int, bool)
RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RAISE WARNING 'the database owner''s code ran as %', current_user;
    RETURN 'mallory';
END $$;
CREATE FUNCTION public.durable_recovery_action_of(bigint)
RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RAISE WARNING 'the database owner''s code ran as %', current_user;
    RETURN 'mallory';
END $$;
RESET ROLE;

-- a superuser reads the recovery package: no warning, durable's own answer
SELECT pg_sleep(0.01);
SELECT api.durable_recovery_package(:t)->'recommended_action'->>'action' AS recommended;

-- no SQL or PL/pgSQL function of the extension names the API's schema
SELECT p.oid::regprocedure AS names_api_schema
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension x ON x.oid = d.refobjid AND x.extname = 'durable'
JOIN pg_language l ON l.oid = p.prolang
WHERE l.lanname <> 'c' AND (p.prosrc LIKE '%public.%' OR p.prosrc LIKE '%api.%'
                            OR p.prosrc LIKE '%@extschema@%');

\c :regress_db
DROP DATABASE regress_foreign;
DROP ROLE regress_mallory;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'foreign_code_q'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
