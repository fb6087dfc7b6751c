-- Code a database owner plants where a client's search_path finds it, for
-- the tests that drive the console and the clients as a role whose
-- search_path is "hostile, public, pg_catalog" (issue 37): every statement
-- they send must resolve only to pg_catalog and durable's objects.
--
-- Generated from the catalog, not from a list of names the clients use:
--   * in schema hostile, a copy of every operator and function of pg_catalog
--     (same name, same argument types), of count(*) and of every function of
--     the extension, and a domain over every base type of pg_catalog (its
--     CHECK runs on every cast to it): with hostile first in the path each
--     wins over the original wherever a statement names it unqualified;
--   * in schema public, for the operators clients write, an overload for
--     every pair of common types that pg_catalog has no exact match for
--     (such as &(bigint, integer)): an exact match wins over a coercion even
--     when pg_catalog comes first in the path.
-- Each records that it ran (hostile.hit) when the session's role is one of
-- hostile.targets (the roles under test; what the tests' own superuser
-- sessions run is not counted) and computes what it shadows where it can.
-- hostile.hits counts outside transactions (a sequence), so that a
-- statement that fails later does not hide that something ran.

CREATE SCHEMA hostile;
CREATE SEQUENCE hostile.hits;
CREATE TABLE hostile.targets (role name PRIMARY KEY);
CREATE TABLE hostile.hit_log (role name NOT NULL, shadow text NOT NULL);
GRANT USAGE ON SCHEMA hostile TO PUBLIC;
GRANT USAGE, UPDATE ON SEQUENCE hostile.hits TO PUBLIC;
GRANT SELECT ON hostile.targets TO PUBLIC;
GRANT INSERT ON hostile.hit_log TO PUBLIC;

CREATE FUNCTION hostile.hit(shadow text) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF EXISTS (SELECT FROM hostile.targets t WHERE t.role OPERATOR(pg_catalog.=) session_user) THEN
		RAISE WARNING 'hostile code ran: %', shadow;
		BEGIN
			PERFORM pg_catalog.nextval('hostile.hits'::pg_catalog.regclass);
			INSERT INTO hostile.hit_log (role, shadow) VALUES (session_user, shadow);
		EXCEPTION WHEN OTHERS THEN
			NULL;	-- a read-only transaction: the warning says it
		END;
	END IF;
	RETURN true;
END $$;

-- what ran, as the tests report it
CREATE FUNCTION hostile.report() RETURNS text
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
	SELECT pg_catalog.format('%s shadowing object(s) ran%s',
		(SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END FROM hostile.hits s),
		(SELECT COALESCE(': ' OPERATOR(pg_catalog.||) pg_catalog.string_agg(DISTINCT h.role OPERATOR(pg_catalog.||) ' ran ' OPERATOR(pg_catalog.||) h.shadow, '; '), '')
		 FROM hostile.hit_log h))
$$;
CREATE FUNCTION hostile.reset() RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
	SELECT pg_catalog.setval('hostile.hits'::pg_catalog.regclass, 1, false);
	DELETE FROM hostile.hit_log;
$$;

DO $gen$
DECLARE
	o record;
	f record;
	l regtype;
	r regtype;
	res regtype;
	n int := 0;
	skipped int := 0;
	body text;
	ext_schema oid := (SELECT e.extnamespace FROM pg_catalog.pg_extension e WHERE e.extname = 'durable');
	common regtype[] := ARRAY['int2', 'int4', 'int8', 'numeric', 'float8', 'text', 'varchar', 'name',
		'bool', 'oid', 'jsonb', 'json', 'timestamptz', 'timestamp', 'interval', 'text[]', 'int4[]',
		'int8[]']::regtype[]
		|| ARRAY(SELECT t.oid::regtype FROM pg_catalog.pg_type t
				 WHERE t.typnamespace IN ('durable'::regnamespace, ext_schema)
				   AND t.typtype IN ('e', 'd') ORDER BY t.oid);
BEGIN
	-- operators: copies in hostile
	FOR o IN SELECT p.oid, p.oprname, p.oprleft::regtype AS l, p.oprright::regtype AS r,
					p.oprresult::regtype AS res
			 FROM pg_catalog.pg_operator p
			 WHERE p.oprnamespace = 'pg_catalog'::regnamespace ORDER BY p.oid LOOP
		BEGIN
			IF o.l = 0 THEN
				EXECUTE format('CREATE FUNCTION hostile.op_%s(b %s) RETURNS %s LANGUAGE plpgsql AS '
							   '$f$BEGIN PERFORM hostile.hit(%L); RETURN OPERATOR(pg_catalog.%s) b; END$f$',
							   o.oid, o.r, o.res, format('operator %s(none, %s)', o.oprname, o.r), o.oprname);
				EXECUTE format('CREATE OPERATOR hostile.%s (RIGHTARG = %s, FUNCTION = hostile.op_%s)',
							   o.oprname, o.r, o.oid);
			ELSE
				EXECUTE format('CREATE FUNCTION hostile.op_%s(a %s, b %s) RETURNS %s LANGUAGE plpgsql AS '
							   '$f$BEGIN PERFORM hostile.hit(%L); RETURN a OPERATOR(pg_catalog.%s) b; END$f$',
							   o.oid, o.l, o.r, o.res, format('operator %s(%s, %s)', o.oprname, o.l, o.r),
							   o.oprname);
				EXECUTE format('CREATE OPERATOR hostile.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = hostile.op_%s)',
							   o.oprname, o.l, o.r, o.oid);
			END IF;
			n := n + 1;
		EXCEPTION WHEN OTHERS THEN
			skipped := skipped + 1;
		END;
	END LOOP;
	RAISE NOTICE 'hostile: % operators of pg_catalog copied (% skipped)', n, skipped;

	-- operators: exact-match overloads in public for the pairs pg_catalog
	-- reaches only through a coercion
	n := 0;
	FOR o IN SELECT DISTINCT p.oprname FROM pg_catalog.pg_operator p
			 WHERE p.oprnamespace = 'pg_catalog'::regnamespace AND p.oprleft <> 0
			   AND p.oprname IN ('=', '<>', '<', '>', '<=', '>=', '&', '|', '%', '+', '-', '*', '/',
								 '||', '->', '->>', '#>', '#>>', '@>', '<@', '?', '~~', '&&')
			 ORDER BY 1 LOOP
		FOREACH l IN ARRAY common LOOP
			FOREACH r IN ARRAY common LOOP
				CONTINUE WHEN EXISTS (SELECT FROM pg_catalog.pg_operator p
									  WHERE p.oprname = o.oprname AND p.oprleft = l AND p.oprright = r);
				BEGIN
					EXECUTE format('SELECT pg_catalog.pg_typeof(NULL::%s OPERATOR(pg_catalog.%s) NULL::%s)',
								   l, o.oprname, r) INTO res;
				EXCEPTION WHEN OTHERS THEN
					CONTINUE;
				END;
				EXECUTE format('CREATE FUNCTION public.hostile_op_%s(a %s, b %s) RETURNS %s LANGUAGE plpgsql AS '
							   '$f$BEGIN PERFORM hostile.hit(%L); RETURN a OPERATOR(pg_catalog.%s) b; END$f$',
							   n, l, r, res, format('operator public.%s(%s, %s)', o.oprname, l, r), o.oprname);
				EXECUTE format('CREATE OPERATOR public.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = public.hostile_op_%s)',
							   o.oprname, l, r, n);
				n := n + 1;
			END LOOP;
		END LOOP;
	END LOOP;
	RAISE NOTICE 'hostile: % overloads of operators in public', n;

	-- functions of pg_catalog and of the extension: copies in hostile
	n := 0;
	skipped := 0;
	FOR f IN SELECT p.oid, p.proname, p.proretset, p.prorettype,
					pg_catalog.pg_get_function_arguments(p.oid) AS args,
					pg_catalog.pg_get_function_result(p.oid) AS result,
					p.pronamespace = ext_schema AS api
			 FROM pg_catalog.pg_proc p
			 WHERE p.prokind = 'f'
			   AND (p.pronamespace = 'pg_catalog'::regnamespace
					OR EXISTS (SELECT FROM pg_catalog.pg_depend d
							   WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid
								 AND d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.deptype = 'e'
								 AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e
												   WHERE e.extname = 'durable')))
			 ORDER BY p.oid LOOP
		body := CASE WHEN f.proretset OR f.prorettype = 'void'::regtype OR f.result ~ '^TABLE\(' OR f.args ~ '(^|, )(INOUT|OUT) '
					 THEN 'RETURN;' ELSE 'RETURN NULL;' END;
		BEGIN
			EXECUTE format('CREATE FUNCTION hostile.%I(%s) RETURNS %s LANGUAGE plpgsql AS '
						   '$f$BEGIN PERFORM hostile.hit(%L); %s END$f$',
						   f.proname, f.args, f.result,
						   format('function %s(%s)', f.proname, f.args), body);
			n := n + 1;
		EXCEPTION WHEN OTHERS THEN
			skipped := skipped + 1;
		END;
	END LOOP;
	RAISE NOTICE 'hostile: % functions copied (% skipped)', n, skipped;

	-- count(*)
	CREATE FUNCTION hostile.count_star(state bigint) RETURNS bigint LANGUAGE plpgsql
		AS $f$BEGIN PERFORM hostile.hit('aggregate count(*)'); RETURN state OPERATOR(pg_catalog.+) 1; END$f$;
	CREATE AGGREGATE hostile.count(*) (SFUNC = hostile.count_star, STYPE = bigint, INITCOND = '0');

	-- types: a domain over each base type of pg_catalog, whose CHECK runs
	n := 0;
	FOR f IN SELECT t.typname FROM pg_catalog.pg_type t
			 WHERE t.typnamespace = 'pg_catalog'::regnamespace AND t.typtype = 'b'
			   AND t.typcategory <> 'A' AND t.typisdefined ORDER BY t.oid LOOP
		BEGIN
			EXECUTE format('CREATE DOMAIN hostile.%I AS pg_catalog.%I CHECK (hostile.hit(%L))',
						   f.typname, f.typname, format('type %s', f.typname));
			n := n + 1;
		EXCEPTION WHEN OTHERS THEN
			NULL;
		END;
	END LOOP;
	RAISE NOTICE 'hostile: % domains over base types', n;
END
$gen$;
