CREATE OR REPLACE FUNCTION @extschema@.durable_stream_append(
    task_id bigint,
    fence bigint,
    stream text,
    chunk jsonb)
RETURNS bigint
AS 'MODULE_PATHNAME', 'durable_stream_append'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_stream_append(bigint, bigint, text, jsonb) IS
  'append a chunk to a stream of the running task held under fence; returns its position (1, 2, ...); NOTIFY durable_stream ''<task_id>'' at commit';
REVOKE ALL ON FUNCTION @extschema@.durable_stream_append(bigint, bigint, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_stream_append(bigint, bigint, text, jsonb) TO durable_worker;
