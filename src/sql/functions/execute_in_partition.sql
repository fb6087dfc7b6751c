--
-- On Citus, a statement of one partition called on a node that does not
-- hold the partition's shards runs on the node that does, as one call of
-- this function that Citus delegates there by its first argument
-- (src/store/delegate.c).  Not part of the API: only the owner calls it,
-- from within durable's functions.
--
CREATE OR REPLACE FUNCTION durable.execute_in_partition(partition int, statement text,
                                             args bytea[], expected int)
RETURNS SETOF record
LANGUAGE C STRICT VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'durable_execute_in_partition';
REVOKE ALL ON FUNCTION durable.execute_in_partition(integer, text, bytea[], integer) FROM PUBLIC;
