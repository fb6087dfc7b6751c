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
                      ', ' ORDER BY s.ordinal DESC)
    INTO doubt
    FROM durable.steps s
    WHERE s.partition_key = t.partition_key AND s.task_id = t.task_id
      AND s.state IN ('started', 'unknown');

    recommended := CASE
        WHEN t.state = 'needs_review' AND doubt IS NOT NULL THEN jsonb_build_object(
            'action', 'resolve',
            'reason', format('the outcome of %s is unknown: ask the external system about each, then durable_resolve(%s, ''mark_committed'' or ''mark_not_executed'', ..., step => ...) for each',
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
