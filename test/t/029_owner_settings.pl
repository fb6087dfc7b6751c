# Nothing a database owner or a role sets stops the reconciler (docs/design.md
# section 7): every setting ALTER DATABASE ... SET accepts (generated from
# pg_settings, context user or superuser, and the two it does not show,
# role and session_authorization) is set to hostile values, on the
# reconciler's database and on its role at once, in three rounds (numbers
# at their minimum, at their maximum, at their smallest positive value;
# enums at other values than their default; bools flipped; strings at a
# hostile value where one exists), the reconciler is restarted under them,
# and it must settle an expired lease without restarting again.  Then the
# four cases of issue 37 one by one:
#
# 1. a non-superuser owner's ALTER DATABASE ... SET role (the reconciler
#    acted as that role: "permission denied for schema durable");
# 2. exit_on_error with a part of the tick that fails (the schedule whose
#    occurrence key another request took): the part, isolated, killed it;
# 6. vacuum_cost_* making its own VACUUM of durable.live_tasks crawl, and
#    no tick until it ends;
# 9. default_tablespace = pg_global and a default_table_access_method of
#    another name: no day of history could be made (the tick's and a
#    session's durable.maintain_history), or one made in that method.
#
# Before the fix the generated rounds failed on role and
# session_authorization, and the four cases each failed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);
use DurableNode;

# autovacuum off: the vacuum of case 6 is the reconciler's own
my $node = DurableNode::new_node('owner', "durable.reconcile_interval = '100ms'",
	"autovacuum = off");
my $superuser = $node->safe_psql('postgres', 'SELECT current_user');

# The test's own sessions run as tester, whose own settings (a role's
# override its database's) give back the server's value of each setting
# the rounds make hostile.
$node->safe_psql('postgres', q{
	CREATE ROLE tester LOGIN SUPERUSER;
	CREATE ROLE keeper LOGIN SUPERUSER;
	CREATE ROLE app LOGIN SUPERUSER;
	CREATE ROLE owner LOGIN;
	CREATE ROLE nobody NOLOGIN;
	CREATE SCHEMA hostile;
	CREATE FUNCTION hostile.now() RETURNS timestamptz LANGUAGE sql
		AS $$ SELECT '2000-01-01 00:00:00+00'::pg_catalog.timestamptz $$;
	CREATE ACCESS METHOD hostile_am TYPE TABLE HANDLER heap_tableam_handler;
});
my @as_tester = (extra_params => [ '-U', 'tester' ]);
my @as_keeper = (extra_params => [ '-U', 'keeper' ]);
sub tq { my ($sql) = @_; return $node->safe_psql('postgres', $sql, @as_tester); }

# whether a query answers t within a bounded wait (no timing asserted)
sub eventually
{
	my ($sql, $seconds) = @_;
	my $until = time + $seconds;
	while (time < $until)
	{
		return 1 if tq($sql) eq 't';
		sleep 0.1;
	}
	return 0;
}

sub reconciler_pid
{
	return tq("SELECT pid FROM pg_stat_activity WHERE backend_type = 'durable reconciler'");
}

# restart the reconciler (it reads its database's and role's settings as
# it connects); returns its new pid and the log from its start
sub restart_reconciler
{
	my ($name) = @_;
	my $old = reconciler_pid();
	my $log = -s $node->logfile;
	tq("SELECT pg_terminate_backend($old)") if $old ne '';
	my $back = '';
	my $until = time + 60;
	while (time < $until)
	{
		$back = reconciler_pid();
		last if $back ne '' && $back ne $old;
		sleep 0.1;
	}
	ok($back ne '' && $back ne $old, "$name: the reconciler comes back");
	return ($back, $log);
}

# the errors a background worker logged since offset $from of the server
# log (lines without the application name the test's sessions log with),
# but for the terminations the test asks for: a start of the reconciler
# that a setting killed (a transaction_timeout of a millisecond, on
# PostgreSQL 17, ended the transaction that sets the others back) is
# retried and may come back in time, so "comes back" alone can miss it
sub worker_errors
{
	my ($from) = @_;
	open(my $fh, '<', $node->logfile) or die "cannot read the server log: $!";
	seek($fh, $from, 0);
	my @errors = grep { /\[\d+\] (?:ERROR|FATAL|PANIC):/ && !/due to administrator command/ }
	  <$fh>;
	close($fh);
	return join('', @errors);
}

# an expired lease in a queue of its own, settled by the reconciler that
# runs now, which is still the same process afterwards
my $queues = 0;
sub settles
{
	my ($name, $pid, $seconds) = @_;
	my $q = 'owner_q' . ++$queues;
	tq("SELECT durable_create_queue('$q', lease => '1 hour', retry_base => 1, retry_cap => 1)");
	my $task = tq("SELECT durable_enqueue('$q', '{}')");
	tq("SELECT fence FROM durable_claim('$q', 'w', '100 milliseconds') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun");
	ok(eventually("SELECT state <> 'running' FROM durable.tasks WHERE task_id = $task",
			$seconds // 60),
		"$name: the reconciler settles an expired lease");
	is(reconciler_pid(), $pid, "$name: the reconciler did not stop meanwhile");
}

sub reset_all
{
	$node->safe_psql('template1', "ALTER DATABASE postgres RESET ALL; ALTER ROLE $superuser RESET ALL;",
		@as_keeper);
}

my ($pid) = restart_reconciler('under the defaults');
settles('under the defaults', $pid);

# --- generated: every setting a database's or a role's SET may carry ---

my @settings = map { [ split /\|/, $_, -1 ] } split /\n/, tq(q{
	SELECT name, vartype, coalesce(min_val, ''), coalesce(max_val, ''),
	       coalesce(array_to_string(enumvals, ','), ''), setting
	FROM pg_settings WHERE context IN ('user', 'superuser') ORDER BY name});
push @settings, [ 'role', 'string', '', '', '', 'none' ],
  [ 'session_authorization', 'string', '', '', '', 'tester' ];

# chosen where a string has a hostile value of its own (SQL, a list
# unquoted); the others take the first of the generic ones the server
# accepts
my %hostile_string = (
	search_path => 'hostile, pg_catalog, public',
	temp_tablespaces => 'pg_global',
	DateStyle => q{'SQL, DMY'},
	TimeZone => q{'XYZ-3'},
	default_tablespace => q{'pg_global'},
	default_table_access_method => q{'hostile_am'},
	default_text_search_config => q{'pg_catalog.simple'},
	role => q{'nobody'},
	session_authorization => q{'nobody'});
my @generic_strings = map { "'$_'" } ('pg_global', 'hostile', 'nobody', 'all', 'view', 'LATIN1');

# the hostile values of a setting in a round (0: low, 1: high, 2: small),
# as SQL
sub hostile_values
{
	my ($s, $round) = @_;
	my ($name, $type, $min, $max, $enums, $setting) = @$s;
	if ($type eq 'bool')
	{
		return ($setting eq 'on' ? 'off' : 'on');
	}
	if ($type eq 'enum')
	{
		my @other = grep { $_ ne $setting } split /,/, $enums;
		return () unless @other;
		return ("'" . $other[ $round % @other ] . "'");
	}
	if ($type eq 'integer' || $type eq 'real')
	{
		return ($min) if $round == 0;
		return ($max) if $round == 1;
		return ($min <= 1 && $max >= 1 ? 1 : $min);
	}
	return ($hostile_string{$name}) if exists $hostile_string{$name};
	return @generic_strings;
}

# Every setting is set on the database and on the reconciler's role by
# keeper, a role without settings, from another database (template1),
# where the database's settings do not apply; each value the server
# refuses is skipped (and a setting with none accepted counted).  The
# test's own role, tester, gets the server's value of each (FROM CURRENT,
# in keeper's session).
sub set_all
{
	my ($round) = @_;
	my @rows;
	for my $s (@settings)
	{
		my @values = hostile_values($s, $round);
		next unless @values;
		my $list = join(', ', map { my $v = $_; $v =~ s/'/''/g; "'$v'" } @values);
		push @rows, "('$s->[0]', ARRAY[$list])";
	}
	my $values = join(",\n", @rows);
	my ($rc, $out, $err) = $node->psql('template1', qq{
		DO \$\$
		DECLARE
			r record;
			c text;
			done bool;
			n_set int := 0;
			n_refused int := 0;
		BEGIN
			FOR r IN SELECT * FROM (VALUES $values) v(name, candidates) LOOP
				done := false;
				FOREACH c IN ARRAY r.candidates LOOP
					BEGIN
						EXECUTE format('ALTER DATABASE postgres SET %I = %s', r.name, c);
						EXECUTE format('ALTER ROLE %I SET %I = %s', '$superuser', r.name, c);
						done := true;
					EXCEPTION WHEN OTHERS THEN NULL;
					END;
					EXIT WHEN done;
				END LOOP;
				IF done THEN
					EXECUTE format('ALTER ROLE tester SET %I FROM CURRENT', r.name);
					n_set := n_set + 1;
				ELSE
					RAISE NOTICE 'refused: %', r.name;
					n_refused := n_refused + 1;
				END IF;
			END LOOP;
			RAISE NOTICE 'set: %, refused: %', n_set, n_refused;
		END
		\$\$;
	}, @as_keeper, on_error_stop => 1);
	is($rc, 0, "round $round: the settings are set") or diag($err);
	my ($set, $refused) = $err =~ /set: (\d+), refused: (\d+)/;
	my @refused = $err =~ /refused: (\w+)/g;
	note("refused: @refused");
	return ($set // 0, $refused // 0);
}

for my $round (0 .. 2)
{
	my $name = ('round of low values', 'round of high values', 'round of small values')[$round];
	my ($set, $refused) = set_all($round);
	note("$name: $set settings set on the database and the role, $refused refused");
	ok($set > 150, "$name: most settings were set ($set)");
	my ($p, $from) = restart_reconciler($name);
	settles($name, $p);
	is(worker_errors($from), '', "$name: no start of the reconciler failed");
	reset_all();
	$node->safe_psql('template1', 'ALTER ROLE tester RESET ALL', @as_keeper);
}

# --- 1. a non-superuser owner sets the role the reconciler acts as ---

tq(q{ALTER DATABASE postgres OWNER TO owner; ALTER ROLE tester SET role = 'none';});
$node->safe_psql('postgres', q{ALTER DATABASE postgres SET role = 'nobody'},
	extra_params => [ '-U', 'owner' ]);
my $log;
($pid, $log) = restart_reconciler('role set by the owner');
settles('role set by the owner', $pid);
like(substr(slurp_file($node->logfile), $log),
	qr/durable reconciler ignores the settings of its database and role: [^\n]*\brole\b/,
	'role set by the owner: the log names the setting ignored');
tq(qq{ALTER DATABASE postgres OWNER TO $superuser});
tq(qq{ALTER ROLE $superuser SET session_authorization = 'nobody'});
($pid) = restart_reconciler('session_authorization of its role');
settles('session_authorization of its role', $pid);
reset_all();
tq('ALTER ROLE tester RESET ALL');

# --- 2. exit_on_error, and a part of the tick that fails ---

# in one transaction: a tick between the UPDATE and the enqueue would take the key
tq(q{
	BEGIN;
	SELECT durable_create_queue('owner_jobs');
	SELECT durable_schedule('owner_taken', '0 0 1 1 *', 'owner_jobs', '{"mine": true}');
	UPDATE durable.schedules SET next_run = date_trunc('year', now(), 'UTC')
	WHERE schedule_name = 'owner_taken';
	SELECT durable_enqueue('owner_jobs', '{"theirs": true}',
	                       idempotency_key => 'schedule:owner_taken:' ||
	                           extract(epoch FROM date_trunc('year', now(), 'UTC'))::bigint);
	COMMIT;
	ALTER DATABASE postgres SET exit_on_error = on;
	ALTER ROLE tester SET exit_on_error = off;
});
($pid) = restart_reconciler('exit_on_error');
ok(eventually(q{SELECT count(*) = 1 FROM durable.tick_failures WHERE part = 'schedule: owner_taken'}, 60),
	'exit_on_error: the schedule\'s part fails, isolated');
settles('exit_on_error', $pid);
tq(q{SELECT durable_unschedule('owner_taken')});
reset_all();
tq('ALTER ROLE tester RESET ALL');

# --- 6. vacuum_cost_*: the reconciler's own VACUUM is not delayed ---

tq(q{
	ALTER SYSTEM SET durable.vacuum_threshold = 1000;
	ALTER SYSTEM SET vacuum_cost_delay = 100;
	SELECT pg_reload_conf();
	SELECT durable_create_queue('owner_bulk');
	SELECT count(durable_enqueue('owner_bulk', jsonb_build_object('n', n))) FROM generate_series(1, 20000) n;
	ALTER DATABASE postgres SET vacuum_cost_delay = 100;
	ALTER DATABASE postgres SET vacuum_cost_limit = 1;
	ALTER DATABASE postgres SET vacuum_cost_page_hit = 10000;
	ALTER DATABASE postgres SET vacuum_cost_page_miss = 10000;
	ALTER DATABASE postgres SET vacuum_cost_page_dirty = 10000;
	ALTER ROLE tester SET vacuum_cost_delay = 0;
});
my $vacuums = tq(q{SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'durable.live_tasks'::regclass});
($pid) = restart_reconciler('vacuum_cost_*');
tq(q{UPDATE durable.live_tasks SET priority = priority WHERE queue_name = 'owner_bulk'});
my $started = time;
ok(eventually(qq{SELECT vacuum_count > $vacuums FROM pg_stat_user_tables
	WHERE relid = 'durable.live_tasks'::regclass}, 60),
	'vacuum_cost_*: the reconciler vacuums durable.live_tasks');
note(sprintf('vacuum_cost_*: the dead rows made to the vacuum done: %.1f s (not asserted)',
	time - $started));
settles('vacuum_cost_*', $pid);
tq(q{
	ALTER SYSTEM RESET durable.vacuum_threshold;
	ALTER SYSTEM RESET vacuum_cost_delay;
	SELECT pg_reload_conf();
});
reset_all();
tq('ALTER ROLE tester RESET ALL');

# --- 9. days of history where durable's tables are, whatever the defaults ---

my $where = q{
	SELECT count(*) FILTER (WHERE c.relam <> (SELECT oid FROM pg_am WHERE amname = 'heap') OR c.reltablespace <> d.reltablespace)
	    || '/' || count(*)
	FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
	JOIN pg_class p ON p.oid = i.inhparent
	JOIN pg_class d ON d.relname = p.relname || '_default' AND d.relnamespace = p.relnamespace
	WHERE p.oid IN ('durable.task_history'::regclass, 'durable.step_history'::regclass,
	                'durable.event_log'::regclass)
	  AND c.relname ~ ('_p(' || %s || ')$')};
my $day2 = q{to_char((date_trunc('day', now(), 'UTC') + interval '2 days') AT TIME ZONE 'UTC', 'YYYYMMDD')};
ok(eventually("SELECT (" . sprintf($where, $day2) . ") = '0/3'", 60), 'the reconciler has made the days ahead');
tq(q{
	ALTER DATABASE postgres SET default_tablespace = 'pg_global';
	ALTER DATABASE postgres SET default_table_access_method = 'hostile_am';
	ALTER ROLE tester SET default_tablespace = '';
	ALTER ROLE tester SET default_table_access_method = 'heap';
});
my $later = q{string_agg(to_char((date_trunc('day', now(), 'UTC') + make_interval(days => d)) AT TIME ZONE 'UTC', 'YYYYMMDD'), '|') FROM generate_series(10, 12) d};
# a session of a role of its own, under its database's settings (another
# maintainer at work answers busy: asked again)
my $made;
for (1 .. 100)
{
	$made = $node->safe_psql('postgres', q{
		SELECT coalesce(string_agg(action || ' ' || coalesce(error_message, ''), ', '), '')
		FROM durable.maintain_history(now() + interval '10 days', NULL, 0)},
		extra_params => [ '-U', 'app' ]);
	last unless $made =~ /busy/;
	sleep 0.1;
}
is($made, '', 'default_tablespace and default_table_access_method: a session makes the days');
is(tq(sprintf($where, "(SELECT $later)")), '0/9',
	'default_tablespace and default_table_access_method: the days a session made are where durable\'s tables are, in heap');
($pid) = restart_reconciler('default_tablespace and default_table_access_method');
my $days = tq("SELECT $day2");
tq("DROP TABLE durable.task_history_p$days, durable.step_history_p$days, durable.event_log_p$days");
ok(eventually("SELECT (" . sprintf($where, "'$days'") . ") = '0/3'", 60),
	'default_tablespace and default_table_access_method: the reconciler makes a day again, where durable\'s tables are, in heap');
settles('default_tablespace and default_table_access_method', $pid);
tq(qq{SELECT format('DROP TABLE durable.%I', c.relname) FROM pg_class c
	WHERE c.relname ~ ('_p(' || (SELECT $later) || ')\$')} . ' \gexec');
reset_all();
tq('ALTER ROLE tester RESET ALL');

$node->stop;
done_testing();
