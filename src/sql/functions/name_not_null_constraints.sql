--
-- PostgreSQL 18 keeps each NOT NULL of a table as a constraint with a
-- name, that of the table it was first made on, or copied from by LIKE,
-- and the name stays when the table is renamed.  An installation updated
-- from an older version would keep the names of tables renamed since
-- (durable.steps is durable.live_steps since 0.2.0) where a fresh one has
-- others, and the two would differ (test/t/030_schema_identity.pl).  So
-- every installation and every update names them as PostgreSQL names a
-- new table's, <table>_<column>_not_null, where that fits in a name;
-- partitions follow their tables' names.  durable never names one in a
-- statement (it says ALTER COLUMN ... SET or DROP NOT NULL).  Before
-- PostgreSQL 18 there are none.  This file calls the function too: it is
-- in both the install script and the update script, after the tables.
--
CREATE OR REPLACE FUNCTION durable.name_not_null_constraints()
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- the settings its text forms follow are pinned (docs/design.md section 7;
-- test/t/015_hostile_settings.pl checks every function in SQL or PL/pgSQL)
SET DateStyle = 'ISO, MDY' SET IntervalStyle = 'postgres'
SET TimeZone = 'UTC' SET extra_float_digits = 1
AS $$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT k.conrelid::pg_catalog.regclass AS tab, k.conname,
               r.relname OPERATOR(pg_catalog.||) '_' OPERATOR(pg_catalog.||) a.attname
                   OPERATOR(pg_catalog.||) '_not_null' AS named
        FROM pg_catalog.pg_constraint k
        JOIN pg_catalog.pg_class r ON r.oid OPERATOR(pg_catalog.=) k.conrelid
        JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) k.conrelid
                                      AND a.attnum OPERATOR(pg_catalog.=) k.conkey[1]
        WHERE k.contype OPERATOR(pg_catalog.=) 'n'
          AND k.coninhcount OPERATOR(pg_catalog.=) 0
          AND r.relnamespace OPERATOR(pg_catalog.=) 'durable'::pg_catalog.regnamespace
        ORDER BY r.relname, a.attnum
    LOOP
        CONTINUE WHEN c.conname OPERATOR(pg_catalog.=) c.named
                   OR pg_catalog.octet_length(c.named) OPERATOR(pg_catalog.>=) 64;
        EXECUTE pg_catalog.format('ALTER TABLE %s RENAME CONSTRAINT %I TO %I',
                                  c.tab, c.conname, c.named);
    END LOOP;
END
$$;
COMMENT ON FUNCTION durable.name_not_null_constraints() IS
  'names the NOT NULL constraints of durable''s tables <table>_<column>_not_null (PostgreSQL 18), as a fresh installation has them';
REVOKE ALL ON FUNCTION durable.name_not_null_constraints() FROM PUBLIC;
SELECT durable.name_not_null_constraints();
