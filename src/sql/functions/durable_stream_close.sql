CREATE OR REPLACE FUNCTION @extschema@.durable_stream_close(
    task_id bigint,
    fence bigint,
    stream text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'durable_stream_close'
LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.durable_stream_close(bigint, bigint, text) IS
  'close a stream of the running task held under fence (again: nothing changes); returns the position of its end, a NULL chunk';
REVOKE ALL ON FUNCTION @extschema@.durable_stream_close(bigint, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.durable_stream_close(bigint, bigint, text) TO durable_worker;
