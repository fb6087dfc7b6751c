-- whether a worker that runs runs (names to a version or a list of them)
-- runs a task pinned to pinned; the claims' filter (pure/versions.c)
CREATE OR REPLACE FUNCTION durable.versions_run(pinned jsonb, runs jsonb)
RETURNS boolean
AS 'MODULE_PATHNAME', 'durable_versions_run'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION durable.versions_run(jsonb, jsonb) IS
  'whether a worker that runs these versions (names to a version or a list of versions) runs a task pinned to those';
REVOKE ALL ON FUNCTION durable.versions_run(jsonb, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION durable.versions_run(jsonb, jsonb) TO durable_operator;
