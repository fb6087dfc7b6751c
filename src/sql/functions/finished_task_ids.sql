-- Pages of a queue's history for a reader of the scoped views:
-- durable.finished_tasks is a security barrier, so a query over it cannot
-- read the primary key in order (PostgreSQL plans a barrier view on its
-- own, without the ORDER BY and LIMIT of the query around it) and sorts
-- every finished task of the partition instead.  This reads the ids in
-- key order with the owner's rights, for a queue in the caller's scope
-- only (durable.queue_in_scope tests the calling role, not the owner);
-- the rows are then read through the view by id.

-- The arguments of a page of history, checked, and whether the queue is
-- in the caller's scope (durable.queue_in_scope tests the calling role,
-- also under the owner's rights).
CREATE OR REPLACE FUNCTION durable.history_page_in_scope(queue text, partition_keys integer[], n integer)
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
SET TimeZone = 'UTC' SET extra_float_digits = 1
AS $$
BEGIN
    IF queue IS NULL OR partition_keys IS NULL OR n IS NULL THEN
        RAISE EXCEPTION 'queue, partition_keys and n must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF n OPERATOR(pg_catalog.<) 1 OR n OPERATOR(pg_catalog.>) 10000 THEN
        RAISE EXCEPTION 'n must be between 1 and 10000, not %', n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN durable.queue_in_scope(queue);
END
$$;
COMMENT ON FUNCTION durable.history_page_in_scope(text, integer[], integer) IS
  'checks the arguments of durable.finished_task_ids and durable.dead_letter_ids, and whether the caller may see the queue';
REVOKE ALL ON FUNCTION durable.history_page_in_scope(text, integer[], integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION durable.finished_task_ids(
    queue text, partition_keys integer[], states durable.task_state[] DEFAULT NULL,
    before bigint DEFAULT NULL, since bigint DEFAULT NULL, n integer DEFAULT 50)
RETURNS SETOF bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- the settings its text forms follow are pinned (docs/design.md section 7;
-- test/t/015_hostile_settings.pl checks every function in SQL or PL/pgSQL)
SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
SET TimeZone = 'UTC' SET extra_float_digits = 1
AS $$
BEGIN
    IF NOT durable.history_page_in_scope(queue, partition_keys, n) THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT h.task_id
    FROM pg_catalog.unnest(partition_keys) AS k(partition_key),
    LATERAL (SELECT t.task_id FROM durable.task_history t
             WHERE t.partition_key OPERATOR(pg_catalog.=) k.partition_key
               AND t.queue_name OPERATOR(pg_catalog.=) queue
               AND (states IS NULL OR t.state OPERATOR(pg_catalog.=) ANY (states))
               AND (before IS NULL OR t.task_id OPERATOR(pg_catalog.<) before)
               AND (since IS NULL OR t.task_id OPERATOR(pg_catalog.>=) since)
             ORDER BY t.task_id DESC LIMIT n) h
    ORDER BY h.task_id DESC LIMIT n;
END
$$;
COMMENT ON FUNCTION durable.finished_task_ids(text, integer[], durable.task_state[], bigint, bigint, integer) IS
  'up to n ids of finished tasks of queue in the partitions given, newest first, of the states given (NULL: any), below before and at or above since; none for a queue the caller may not see';
REVOKE ALL ON FUNCTION durable.finished_task_ids(text, integer[], durable.task_state[], bigint, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION durable.finished_task_ids(text, integer[], durable.task_state[], bigint, bigint, integer)
    TO durable_operator, durable_queue_operator;

-- The same for a queue's dead letters, newest failure first: the ids of
-- its failed tasks by the index of them, from before the failure at
-- failed_before (and task before_id, for ties) when given.
CREATE OR REPLACE FUNCTION durable.dead_letter_ids(
    queue text, partition_keys integer[], failed_before timestamptz DEFAULT NULL,
    before_id bigint DEFAULT NULL, n integer DEFAULT 50)
RETURNS SETOF bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
SET TimeZone = 'UTC' SET extra_float_digits = 1
AS $$
BEGIN
    IF NOT durable.history_page_in_scope(queue, partition_keys, n) THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT d.task_id
    FROM pg_catalog.unnest(partition_keys) AS k(partition_key),
    LATERAL (SELECT t.task_id, t.finished_at FROM durable.task_history t
             WHERE t.partition_key OPERATOR(pg_catalog.=) k.partition_key
               AND t.queue_name OPERATOR(pg_catalog.=) queue
               AND t.state OPERATOR(pg_catalog.=) 'failed'
               AND (failed_before IS NULL
                    OR (t.finished_at, t.task_id) OPERATOR(pg_catalog.<)
                       (failed_before, COALESCE(before_id, 0)))
             ORDER BY t.finished_at DESC, t.task_id DESC LIMIT n) d
    ORDER BY d.finished_at DESC, d.task_id DESC LIMIT n;
END
$$;
COMMENT ON FUNCTION durable.dead_letter_ids(text, integer[], timestamp with time zone, bigint, integer) IS
  'up to n ids of dead letters (failed tasks) of queue in the partitions given, newest failure first, before (failed_before, before_id); none for a queue the caller may not see';
REVOKE ALL ON FUNCTION durable.dead_letter_ids(text, integer[], timestamp with time zone, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION durable.dead_letter_ids(text, integer[], timestamp with time zone, bigint, integer)
    TO durable_operator, durable_queue_operator;
