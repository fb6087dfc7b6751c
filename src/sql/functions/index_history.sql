-- The partitioned tables have no index of their own: each partition has
-- its own, made with it (durable.index_history).  pg_dump dumps the days
-- with their rows and indexes; were the indexes the parents', a restore
-- would find them made already by CREATE EXTENSION when it attached a
-- dumped day, and fail on the day's own.
CREATE OR REPLACE FUNCTION durable.index_history(parent text, part text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- the settings its text forms follow are pinned (docs/design.md section 7;
-- test/t/015_hostile_settings.pl checks every function in SQL or PL/pgSQL)
SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
SET TimeZone = 'UTC' SET extra_float_digits = 1
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
REVOKE ALL ON FUNCTION durable.index_history(text, text) FROM PUBLIC;
