CREATE SCHEMA durable;
COMMENT ON SCHEMA durable IS 'durable''s tables, views and internal functions; change state only through the durable_* API';
REVOKE ALL ON SCHEMA durable FROM PUBLIC;

--
-- Roles (docs/design.md section 9).  Roles are cluster-wide, so a second database
-- installing durable finds them already there.
--
DO $roles$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['durable_producer', 'durable_worker', 'durable_operator',
                             'durable_queue_operator'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) r) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END
$roles$;

GRANT USAGE ON SCHEMA durable TO durable_operator;
-- pg_monitor reads the metrics views it was granted; it needs the schema
-- too, or every read is 42501.  Only the views: the tables stay closed to
-- it.
GRANT USAGE ON SCHEMA durable TO pg_monitor;
-- a queue operator reads the views of the queues in its scope only
-- (durable.queues_in_scope())
GRANT USAGE ON SCHEMA durable TO durable_queue_operator;
