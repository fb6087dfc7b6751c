CREATE OR REPLACE FUNCTION @extschema@.durable_stream_read(
    task_id bigint,
    stream text,
    after bigint DEFAULT 0,
    max int DEFAULT 1000)
RETURNS TABLE (seq bigint, chunk jsonb, at timestamptz)
AS 'MODULE_PATHNAME', 'durable_stream_read'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_stream_read(bigint, text, bigint, int) IS
  'the chunks of a task''s stream after a position, at most max, in order; a NULL chunk is its end (the stream was closed, or its task finished); needs the enqueue or work grant of the task''s queue where it is restricted';
REVOKE ALL ON FUNCTION @extschema@.durable_stream_read(bigint, text, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_stream_read(bigint, text, bigint, integer) TO durable_producer, durable_worker;
