/* durable--0.1.0--0.2.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION durable UPDATE TO '0.2.0'" to load this file. \quit

-- CREATE EXTENSION durable runs durable--0.1.0.sql and then this script, so
-- a new installation and an updated one are the same by construction.

--
-- main: the session role in every event (DESIGN section 9).  actor stays the
-- worker name a claim gave; role is who made the change.
--
ALTER TABLE durable.events ADD COLUMN role text;
COMMENT ON COLUMN durable.events.role IS 'the session role that made the change (the outer user, not the definer)';

--
-- main: queues restricted to roles (DESIGN section 9).  A queue is open to
-- every holder of the API roles until its first grant; grantee 0 is public.
--
ALTER TABLE durable.queues ADD COLUMN restricted bool NOT NULL DEFAULT false;
COMMENT ON COLUMN durable.queues.restricted IS 'only the roles of durable.queue_grants may enqueue into the queue or work on its tasks';

CREATE TABLE durable.queue_grants (
    queue_name text COLLATE "C" NOT NULL REFERENCES durable.queues ON DELETE CASCADE,
    grantee    oid NOT NULL,
    privilege  text COLLATE "C" NOT NULL CHECK (privilege IN ('enqueue', 'work')),
    PRIMARY KEY (queue_name, grantee, privilege)
);
COMMENT ON TABLE durable.queue_grants IS 'who may use a restricted queue: enqueue into it, or work on its tasks; grantee 0 is public';
SELECT pg_catalog.pg_extension_config_dump('durable.queue_grants', '');
REVOKE ALL ON durable.queue_grants FROM PUBLIC;
GRANT SELECT ON durable.queue_grants TO durable_operator;

CREATE FUNCTION @extschema@.durable_grant_queue(queue text, role text, privilege text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_grant_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_grant_queue(text, text, text) IS
  'let a role (or public) enqueue into a queue, work on its tasks, or both (''enqueue'', ''work'', ''all''); the queue is restricted to its grants from the first one on';

CREATE FUNCTION @extschema@.durable_revoke_queue(queue text, role text, privilege text)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_revoke_queue'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_revoke_queue(text, text, text) IS
  'take a queue grant back; the queue stays restricted';

REVOKE EXECUTE ON FUNCTION
    @extschema@.durable_grant_queue(text, text, text),
    @extschema@.durable_revoke_queue(text, text, text)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_grant_queue(text, text, text),
    @extschema@.durable_revoke_queue(text, text, text)
TO durable_operator;

--
-- main: several steps in doubt (DESIGN section 3).  A decision names the
-- step it settles; the task leaves review when nothing is in doubt.
--
DROP FUNCTION @extschema@.durable_resolve(bigint, text, text, jsonb);
CREATE FUNCTION @extschema@.durable_resolve(task_id bigint, decision text, operator text,
                                            evidence jsonb, step text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_resolve'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_resolve(bigint, text, text, jsonb, text) IS
  'settle a task in review: mark_committed, mark_not_executed, mark_failed (of the step named, or of the only step in doubt), retry or cancel; records operator and evidence first';
REVOKE EXECUTE ON FUNCTION @extschema@.durable_resolve(bigint, text, text, jsonb, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_resolve(bigint, text, text, jsonb, text) TO durable_operator;

-- one row per step in doubt, so that a reviewer sees every one of them
CREATE OR REPLACE VIEW durable.review_queue AS
SELECT t.task_id, t.queue_name, t.class, t.attempt, t.owner AS last_owner,
       s.step, s.class AS step_class, s.state AS step_state, s.idempotency_key, s.receipt,
       e.at AS since, e.kind AS reason, e.detail->>'action' AS decided
FROM durable.tasks t
LEFT JOIN durable.steps s ON s.partition_key = t.partition_key AND s.task_id = t.task_id
                         AND s.state IN ('started', 'unknown')
LEFT JOIN LATERAL (SELECT * FROM durable.events e
                   WHERE e.partition_key = t.partition_key AND e.task_id = t.task_id
                     AND e.state = 'needs_review'
                   ORDER BY e.seq DESC LIMIT 1) e ON true
WHERE t.state = 'needs_review';
COMMENT ON VIEW durable.review_queue IS 'tasks waiting for a person, one row per step in doubt, and why they are here; settle them with durable_resolve()';

--
-- main: the recovery package reaches durable's own objects only (DESIGN
-- section 9).  It used to call durable_recovery_action through the schema
-- the API was installed in, which a database owner can rename and shadow:
-- a superuser reading a package then ran the owner's code.  It now calls
-- a C function in schema durable, which only its owner can change, and
-- recommends what recovery itself would do for every step in doubt.
--
CREATE FUNCTION durable.recovery_action_of(task_id bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'durable_recovery_action_of'
LANGUAGE C STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION durable.recovery_action_of(bigint) IS
  'the recovery action the reconciler would take for a running task now, without taking it';
REVOKE EXECUTE ON FUNCTION durable.recovery_action_of(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION durable.recovery_action_of(bigint) TO durable_operator;

CREATE OR REPLACE FUNCTION @extschema@.durable_recovery_package(task_id bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t durable.tasks;
    doubt text;
    in_doubt bigint;
    package jsonb;
    recommended jsonb;
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION 'task_id must not be null' USING ERRCODE = '22004';
    END IF;
    SELECT * INTO t FROM durable.tasks x
    WHERE x.partition_key = ($1 & 32767)::int AND x.task_id = $1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task % does not exist', $1 USING ERRCODE = '42704';
    END IF;
    SELECT string_agg(format('%s step %s (idempotency key %s)', s.class, s.step, s.idempotency_key),
                      ', ' ORDER BY s.ordinal DESC),
           count(*)
    INTO doubt, in_doubt
    FROM durable.steps s
    WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
      AND s.state IN ('started', 'unknown');

    recommended := CASE
        WHEN t.state = 'needs_review' AND in_doubt = 1 THEN jsonb_build_object(
            'action', 'resolve',
            'reason', format('the outcome of %s is unknown: ask the external system about it, then durable_resolve(%s, ''mark_committed'' or ''mark_not_executed'', ...)',
                             doubt, t.task_id))
        WHEN t.state = 'needs_review' AND in_doubt > 1 THEN jsonb_build_object(
            'action', 'resolve',
            'reason', format('the outcomes of %s are unknown: ask the external systems about each, then durable_resolve(%s, ''mark_committed'' or ''mark_not_executed'', ..., step => ...) for each',
                             doubt, t.task_id))
        WHEN t.state = 'needs_review' THEN jsonb_build_object(
            'action', 'resolve',
            'reason', format('the %s task cannot be recovered automatically: durable_resolve(%s, ''retry'', ''cancel'' or a mark, ...)',
                             t.class, t.task_id))
        WHEN t.state = 'running' THEN jsonb_build_object(
            'action', durable.recovery_action_of(t.task_id),
            'reason', CASE WHEN t.lease_until < now() THEN 'the lease has expired' ELSE 'the lease is live' END)
        WHEN t.state = 'failed' THEN jsonb_build_object(
            'action', 'replay or leave',
            'reason', format('the task failed (%s); durable_replay_dead_letters() gives it a new run', t.stop_code))
        WHEN t.state = 'waiting' AND t.run_at = 'infinity' THEN jsonb_build_object(
            'action', 'reconcile',
            'reason', format('a reconcile handler is to look up the outcome of %s (durable_claim_reconcile)', doubt))
        ELSE jsonb_build_object('action', 'none', 'reason', format('the task is %s', t.state))
    END;

    SELECT jsonb_build_object(
        'task', to_jsonb(t) - 'checkpoint',
        'checkpoint', jsonb_build_object('version', t.checkpoint_version, 'value', t.checkpoint),
        'events', coalesce((SELECT jsonb_agg(to_jsonb(e) - 'partition_key' - 'task_id' ORDER BY e.seq)
                            FROM durable.events e
                            WHERE e.partition_key = t.partition_key AND e.task_id = t.task_id), '[]'),
        'operation_ids', coalesce((SELECT jsonb_agg(DISTINCT s.effect_id)
                                   FROM durable.steps s
                                   WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
                                     AND s.effect_id IS NOT NULL), '[]'),
        'idempotency_keys', coalesce((SELECT jsonb_object_agg(s.step, s.idempotency_key)
                                      FROM durable.steps s
                                      WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id), '{}'),
        'confirmed_side_effects', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                                'step', s.step, 'state', s.state, 'effect_id', s.effect_id,
                                                'receipt', s.receipt, 'result', s.result) ORDER BY s.ordinal)
                                            FROM durable.steps s
                                            WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
                                              AND s.state IN ('committed', 'compensated')), '[]'),
        'unknown_side_effects', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                              'step', s.step, 'state', s.state, 'class', s.class,
                                              'idempotency_key', s.idempotency_key, 'attempt', s.attempt,
                                              'receipt', s.receipt, 'request', s.request) ORDER BY s.ordinal)
                                          FROM durable.steps s
                                          WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
                                            AND s.state IN ('started', 'unknown')), '[]'),
        'recommended_action', recommended)
    INTO package;
    RETURN package;
END
$$;
-- edges: request-level idempotency is fenced (DESIGN section 6).  Every
-- 'started' hands out a new fence; advance and finish carry it, and a
-- stale one is 55U01 with nothing written.  The signatures change, so the
-- three functions are dropped and created again with their grants.
--
ALTER TABLE durable.idempotency_keys ADD COLUMN fence bigint NOT NULL DEFAULT 1;
ALTER TABLE durable.idempotency_keys ALTER COLUMN fence DROP DEFAULT;
COMMENT ON COLUMN durable.idempotency_keys.fence IS 'the fence of the handler that owns the request; each takeover increments it';

DROP FUNCTION @extschema@.durable_idempotent_begin(text, text, jsonb, interval);
DROP FUNCTION @extschema@.durable_idempotent_advance(text, text, text, interval);
DROP FUNCTION @extschema@.durable_idempotent_finish(text, text, jsonb, interval);

CREATE FUNCTION @extschema@.durable_idempotent_begin(scope text, key text, request jsonb,
                                                     lock interval DEFAULT '1 minute')
RETURNS TABLE (status text, recovery_point text, fence bigint, response jsonb)
AS 'MODULE_PATHNAME', 'durable_idempotent_begin'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 1;
COMMENT ON FUNCTION @extschema@.durable_idempotent_begin(text, text, jsonb, interval) IS
  'begin a request under an idempotency key: started (with the fence that owns it), in_progress or completed (with the stored response)';

CREATE FUNCTION @extschema@.durable_idempotent_advance(scope text, key text, fence bigint,
                                                       recovery_point text,
                                                       lock interval DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_idempotent_advance'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_idempotent_advance(text, text, bigint, text, interval) IS
  'record the recovery point a request has reached, under the fence that owns it';

CREATE FUNCTION @extschema@.durable_idempotent_finish(scope text, key text, fence bigint,
                                                      response jsonb,
                                                      retention interval DEFAULT '24 hours')
RETURNS void
AS 'MODULE_PATHNAME', 'durable_idempotent_finish'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_idempotent_finish(text, text, bigint, jsonb, interval) IS
  'store the response of a request under the fence that owns it; later begins get it back until the retention has passed';

REVOKE EXECUTE ON FUNCTION
    @extschema@.durable_idempotent_begin(text, text, jsonb, interval),
    @extschema@.durable_idempotent_advance(text, text, bigint, text, interval),
    @extschema@.durable_idempotent_finish(text, text, bigint, jsonb, interval)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_idempotent_begin(text, text, jsonb, interval),
    @extschema@.durable_idempotent_advance(text, text, bigint, text, interval),
    @extschema@.durable_idempotent_finish(text, text, bigint, jsonb, interval)
TO durable_worker, durable_producer;

--
-- edges: ids and keys are never reused, also across DROP and CREATE
-- EXTENSION (DESIGN section 6).  Nothing of an earlier installation
-- survives its DROP EXTENSION, so:
--
-- * every installation gets a random id, which the keys durable derives
--   from task ids mix in (durable_step: durable_idempotency_key(
--   installation_id, task_id, step[, target])).  A task id that comes back
--   never brings back an earlier installation's step key.
-- * the id counters start from the clock: task and outbox ids (40-bit
--   counters) at the milliseconds since 2025-01-01 UTC, outbox fences
--   (64-bit) at the microseconds.  A new installation's first id is past
--   every id of an earlier one as long as that one handed out fewer ids
--   than milliseconds (fences: microseconds) went by between the two
--   installations, i.e. at most 1000 ids a second on average.  The 40-bit
--   counter lasts until 2^40 ms after the epoch (November 2059) for an
--   installation that keeps to that rate.
--
-- A restore runs CREATE EXTENSION (a new row here, the clock seeds) and
-- then copies the dumped rows and sequence values in: the restored tasks
-- keep their ids, the sequences continue after them, and the newest
-- installation row (the restore's own) is the one new keys mix in.
--
CREATE TABLE durable.installation (
    installation_id uuid PRIMARY KEY,
    installed_at    timestamptz NOT NULL
);
COMMENT ON TABLE durable.installation IS 'the random id of this installation (the newest row), mixed into every key derived from a task id';
INSERT INTO durable.installation (installation_id, installed_at)
VALUES (pg_catalog.gen_random_uuid(), pg_catalog.clock_timestamp());
SELECT pg_catalog.pg_extension_config_dump('durable.installation', '');
REVOKE ALL ON durable.installation FROM PUBLIC;
GRANT SELECT ON durable.installation TO durable_operator;

SELECT pg_catalog.setval('durable.task_seq',
           GREATEST(s.last_value, c.ms)),
       pg_catalog.setval('durable.outbox_seq',
           GREATEST(o.last_value, c.ms)),
       pg_catalog.setval('durable.outbox_fence_seq',
           GREATEST(f.last_value, c.ms * 1000))
FROM durable.task_seq s, durable.outbox_seq o, durable.outbox_fence_seq f,
     (SELECT pg_catalog.floor(pg_catalog.date_part('epoch',
                 pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-)
                 '2025-01-01 00:00:00+00'::pg_catalog.timestamptz)
             OPERATOR(pg_catalog.*) 1000)::pg_catalog.int8 AS ms) c;

--
-- edges: no out-of-range time is stored.  Refill rates are checked at
-- creation and change (from 0.000001 to 1000000 tokens a second); the
-- constraint keeps a rate that bypassed the API out too, and a rate stored
-- by 0.1.0 outside that range is brought into it, since the reconciler
-- would otherwise fail on every tick that defers a retry of its queue.
--
UPDATE durable.queues
   SET retry_refill_rate = LEAST(GREATEST(retry_refill_rate, 0.000001), 1000000)
 WHERE retry_refill_rate < 0.000001 OR retry_refill_rate > 1000000
    OR retry_refill_rate = 'NaN';
ALTER TABLE durable.queues ADD CONSTRAINT queues_retry_refill_rate_range
    CHECK (retry_refill_rate >= 0.000001 AND retry_refill_rate <= 1000000);

--
-- edges: a NULL argument is 22004, never a NULL result.  These were
-- STRICT, so a NULL queue name paused, resumed or dropped nothing and
-- returned NULL as if it had worked; the C code checks every argument.
--
ALTER FUNCTION @extschema@.durable_pause(text) CALLED ON NULL INPUT;
ALTER FUNCTION @extschema@.durable_resume(text) CALLED ON NULL INPUT;
ALTER FUNCTION @extschema@.durable_drop_queue(text) CALLED ON NULL INPUT;
ALTER FUNCTION @extschema@.durable_retry_delay(text, int, int, int) CALLED ON NULL INPUT;
ALTER FUNCTION @extschema@.durable_request_hash(jsonb) CALLED ON NULL INPUT;

--
-- edges: pg_monitor reads the metrics views it was granted; it needs the
-- schema too, or every read is 42501.  Only the views: the tables stay
-- closed to it.
--
GRANT USAGE ON SCHEMA durable TO pg_monitor;

--
-- edges: the unique text keys compare bytewise (COLLATE "C"): queue names,
-- enqueue idempotency keys, step names, inbox consumers and message ids,
-- request scopes and keys.  Under the database's default collation an
-- operating-system upgrade that changes its rules can corrupt the unique
-- indexes on them, so that one key is accepted twice.  Changing a column's
-- collation rebuilds its indexes (no table rewrite), but is refused while
-- a view uses the column: the metrics views that do are recreated from
-- their own definitions, comments and grants, whatever they are by now.
--
DO $collate$
DECLARE
    v record;
    saved jsonb := '[]';
    g record;
BEGIN
    -- every view that uses one of the columns, newest first (a view made
    -- later may use one made earlier); they are made again oldest first
    FOR v IN
        SELECT DISTINCT c.oid, c.relname
        FROM pg_catalog.pg_depend d
        JOIN pg_catalog.pg_rewrite r ON r.oid OPERATOR(pg_catalog.=) d.objid
        JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.ev_class
        JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) d.refobjid
                                      AND a.attnum OPERATOR(pg_catalog.=) d.refobjsubid
        WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
          AND c.relkind OPERATOR(pg_catalog.=) 'v'
          AND (d.refobjid, a.attname) IN (('durable.queues'::pg_catalog.regclass, 'queue_name'),
                                          ('durable.tasks'::pg_catalog.regclass, 'queue_name'),
                                          ('durable.tasks'::pg_catalog.regclass, 'idempotency_key'),
                                          ('durable.steps'::pg_catalog.regclass, 'step'),
                                          ('durable.inbox'::pg_catalog.regclass, 'consumer'),
                                          ('durable.inbox'::pg_catalog.regclass, 'message_id'),
                                          ('durable.idempotency_keys'::pg_catalog.regclass, 'scope'),
                                          ('durable.idempotency_keys'::pg_catalog.regclass, 'key'))
        ORDER BY c.oid DESC
    LOOP
        saved := pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
            'name', v.oid::pg_catalog.regclass::pg_catalog.text,
            'def', pg_catalog.pg_get_viewdef(v.oid, false),
            'comment', pg_catalog.obj_description(v.oid, 'pg_class'),
            'grants', (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_array(
                                  a.privilege_type,
                                  CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                       ELSE pg_catalog.quote_ident(a.grantee::pg_catalog.regrole::pg_catalog.text) END))
                       FROM pg_catalog.pg_class c,
                            LATERAL pg_catalog.aclexplode(c.relacl) a
                       WHERE c.oid OPERATOR(pg_catalog.=) v.oid
                         AND a.grantee OPERATOR(pg_catalog.<>) c.relowner))) OPERATOR(pg_catalog.||) saved;
        EXECUTE pg_catalog.format('DROP VIEW %s', v.oid::pg_catalog.regclass);
    END LOOP;

    ALTER TABLE durable.queues ALTER COLUMN queue_name TYPE text COLLATE "C";
    ALTER TABLE durable.tasks ALTER COLUMN queue_name TYPE text COLLATE "C",
                              ALTER COLUMN idempotency_key TYPE text COLLATE "C";
    ALTER TABLE durable.steps ALTER COLUMN step TYPE text COLLATE "C";
    ALTER TABLE durable.inbox ALTER COLUMN consumer TYPE text COLLATE "C",
                              ALTER COLUMN message_id TYPE text COLLATE "C";
    ALTER TABLE durable.idempotency_keys ALTER COLUMN scope TYPE text COLLATE "C",
                                         ALTER COLUMN key TYPE text COLLATE "C";

    -- saved is oldest first: each was put in front of the newer ones
    FOR v IN SELECT e FROM pg_catalog.jsonb_array_elements(saved) e LOOP
        EXECUTE pg_catalog.format('CREATE VIEW %s AS %s', v.e->>'name', v.e->>'def');
        EXECUTE pg_catalog.format('COMMENT ON VIEW %s IS %L', v.e->>'name', v.e->>'comment');
        FOR g IN SELECT x FROM pg_catalog.jsonb_array_elements(coalesce(v.e->'grants', '[]')) x LOOP
            EXECUTE pg_catalog.format('GRANT %s ON %s TO %s',
                                      g.x->>0, v.e->>'name', g.x->>1);
        END LOOP;
    END LOOP;
END
$collate$;

--
-- nopreload: what needs the postmaster is said, never a FATAL (DESIGN
-- section 14).  Without shared_preload_libraries the SQL API works, but no
-- reconciler runs, durable.database and durable.node_id do not exist, and
-- task ids carry node number 0; preloaded, the reconciler works in
-- durable.database only.  A database it does not work in schedules
-- durable_reconcile() instead (pg_cron).  durable.status shows which case
-- this database is in, and CREATE EXTENSION (or this update) says it once.
--
CREATE FUNCTION durable.library_status(OUT preloaded boolean,
                                       OUT reconciler_database text,
                                       OUT reconciler_enabled boolean,
                                       OUT node_id int)
AS 'MODULE_PATHNAME', 'durable_library_status'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION durable.library_status() IS
  'how this session''s durable library was loaded: preloaded or not, the database the reconciler works in and whether it is enabled, the node number in task ids';

-- The reconciler runs as a superuser: other roles see its row in
-- pg_stat_activity without its backend_type, so this looks as the owner.
CREATE FUNCTION durable.reconciler_pid()
RETURNS int
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT a.pid FROM pg_catalog.pg_stat_activity a
    WHERE a.backend_type OPERATOR(pg_catalog.=) 'durable reconciler'
      AND a.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
    LIMIT 1
$$;
COMMENT ON FUNCTION durable.reconciler_pid() IS
  'the process id of the durable reconciler working in this database, or NULL';

CREATE VIEW durable.status AS
SELECT l.preloaded,
       CASE WHEN NOT l.preloaded THEN 'not preloaded'
            WHEN l.reconciler_database IS DISTINCT FROM current_database()::text THEN 'in another database'
            WHEN NOT l.reconciler_enabled THEN 'disabled'
            WHEN p.pid IS NULL THEN 'not running'
            ELSE 'running' END AS reconciler,
       p.pid AS reconciler_pid,
       l.reconciler_database,
       l.node_id
FROM durable.library_status() l,
     LATERAL (SELECT durable.reconciler_pid() AS pid) p;
COMMENT ON VIEW durable.status IS 'whether durable is preloaded, whether a reconciler works in this database (running, not running, disabled, in another database, not preloaded), the database it works in and the node number in task ids';
GRANT SELECT ON durable.status TO durable_operator, pg_monitor;

CREATE FUNCTION durable.notice_status()
RETURNS void
AS 'MODULE_PATHNAME', 'durable_notice_status'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION durable.notice_status() IS
  'at the commit, say in a NOTICE when no reconciler works in this database and what to do instead; CREATE and ALTER EXTENSION call it';
REVOKE EXECUTE ON FUNCTION durable.notice_status() FROM PUBLIC;
SELECT durable.notice_status();

--
-- workers: what a reference worker needs (issue 12).  A worker that stops
-- gives the tasks it has not started back at once, instead of letting
-- their leases run out and use an attempt; a heartbeat timer renews every
-- held lease in one statement and learns which tasks it lost from the
-- result, not from an error.
--
CREATE FUNCTION @extschema@.durable_release(task_id bigint, fence bigint, reason text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'durable_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_release(bigint, bigint, text) IS
  'give a claimed task back at once: ready, fence + 1, its attempt given back; refused while a step is started or unknown';

CREATE FUNCTION @extschema@.durable_heartbeat_batch(task_ids bigint[], fences bigint[],
                                                    lease interval DEFAULT NULL)
RETURNS TABLE (task_id bigint, lease_until timestamptz)
AS 'MODULE_PATHNAME', 'durable_heartbeat_batch'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_heartbeat_batch(bigint[], bigint[], interval) IS
  'extend the leases of many running tasks, each under its own fence; one row per task, lease_until NULL for a task no longer held';

REVOKE EXECUTE ON FUNCTION
    @extschema@.durable_release(bigint, bigint, text),
    @extschema@.durable_heartbeat_batch(bigint[], bigint[], interval)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    @extschema@.durable_release(bigint, bigint, text),
    @extschema@.durable_heartbeat_batch(bigint[], bigint[], interval)
TO durable_worker;
