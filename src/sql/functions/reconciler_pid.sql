-- The reconciler runs as a superuser: other roles see its row in
-- pg_stat_activity without its backend_type, so this looks as the owner.
CREATE OR REPLACE FUNCTION durable.reconciler_pid()
RETURNS int
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- the settings its text forms follow are pinned (docs/design.md section 7;
-- test/t/015_hostile_settings.pl checks every function in SQL or PL/pgSQL)
SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
SET TimeZone = 'UTC' SET extra_float_digits = 1
AS $$
    SELECT a.pid FROM pg_catalog.pg_stat_activity a
    WHERE a.backend_type OPERATOR(pg_catalog.=) 'durable reconciler'
      AND a.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
    LIMIT 1
$$;
COMMENT ON FUNCTION durable.reconciler_pid() IS
  'the process id of the durable reconciler working in this database, or NULL';
