--
-- 7. The recovery package says which versions a task needs and which are
--    alive, and what to do about a task no worker runs.
--
CREATE OR REPLACE FUNCTION @extschema@.durable_recovery_package(task_id bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
-- with its owner's rights, so that a queue operator reads what the package
-- needs; durable.tasks still shows it the tasks of its own queues only
SET search_path = pg_catalog, pg_temp
-- the settings its text forms follow are pinned (docs/design.md section 7;
-- test/t/015_hostile_settings.pl checks every function in SQL or PL/pgSQL)
SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
SET TimeZone = 'UTC' SET extra_float_digits = 1
AS $$
DECLARE
    t durable.tasks;
    doubt text;
    in_doubt bigint;
    package jsonb;
    recommended jsonb;
    pending record;
    alive jsonb;
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

    SELECT w.key AS name, w.value ->> 'kind' AS kind, w.value ->> 'until' AS until,
           w.value -> 'args' ->> 'event' AS event,
           coalesce(w.value -> 'args' ->> 'queue', t.queue_name) AS event_queue
    INTO pending
    FROM jsonb_each(coalesce(t.waits, '{}')) w
    WHERE w.value ->> 'status' IN ('sleeping', 'waiting');

    -- the versions the queue's live workers run (NULL: claims as before)
    SELECT coalesce(jsonb_agg(DISTINCT coalesce(w.versions, '"any"')), '[]')
    INTO alive
    FROM durable.workers w
    WHERE w.queue_name = t.queue_name AND w.alive;

    recommended := CASE
        WHEN t.state = 'needs_review' AND t.stop_code = 'version_unavailable' AND in_doubt = 0 THEN jsonb_build_object(
            'action', 'migrate',
            'reason', format('no worker runs the versions %s the task is pinned to (alive: %s): deploy a worker that runs them, durable_migrate(%s, %L, ...) to versions a worker runs, or durable_resolve(%s, ''cancel'', ...)',
                             t.versions, alive, t.task_id, t.versions, t.task_id))
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
        WHEN t.state = 'waiting' AND pending.name IS NOT NULL THEN jsonb_build_object(
            'action', 'wait',
            'reason', format('the task waits (%s %s)%s: %s', pending.kind, pending.name,
                             coalesce(' until ' || pending.until, ''),
                             CASE pending.kind
                                 WHEN 'sleep' THEN 'its timer wakes it'
                                 WHEN 'event' THEN format('durable_emit(%L, %L, ...) wakes it',
                                                          pending.event_queue, pending.event)
                                 ELSE 'the last of its children to finish wakes it' END))
        WHEN t.state = 'waiting' AND t.run_at = 'infinity' AND in_doubt > 0 THEN jsonb_build_object(
            'action', 'reconcile',
            'reason', format('a reconcile handler is to look up the outcome of %s (durable_claim_reconcile)', doubt))
        ELSE jsonb_build_object('action', 'none', 'reason', format('the task is %s', t.state))
    END;

    SELECT jsonb_build_object(
        'task', to_jsonb(t) - 'checkpoint',
        'checkpoint', jsonb_build_object('version', t.checkpoint_version, 'value', t.checkpoint),
        'versions', jsonb_build_object('pinned', t.versions, 'alive', alive),
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
        'reservations', coalesce((SELECT jsonb_agg(jsonb_build_object(
                                      'step', r.step, 'amount', r.amount, 'budgets', r.budgets,
                                      'reserved_at', r.reserved_at) ORDER BY r.step)
                                  FROM durable.step_reservations r
                                  WHERE r.partition_key = t.partition_key AND r.task_id = t.task_id), '[]'),
        'recommended_action', recommended)
    INTO package;
    RETURN package;
END
$$;
COMMENT ON FUNCTION @extschema@.durable_recovery_package(bigint) IS
  'everything an operator needs to decide about a task: the task, its checkpoint, event history, operation ids, idempotency keys, confirmed and unknown side effects, what its steps in doubt hold of its spend budgets, and the recommended next action';
REVOKE ALL ON FUNCTION @extschema@.durable_recovery_package(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_recovery_package(bigint) TO durable_operator, durable_queue_operator;
