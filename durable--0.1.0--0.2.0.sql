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

--
-- storage: live work apart from history (DESIGN section 13).  Claims,
-- heartbeats, commits and the reconciler touch durable.live_tasks and
-- durable.live_steps, which hold unfinished tasks only.  A task that
-- finishes moves, in the statement that finishes it, to
-- durable.task_history and its steps to durable.step_history; both are
-- partitioned by the day the task finished, and durable.event_log by the
-- day of the event, so that retention drops whole days.  durable.tasks,
-- durable.steps and durable.events are views over both halves: what was
-- read before reads the same.
--
-- The indexes of the live tables carry live tasks only, and none of them
-- holds a column that a heartbeat changes: a heartbeat is a HOT update.
-- The reconciler finds running tasks by tasks_running and reads their
-- lease times from the rows, of which there are as many as workers hold.
--
DROP VIEW durable.queue_stats, durable.stuck_tasks, durable.review_queue, durable.metrics;

ALTER TABLE durable.tasks RENAME TO tasks_0_1;
ALTER INDEX durable.tasks_pkey RENAME TO tasks_0_1_pkey;
DROP INDEX durable.tasks_claimable, durable.tasks_leased, durable.tasks_idempotency,
    durable.tasks_finished, durable.tasks_reconcile;
ALTER TABLE durable.steps RENAME TO live_steps;
ALTER INDEX durable.steps_pkey RENAME TO live_steps_pkey;
COMMENT ON TABLE durable.live_steps IS 'the side-effecting steps of unfinished tasks: one row per step, moved by compare-and-swap on version; ordinal orders them (the task version that planned them)';

-- The columns a claim and a heartbeat change come last, together: an
-- update that stays on its page logs only the bytes from the first
-- changed column to the last, so the payload and the other columns that
-- never change before them are not written again.
--
-- A running lease is its own open event (DESIGN section 13): the claim
-- writes no event row but claimed_at, claim_seq, claim_kind and
-- claim_role, and the event that ends the lease (a commit, a failure, an
-- expiry, a release) records the claim with it.  A finished task's last
-- event is its row in history (final_*, with claim_fence the fence its
-- lease ran under).  Rows from 0.1.0 keep their claims and last events as
-- rows of the event log, with these columns NULL.
CREATE TABLE durable.live_tasks (
    partition_key      int NOT NULL,
    task_id            bigint NOT NULL,
    priority           int NOT NULL,
    max_attempts       int NOT NULL,
    checkpoint_version int NOT NULL DEFAULT 0,
    steps_in_doubt     int NOT NULL DEFAULT 0,
    class              durable.activity_class NOT NULL,
    created_at         timestamptz NOT NULL,
    deadline           interval,
    queue_name         text COLLATE "C" NOT NULL,
    idempotency_key    text COLLATE "C",
    request_hash       bytea,
    workflow_version   text,
    payload            jsonb NOT NULL,
    metadata           jsonb,
    checkpoint         jsonb,
    result             jsonb,
    last_error         jsonb,
    stop_code          text,
    stuck_alarm_at     timestamptz,
    finished_at        timestamptz,
    claim_fence        bigint,
    final_kind         text,
    final_actor        text,
    final_role         text,
    final_detail       jsonb,
    run_at             timestamptz NOT NULL,
    state              durable.task_state NOT NULL,
    attempt            int NOT NULL DEFAULT 0,
    version            int NOT NULL DEFAULT 1,
    fence              bigint NOT NULL DEFAULT 0,
    lease_until        timestamptz,
    heartbeat_at       timestamptz,
    progress_at        timestamptz,
    lease              interval,
    owner              text,
    progress           text,
    claimed_at         timestamptz,
    claim_seq          int,
    claim_kind         text,
    claim_role         text,
    CONSTRAINT live_tasks_pkey PRIMARY KEY (partition_key, task_id)
) WITH (fillfactor = 80);
COMMENT ON TABLE durable.live_tasks IS 'unfinished tasks, one row each; version counts its events, fence its leases, owner is the worker that holds or last held it';
COMMENT ON COLUMN durable.live_tasks.claim_seq IS 'the seq of the claim event of the lease the task runs under, or last ran under; its time, kind and role are beside it';
COMMENT ON COLUMN durable.live_tasks.final_kind IS 'in history: the kind of the event that finished the task (seq = version, at = finished_at), with its actor, role and detail';
-- ready and waiting work, in claim order
CREATE INDEX tasks_claimable ON durable.live_tasks
    (partition_key, queue_name, priority DESC, run_at, task_id)
    WHERE state IN ('ready', 'waiting');
-- running tasks, for the reconciler (lease_until is read from the rows:
-- an index on it would make every heartbeat write an index entry)
CREATE INDEX tasks_running ON durable.live_tasks (partition_key, task_id)
    WHERE state = 'running';
-- tasks whose queryable step waits for a reconcile handler
CREATE INDEX tasks_reconcile ON durable.live_tasks (partition_key, queue_name)
    WHERE state = 'waiting' AND run_at = 'infinity';
GRANT SELECT ON durable.live_tasks TO durable_operator;

-- Enqueue idempotency outlives the task's move to history: the key is
-- bound to its task (and request hash) here until retention removes the
-- task.  Only keyed enqueues write a row.
CREATE TABLE durable.task_keys (
    partition_key   int NOT NULL,
    queue_name      text COLLATE "C" NOT NULL,
    idempotency_key text COLLATE "C" NOT NULL,
    task_id         bigint NOT NULL,
    request_hash    bytea,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (partition_key, queue_name, idempotency_key)
);
CREATE INDEX task_keys_created ON durable.task_keys (created_at);
COMMENT ON TABLE durable.task_keys IS 'enqueue idempotency keys, each bound to the task it created (and its request hash) until retention removes that task';
INSERT INTO durable.task_keys (partition_key, queue_name, idempotency_key, task_id,
                               request_hash, created_at)
SELECT partition_key, queue_name, idempotency_key, task_id, request_hash, created_at
FROM durable.tasks_0_1 WHERE idempotency_key IS NOT NULL;

CREATE TABLE durable.task_history (LIKE durable.live_tasks)
    PARTITION BY RANGE (finished_at);
ALTER TABLE durable.task_history ALTER COLUMN finished_at SET NOT NULL;
COMMENT ON TABLE durable.task_history IS 'finished tasks (completed, failed, cancelled), partitioned by the day they finished; retention drops whole days';

CREATE TABLE durable.step_history (LIKE durable.live_steps, finished_at timestamptz NOT NULL)
    PARTITION BY RANGE (finished_at);
COMMENT ON TABLE durable.step_history IS 'the steps of finished tasks, partitioned by the day their task finished';

ALTER TABLE durable.events RENAME TO events_0_1;
ALTER INDEX durable.events_pkey RENAME TO events_0_1_pkey;
CREATE TABLE durable.event_log (LIKE durable.events_0_1,
    lease_seq   int,
    lease_fence bigint,
    lease_at    timestamptz,
    lease_kind  text,
    lease_actor text,
    lease_role  text)
    PARTITION BY RANGE (at);
COMMENT ON TABLE durable.event_log IS 'append-only: the changes of tasks as written, partitioned by the day of the change; an event that ends a lease carries its claim (lease_*); read durable.events';

-- Each partitioned table has a default partition for rows outside the
-- days made so far (and for rows of an earlier version, moved here by
-- this update); retention deletes from it row by row.  Days are made
-- ahead by durable.maintain_history, which also drops them.
--
-- The partitioned tables have no index of their own: each partition has
-- its own, made with it (durable.index_history).  pg_dump dumps the days
-- with their rows and indexes; were the indexes the parents', a restore
-- would find them made already by CREATE EXTENSION when it attached a
-- dumped day, and fail on the day's own.
CREATE FUNCTION durable.index_history(parent text, part text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF parent OPERATOR(pg_catalog.=) 'task_history' THEN
        EXECUTE pg_catalog.format('ALTER TABLE durable.%I ADD PRIMARY KEY (partition_key, task_id, finished_at)', part);
        -- the dead letters of a queue, oldest first
        EXECUTE pg_catalog.format('CREATE INDEX ON durable.%I (partition_key, queue_name, finished_at)'
                                  ' WHERE state = ''failed''', part);
        -- whether a task retained was created before a time: the events
        -- of a day go only once no task retained can have one of them
        EXECUTE pg_catalog.format('CREATE INDEX ON durable.%I USING brin (created_at)'
                                  ' WITH (autosummarize = on)', part);
    ELSIF parent OPERATOR(pg_catalog.=) 'step_history' THEN
        EXECUTE pg_catalog.format('ALTER TABLE durable.%I ADD PRIMARY KEY (partition_key, task_id, step, finished_at)', part);
    ELSE
        EXECUTE pg_catalog.format('ALTER TABLE durable.%I ADD PRIMARY KEY (partition_key, task_id, seq, at)', part);
    END IF;
END
$$;
COMMENT ON FUNCTION durable.index_history(text, text) IS
  'make the indexes of a partition of durable.task_history, durable.step_history or durable.event_log';
REVOKE EXECUTE ON FUNCTION durable.index_history(text, text) FROM PUBLIC;

CREATE TABLE durable.task_history_default PARTITION OF durable.task_history DEFAULT;
CREATE TABLE durable.step_history_default PARTITION OF durable.step_history DEFAULT;
CREATE TABLE durable.event_log_default PARTITION OF durable.event_log DEFAULT;
SELECT durable.index_history(p, p || '_default')
FROM unnest(ARRAY['task_history', 'step_history', 'event_log']) p;
-- the rows of a day, for the days made later and for retention
CREATE INDEX task_history_default_finished ON durable.task_history_default (finished_at);
CREATE INDEX step_history_default_finished ON durable.step_history_default (finished_at);
CREATE INDEX event_log_default_at ON durable.event_log_default (at);

-- what retention has removed: history before this time is gone, so that
-- events left of tasks removed are no orphans (durable_verify)
CREATE TABLE durable.history_horizon (
    one               bool PRIMARY KEY DEFAULT true CHECK (one),
    removed_before    timestamptz NOT NULL DEFAULT '-infinity',
    events_checked_at timestamptz
);
COMMENT ON TABLE durable.history_horizon IS 'the time before which retention has removed finished tasks, and when a day of events old enough was last found held by a task still kept; no row until either happened';

CREATE VIEW durable.tasks AS
SELECT partition_key, task_id, state, class, priority, attempt, max_attempts, version, fence,
       run_at, created_at, lease_until, heartbeat_at, progress_at, stuck_alarm_at, finished_at,
       lease, deadline, queue_name, owner, progress, stop_code, idempotency_key, request_hash,
       workflow_version, payload, result, last_error, checkpoint, checkpoint_version,
       steps_in_doubt, metadata
FROM durable.live_tasks
UNION ALL
SELECT partition_key, task_id, state, class, priority, attempt, max_attempts, version, fence,
       run_at, created_at, lease_until, heartbeat_at, progress_at, stuck_alarm_at, finished_at,
       lease, deadline, queue_name, owner, progress, stop_code, idempotency_key, request_hash,
       workflow_version, payload, result, last_error, checkpoint, checkpoint_version,
       steps_in_doubt, metadata
FROM durable.task_history;
COMMENT ON VIEW durable.tasks IS 'every task retained: the unfinished ones (durable.live_tasks) and the finished ones (durable.task_history)';

CREATE VIEW durable.steps AS
SELECT * FROM durable.live_steps
UNION ALL
SELECT partition_key, task_id, step, state, class, version, attempt, ordinal, created_at,
       updated_at, idempotency_key, request_hash, compensates, receipt, effect_id,
       error_class, request, result, evidence, error
FROM durable.step_history;
CREATE VIEW durable.events AS
SELECT partition_key, task_id, seq, state, fence, at, kind, actor, detail, step, role
FROM durable.event_log
UNION ALL
-- the claims of the leases those events ended
SELECT partition_key, task_id, lease_seq, 'running', lease_fence, lease_at, lease_kind,
       lease_actor, NULL, NULL, lease_role
FROM durable.event_log WHERE lease_seq IS NOT NULL
UNION ALL
-- the claims of the leases running now
SELECT partition_key, task_id, claim_seq, 'running', fence, claimed_at, claim_kind,
       owner, NULL, NULL, claim_role
FROM durable.live_tasks WHERE state = 'running' AND claim_seq IS NOT NULL
UNION ALL
-- the events that finished tasks, and the claims of the leases they ended
SELECT partition_key, task_id, version, state, fence, finished_at, final_kind,
       final_actor, final_detail, NULL, final_role
FROM durable.task_history WHERE final_kind IS NOT NULL
UNION ALL
SELECT partition_key, task_id, claim_seq, 'running', claim_fence, claimed_at, claim_kind,
       owner, NULL, NULL, claim_role
FROM durable.task_history WHERE claim_seq IS NOT NULL;
COMMENT ON VIEW durable.events IS 'the history of every task retained: one row per change, with the state and fence it left; seq is the task''s version after the change';

COMMENT ON VIEW durable.steps IS 'every step retained: those of unfinished tasks (durable.live_steps) and those of finished ones (durable.step_history)';
GRANT SELECT ON durable.tasks, durable.steps, durable.events TO durable_operator;

SELECT pg_catalog.pg_extension_config_dump('durable.live_tasks', '');
SELECT pg_catalog.pg_extension_config_dump('durable.task_keys', '');
SELECT pg_catalog.pg_extension_config_dump('durable.task_history_default', '');
SELECT pg_catalog.pg_extension_config_dump('durable.step_history_default', '');
SELECT pg_catalog.pg_extension_config_dump('durable.event_log_default', '');
SELECT pg_catalog.pg_extension_config_dump('durable.history_horizon', '');
REVOKE ALL ON durable.live_tasks, durable.live_steps, durable.task_keys, durable.task_history,
    durable.step_history, durable.event_log, durable.task_history_default,
    durable.step_history_default, durable.event_log_default, durable.history_horizon
FROM PUBLIC;
GRANT SELECT ON durable.live_tasks, durable.live_steps, durable.task_keys, durable.task_history,
    durable.step_history, durable.event_log, durable.history_horizon
TO durable_operator;


--
-- The days of history.  A day is made as a partition of each history
-- table ahead of time, before a row can arrive for it (a day that already
-- has rows in the default partition stays there), and dropped once all of
-- it is older than durable.retention; a day of events only once no task
-- retained, finished or not, was created before its end.  The DDL waits
-- for its locks briefly and tries again on a later call rather than stall
-- the commits queued behind it.  The days are no members of the
-- extension: pg_dump dumps them, with their rows, as partitions of their
-- table, and a restore brings them back as they were.  So the extension
-- script makes none (a restore's CREATE EXTENSION would make tables of the
-- dumped names): the reconciler's first tick does, or the first
-- durable_reconcile().
--
CREATE FUNCTION durable.maintain_history(now timestamptz, retention interval, batch int)
RETURNS TABLE (task_id bigint, action text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '100ms'
AS $$
DECLARE
    today timestamptz := pg_catalog.date_trunc('day', now, 'UTC');
    cutoff timestamptz := now OPERATOR(pg_catalog.-) retention;
    oldest_live timestamptz;
    day timestamptz;
    parent text;
    name text;
    part record;
    outside bool;
    held_checked timestamptz;
BEGIN
    FOR i IN 0..2 LOOP
        day := today OPERATOR(pg_catalog.+) pg_catalog.make_interval(days => i);
        FOREACH parent IN ARRAY ARRAY['task_history', 'step_history', 'event_log'] LOOP
            name := pg_catalog.format('%s_p%s', parent,
                                      pg_catalog.to_char(day AT TIME ZONE 'UTC', 'YYYYMMDD'));
            CONTINUE WHEN pg_catalog.to_regclass('durable.' OPERATOR(pg_catalog.||) name) IS NOT NULL;
            -- A day with rows in the default partition stays there.  Else
            -- the day is made apart and attached: ATTACH PARTITION takes a
            -- lock on the parent that lets commits go on (CREATE TABLE ...
            -- PARTITION OF would stop them), and one on the default
            -- partition, which is not waited for.  Today also needs the
            -- parent to itself: a transaction under way may have routed a
            -- row of today to the default partition, and would fail on
            -- its new constraint.  A day ahead has no rows yet.
            EXECUTE pg_catalog.format(
                'SELECT EXISTS (SELECT FROM durable.%I WHERE %I >= $1 AND %I < $2)',
                parent OPERATOR(pg_catalog.||) '_default',
                CASE WHEN parent OPERATOR(pg_catalog.=) 'event_log' THEN 'at' ELSE 'finished_at' END,
                CASE WHEN parent OPERATOR(pg_catalog.=) 'event_log' THEN 'at' ELSE 'finished_at' END)
            INTO outside USING day, day OPERATOR(pg_catalog.+) '1 day'::pg_catalog.interval;
            CONTINUE WHEN outside;
            BEGIN
                IF i OPERATOR(pg_catalog.=) 0 THEN
                    EXECUTE pg_catalog.format('LOCK TABLE ONLY durable.%I IN SHARE MODE NOWAIT', parent);
                END IF;
                EXECUTE pg_catalog.format('LOCK TABLE durable.%I IN ACCESS EXCLUSIVE MODE NOWAIT',
                                          parent OPERATOR(pg_catalog.||) '_default');
                EXECUTE pg_catalog.format(
                    'CREATE TABLE durable.%I (LIKE durable.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                    name, parent);
                PERFORM durable.index_history(parent, name);
                EXECUTE pg_catalog.format(
                    'ALTER TABLE durable.%I ATTACH PARTITION durable.%I FOR VALUES FROM (%L) TO (%L)',
                    parent, name, day, day OPERATOR(pg_catalog.+) '1 day'::pg_catalog.interval);
            EXCEPTION
                -- rows of the day are in the default partition already, or
                -- the lock was not to be had now
                WHEN check_violation OR lock_not_available THEN NULL;
            END;
        END LOOP;
    END LOOP;

    IF retention IS NULL THEN
        RETURN;
    END IF;
    -- whole days, oldest first
    FOR part IN
        SELECT c.oid::pg_catalog.regclass::pg_catalog.text AS rel, p.relname AS parent,
               pg_catalog.substring(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                                    'TO \(''([^'']*)''\)')::pg_catalog.timestamptz AS upper_bound
        FROM pg_catalog.pg_inherits i
        JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid
        JOIN pg_catalog.pg_class p ON p.oid OPERATOR(pg_catalog.=) i.inhparent
        WHERE i.inhparent IN ('durable.task_history'::pg_catalog.regclass,
                              'durable.step_history'::pg_catalog.regclass,
                              'durable.event_log'::pg_catalog.regclass)
          AND NOT c.relpartbound IS NULL
          AND pg_catalog.pg_get_expr(c.relpartbound, c.oid) OPERATOR(pg_catalog.<>) 'DEFAULT'
        ORDER BY 3, 2 DESC
    LOOP
        CONTINUE WHEN part.upper_bound OPERATOR(pg_catalog.>) cutoff;
        IF part.parent OPERATOR(pg_catalog.=) 'event_log' THEN
            -- A day of events held by a task still kept is looked at again
            -- ten minutes later, not at every tick: the oldest live task
            -- is found by reading all of them.
            IF held_checked IS NULL THEN
                SELECT coalesce(h.events_checked_at, '-infinity') INTO held_checked
                FROM (SELECT) x LEFT JOIN durable.history_horizon h ON true;
            END IF;
            CONTINUE WHEN held_checked OPERATOR(pg_catalog.>) (now OPERATOR(pg_catalog.-) '10 minutes'::pg_catalog.interval)
                      AND held_checked OPERATOR(pg_catalog.<=) now;
            IF oldest_live IS NULL THEN
                SELECT coalesce(min(t.created_at), 'infinity') INTO oldest_live
                FROM durable.live_tasks t;
            END IF;
            IF part.upper_bound OPERATOR(pg_catalog.>) oldest_live
               OR EXISTS (SELECT FROM durable.task_history h
                          WHERE h.created_at OPERATOR(pg_catalog.<) part.upper_bound) THEN
                INSERT INTO durable.history_horizon AS h (events_checked_at) VALUES (now)
                ON CONFLICT (one) DO UPDATE SET events_checked_at = excluded.events_checked_at;
                held_checked := now;
                CONTINUE;
            END IF;
        END IF;
        BEGIN
            EXECUTE pg_catalog.format('DROP TABLE %s', part.rel);
            IF part.parent OPERATOR(pg_catalog.=) 'task_history' THEN
                INSERT INTO durable.history_horizon AS h (removed_before) VALUES (part.upper_bound)
                ON CONFLICT (one) DO UPDATE
                SET removed_before = GREATEST(h.removed_before, excluded.removed_before);
                task_id := NULL;
                action := pg_catalog.format('removed %s', part.rel);
                RETURN NEXT;
            END IF;
        EXCEPTION
            WHEN lock_not_available THEN NULL;
        END;
    END LOOP;

    -- tasks of the default partitions, a batch at a time
    FOR task_id IN
        WITH doomed AS (
            SELECT h.partition_key, h.task_id FROM durable.task_history_default h
            WHERE h.finished_at OPERATOR(pg_catalog.<) cutoff
            ORDER BY h.finished_at LIMIT batch FOR UPDATE SKIP LOCKED),
        s AS (DELETE FROM durable.step_history_default s USING doomed d
              WHERE s.partition_key OPERATOR(pg_catalog.=) d.partition_key
                AND s.task_id OPERATOR(pg_catalog.=) d.task_id),
        e AS (DELETE FROM durable.event_log e USING doomed d
              WHERE e.partition_key OPERATOR(pg_catalog.=) d.partition_key
                AND e.task_id OPERATOR(pg_catalog.=) d.task_id)
        DELETE FROM durable.task_history_default h USING doomed d
        WHERE h.partition_key OPERATOR(pg_catalog.=) d.partition_key
          AND h.task_id OPERATOR(pg_catalog.=) d.task_id
        RETURNING h.task_id
    LOOP
        action := 'removed';
        RETURN NEXT;
    END LOOP;
    IF FOUND THEN
        INSERT INTO durable.history_horizon AS h (removed_before) VALUES (cutoff)
        ON CONFLICT (one) DO UPDATE
        SET removed_before = GREATEST(h.removed_before, excluded.removed_before);
    END IF;

    -- keys of tasks that are gone
    DELETE FROM durable.task_keys k
    WHERE k.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
        SELECT x.ctid FROM durable.task_keys x
        WHERE x.created_at OPERATOR(pg_catalog.<) cutoff
          AND NOT EXISTS (SELECT FROM durable.tasks t
                          WHERE t.partition_key OPERATOR(pg_catalog.=) x.partition_key
                            AND t.task_id OPERATOR(pg_catalog.=) x.task_id)
        LIMIT batch));
END
$$;
COMMENT ON FUNCTION durable.maintain_history(timestamptz, interval, int) IS
  'make the coming days of history, and remove what is older than retention: whole days, and up to batch tasks of the default partitions';
REVOKE EXECUTE ON FUNCTION durable.maintain_history(timestamptz, interval, int) FROM PUBLIC;

-- the data of 0.1.0: finished tasks with their steps into history (its
-- default partition, until retention removes them), every event into the
-- new event log
INSERT INTO durable.task_history (partition_key, task_id, priority, max_attempts,
    checkpoint_version, steps_in_doubt, class, created_at, deadline, queue_name, idempotency_key,
    request_hash, workflow_version, payload, metadata, checkpoint, result, last_error, stop_code,
    stuck_alarm_at, finished_at, run_at, state, attempt, version, fence, lease_until, heartbeat_at,
    progress_at, lease, owner, progress)
SELECT partition_key, task_id, priority, max_attempts, checkpoint_version, steps_in_doubt, class,
    created_at, deadline, queue_name, idempotency_key, request_hash, workflow_version, payload,
    metadata, checkpoint, result, last_error, stop_code, stuck_alarm_at,
    coalesce(finished_at, created_at), run_at, state, attempt, version, fence, lease_until,
    heartbeat_at, progress_at, lease, owner, progress
FROM durable.tasks_0_1 WHERE state IN ('completed', 'failed', 'cancelled');
INSERT INTO durable.live_tasks (partition_key, task_id, priority, max_attempts,
    checkpoint_version, steps_in_doubt, class, created_at, deadline, queue_name, idempotency_key,
    request_hash, workflow_version, payload, metadata, checkpoint, result, last_error, stop_code,
    stuck_alarm_at, finished_at, run_at, state, attempt, version, fence, lease_until, heartbeat_at,
    progress_at, lease, owner, progress)
SELECT partition_key, task_id, priority, max_attempts, checkpoint_version, steps_in_doubt, class,
    created_at, deadline, queue_name, idempotency_key, request_hash, workflow_version, payload,
    metadata, checkpoint, result, last_error, stop_code, stuck_alarm_at, finished_at, run_at,
    state, attempt, version, fence, lease_until, heartbeat_at, progress_at, lease, owner, progress
FROM durable.tasks_0_1 WHERE state NOT IN ('completed', 'failed', 'cancelled');
ALTER EXTENSION durable DROP TABLE durable.tasks_0_1;
DROP TABLE durable.tasks_0_1;
INSERT INTO durable.step_history
SELECT s.*, t.finished_at FROM durable.live_steps s
JOIN durable.task_history t USING (partition_key, task_id);
DELETE FROM durable.live_steps s USING durable.task_history t
WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id;
INSERT INTO durable.event_log SELECT * FROM durable.events_0_1;
ALTER EXTENSION durable DROP TABLE durable.events_0_1;
DROP TABLE durable.events_0_1;


--
-- The views of operators, made again over both halves (live work where
-- only live work can match).
--
CREATE VIEW durable.queue_stats AS
SELECT q.queue_name, q.paused,
       coalesce(l.ready, 0) AS ready, coalesce(l.waiting, 0) AS waiting,
       coalesce(l.running, 0) AS running, coalesce(l.needs_review, 0) AS needs_review,
       coalesce(h.completed, 0) AS completed, coalesce(h.failed, 0) AS failed,
       coalesce(h.cancelled, 0) AS cancelled,
       l.oldest_due_age, l.oldest_heartbeat_age,
       coalesce(l.expired_leases, 0) AS expired_leases, coalesce(l.stuck, 0) AS stuck
FROM durable.queues q
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE t.state = 'ready') AS ready,
           count(*) FILTER (WHERE t.state = 'waiting') AS waiting,
           count(*) FILTER (WHERE t.state = 'running') AS running,
           count(*) FILTER (WHERE t.state = 'needs_review') AS needs_review,
           now() - min(t.run_at) FILTER (WHERE t.state IN ('ready', 'waiting') AND t.run_at <= now()) AS oldest_due_age,
           now() - min(t.heartbeat_at) FILTER (WHERE t.state = 'running') AS oldest_heartbeat_age,
           count(*) FILTER (WHERE t.state = 'running' AND t.lease_until < now()) AS expired_leases,
           count(*) FILTER (WHERE t.state = 'running' AND q.progress_timeout IS NOT NULL
                              AND t.progress_at < now() - q.progress_timeout) AS stuck
    FROM durable.live_tasks t WHERE t.queue_name = q.queue_name) l ON true
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE t.state = 'completed') AS completed,
           count(*) FILTER (WHERE t.state = 'failed') AS failed,
           count(*) FILTER (WHERE t.state = 'cancelled') AS cancelled
    FROM durable.task_history t WHERE t.queue_name = q.queue_name) h ON true;
COMMENT ON VIEW durable.queue_stats IS 'per queue: tasks by state, the oldest due and running work, expired leases and stuck tasks';

CREATE VIEW durable.stuck_tasks AS
SELECT t.task_id, t.queue_name, t.owner, t.progress, t.progress_at,
       now() - t.progress_at AS without_progress_for, q.progress_timeout,
       t.stuck_alarm_at IS NOT NULL AND t.stuck_alarm_at >= t.progress_at AS alarmed
FROM durable.live_tasks t JOIN durable.queues q ON q.queue_name = t.queue_name
WHERE t.state = 'running' AND q.progress_timeout IS NOT NULL
  AND t.progress_at < now() - q.progress_timeout;
COMMENT ON VIEW durable.stuck_tasks IS 'running tasks whose lease is renewed while their progress has not moved for longer than the queue''s progress_timeout';

CREATE VIEW durable.review_queue AS
SELECT t.task_id, t.queue_name, t.class, t.attempt, t.owner AS last_owner,
       s.step, s.class AS step_class, s.state AS step_state, s.idempotency_key, s.receipt,
       e.at AS since, e.kind AS reason, e.detail->>'action' AS decided
FROM durable.live_tasks t
LEFT JOIN durable.live_steps s ON s.partition_key = t.partition_key AND s.task_id = t.task_id
                              AND s.state IN ('started', 'unknown')
LEFT JOIN LATERAL (SELECT * FROM durable.events e
                   WHERE e.partition_key = t.partition_key AND e.task_id = t.task_id
                     AND e.state = 'needs_review'
                   ORDER BY e.seq DESC LIMIT 1) e ON true
WHERE t.state = 'needs_review';
COMMENT ON VIEW durable.review_queue IS 'tasks waiting for a person, one row per step in doubt, and why they are here; settle them with durable_resolve()';

CREATE VIEW durable.metrics AS
WITH per_task AS (
    SELECT t.queue_name, t.partition_key, t.task_id, t.state,
           count(*) FILTER (WHERE e.kind = 'claimed') AS claims,
           min(e.at) FILTER (WHERE e.kind = 'lease_expired') AS first_expiry,
           min(e.at) FILTER (WHERE e.kind = 'completed') AS completed_at,
           bool_or(e.state = 'needs_review') AS escalated
    FROM durable.tasks t
    JOIN durable.events e ON e.partition_key = t.partition_key AND e.task_id = t.task_id
    GROUP BY t.queue_name, t.partition_key, t.task_id, t.state
), effects AS (
    SELECT t.queue_name, count(*) AS duplicate_side_effects
    FROM (SELECT e.partition_key, e.task_id, e.step
          FROM durable.events e
          WHERE e.kind = 'receipt_recorded' AND e.detail->>'effect_id' IS NOT NULL
          GROUP BY e.partition_key, e.task_id, e.step
          HAVING count(DISTINCT e.detail->>'effect_id') > 1) d
    JOIN durable.tasks t USING (partition_key, task_id)
    GROUP BY t.queue_name
), outcomes AS (
    SELECT t.queue_name,
           count(*) FILTER (WHERE s.state = 'unknown'
                              OR (s.state = 'started' AND t.state <> 'running')) AS ambiguous,
           count(*) AS steps
    FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id)
    GROUP BY t.queue_name
), lag AS (
    SELECT t.queue_name, now() - min(t.lease_until) AS reconciliation_lag
    FROM durable.live_tasks t WHERE t.state = 'running' AND t.lease_until < now()
    GROUP BY t.queue_name
)
SELECT q.queue_name,
       count(p.task_id) AS tasks,
       coalesce(max(f.duplicate_side_effects), 0) AS duplicate_side_effects,
       count(p.task_id) FILTER (WHERE p.first_expiry IS NOT NULL) AS recoveries,
       round(avg((p.state = 'completed')::int) FILTER (WHERE p.first_expiry IS NOT NULL), 3) AS recovery_success_rate,
       avg(p.completed_at - p.first_expiry) FILTER (WHERE p.first_expiry IS NOT NULL AND p.completed_at IS NOT NULL) AS mean_recovery_time,
       round(max(o.ambiguous)::numeric / nullif(max(o.steps), 0), 3) AS ambiguous_outcome_rate,
       round(avg(p.escalated::int), 3) AS human_escalation_rate,
       round(avg(p.claims), 3) AS claims_per_task,
       coalesce(max(l.reconciliation_lag), '0') AS reconciliation_lag
FROM durable.queues q
LEFT JOIN per_task p ON p.queue_name = q.queue_name
LEFT JOIN effects f ON f.queue_name = q.queue_name
LEFT JOIN outcomes o ON o.queue_name = q.queue_name
LEFT JOIN lag l ON l.queue_name = q.queue_name
GROUP BY q.queue_name;
COMMENT ON VIEW durable.metrics IS 'per queue, over the tasks retained: duplicate side effects, recovery success rate and mean time, ambiguous outcome rate, human escalation rate, claims per task, reconciliation lag';

GRANT SELECT ON durable.queue_stats, durable.stuck_tasks, durable.review_queue, durable.metrics
    TO durable_operator, pg_monitor;

-- verify reads both halves; events left of tasks that retention removed
-- (older than the horizon) are no orphans
CREATE OR REPLACE FUNCTION @extschema@.durable_verify()
RETURNS TABLE (task_id bigint, problem text)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    WITH history AS (
        SELECT e.partition_key, e.task_id, count(*) AS events, max(e.seq) AS last_seq,
               max(e.at) AS last_at,
               (array_agg(e.state ORDER BY e.seq DESC))[1] AS state,
               (array_agg(e.fence ORDER BY e.seq DESC))[1] AS fence
        FROM durable.events e GROUP BY e.partition_key, e.task_id
    ), step_history AS (
        SELECT e.partition_key, e.task_id, e.step,
               (array_agg(coalesce(e.detail->>'to', 'planned') ORDER BY e.seq DESC))[1] AS state
        FROM durable.events e WHERE e.step IS NOT NULL
        GROUP BY e.partition_key, e.task_id, e.step
    )
    SELECT t.task_id, format('row says %s with fence %s, events say %s with fence %s',
                             t.state, t.fence, coalesce(h.state::text, 'nothing'), h.fence)
    FROM durable.tasks t LEFT JOIN history h USING (partition_key, task_id)
    WHERE h.state IS DISTINCT FROM t.state OR h.fence IS DISTINCT FROM t.fence
    UNION ALL
    SELECT t.task_id, format('version %s, but %s events up to seq %s', t.version, h.events, h.last_seq)
    FROM durable.tasks t JOIN history h USING (partition_key, task_id)
    WHERE h.events <> t.version OR h.last_seq <> t.version
    UNION ALL
    SELECT s.task_id, format('step %s is %s, its events say %s', s.step, s.state, coalesce(sh.state, 'nothing'))
    FROM durable.steps s LEFT JOIN step_history sh USING (partition_key, task_id, step)
    WHERE sh.state IS DISTINCT FROM s.state::text
    UNION ALL
    SELECT t.task_id, format('%s steps in doubt counted, %s found', t.steps_in_doubt, count(s.step))
    FROM durable.tasks t
    LEFT JOIN durable.steps s ON s.partition_key = t.partition_key AND s.task_id = t.task_id
                             AND s.state IN ('started', 'unknown')
    GROUP BY t.partition_key, t.task_id, t.steps_in_doubt
    HAVING count(s.step) <> t.steps_in_doubt
    UNION ALL
    SELECT l.task_id, format('task is %s but kept among the live tasks', l.state)
    FROM durable.live_tasks l WHERE l.state IN ('completed', 'failed', 'cancelled')
    UNION ALL
    SELECT a.task_id, format('task is %s but kept in history', a.state)
    FROM durable.task_history a WHERE a.state NOT IN ('completed', 'failed', 'cancelled')
    UNION ALL
    SELECT h.task_id, 'events of a task that does not exist'
    FROM history h LEFT JOIN durable.tasks t USING (partition_key, task_id)
    WHERE t.task_id IS NULL
      AND h.last_at >= coalesce((SELECT removed_before FROM durable.history_horizon), '-infinity')
    ORDER BY 1, 2
$$;
