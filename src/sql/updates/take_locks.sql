-- The beginning of every update script (tools/sql-scripts puts it there).
-- An update runs beside the calls of a running system, which hold locks
-- on durable's tables and wait for others, in orders of their own, and a
-- tenant may hold a transaction open (docs/design.md section 14).  So the
-- update takes every lock it needs first, all of durable's relations in
-- one statement, in tries: each lock wait of a try gives up after
-- lock_timeout, from 10 ms, doubling, to at most half of deadlock_timeout;
-- the try lets go of what it took, and the next begins.  A call that waits
-- for a lock the update holds so waits less than its deadlock_timeout and
-- never finds a deadlock with the update; should one form anyway (lock
-- waits that follow one another), the call finds it and loses (40P01,
-- which a client runs again), not the update, whose own deadlock_timeout
-- is long.  A lock_timeout of the session bounds the whole.
--
-- On a Citus coordinator the LOCK of a distributed table would take it on
-- every node too, with none of these timeouts there, and those locks held
-- to the commit would outlast every try on the node: a call of the node
-- that holds another of durable's tables and waits for one of these would
-- wait until Citus cancels the update, in which a transaction local to a
-- node counts as older than any distributed one.  So the LOCK takes this
-- node's tables only, and each node's tables are taken by the update's
-- own script there, in tries of its own (Citus runs ALTER EXTENSION on
-- every node).
DO $take_locks$
DECLARE
    relations text;
    propagation text := pg_catalog.current_setting('citus.enable_ddl_propagation', true);
    patience interval := pg_catalog.current_setting('lock_timeout')::interval;
    longest interval := pg_catalog.current_setting('deadlock_timeout')::interval OPERATOR(pg_catalog./) 2;
    started timestamptz := pg_catalog.clock_timestamp();
    try interval := LEAST('10ms'::interval, longest);
BEGIN
    PERFORM pg_catalog.set_config('deadlock_timeout', '1min', true);
    SELECT pg_catalog.string_agg(c.oid::pg_catalog.regclass::text, ', ' ORDER BY c.oid)
    INTO relations
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.objid
    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
      AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid OPERATOR(pg_catalog.=)
          (SELECT oid FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'durable')
      AND d.deptype OPERATOR(pg_catalog.=) 'e'
      AND c.relkind IN ('r', 'p', 'v');
    IF relations IS NULL THEN
        RETURN;
    END IF;
    IF propagation IS NOT NULL THEN
        PERFORM pg_catalog.set_config('citus.enable_ddl_propagation', 'off', true);
    END IF;
    LOOP
        IF patience OPERATOR(pg_catalog.>) '0'::interval THEN
            try := LEAST(try, patience OPERATOR(pg_catalog.-)
                              (pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) started));
        END IF;
        PERFORM pg_catalog.set_config('lock_timeout',
            GREATEST(pg_catalog.ceil(EXTRACT(epoch FROM try) OPERATOR(pg_catalog.*) 1000), 1)::text,
            true);
        BEGIN
            EXECUTE 'LOCK TABLE ' OPERATOR(pg_catalog.||) relations
                OPERATOR(pg_catalog.||) ' IN ACCESS EXCLUSIVE MODE';
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            IF patience OPERATOR(pg_catalog.>) '0'::interval AND
               pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) started
               OPERATOR(pg_catalog.>=) patience THEN
                RAISE;
            END IF;
        END;
        try := LEAST(try OPERATOR(pg_catalog.*) 2, longest);
    END LOOP;
    PERFORM pg_catalog.set_config('lock_timeout',
        (EXTRACT(epoch FROM patience) OPERATOR(pg_catalog.*) 1000)::bigint::text, true);
    IF propagation IS NOT NULL THEN
        PERFORM pg_catalog.set_config('citus.enable_ddl_propagation', propagation, true);
    END IF;
END
$take_locks$;
