--
-- The database the isolation specs run in (make installcheck's test-db):
-- made again as pg_regress makes its own, with the settings below and
-- durable, and with the specs' common teardown (test/isolation/reset.sql)
-- loaded.  psql variables: db, its name; locale, its collation and
-- character type, or empty for the server's (tools/test's *-en_US suites
-- run regress in it too).
--
SET client_min_messages = warning;
SELECT format('DROP DATABASE IF EXISTS %I', :'db') \gexec
SELECT format('CREATE DATABASE %I TEMPLATE template0', :'db')
       || CASE WHEN :'locale' <> '' THEN format(' ENCODING %L LOCALE %L', 'UTF8', :'locale') ELSE '' END
\gexec
SELECT format('ALTER DATABASE %I SET %s TO %L', :'db', name, value)
FROM (VALUES ('lc_messages', 'C'), ('lc_monetary', 'C'), ('lc_numeric', 'C'),
             ('lc_time', 'C'), ('bytea_output', 'hex'),
             ('timezone_abbreviations', 'Default')) s (name, value)
\gexec
\c :"db"
CREATE EXTENSION durable;
\ir isolation/reset.sql
