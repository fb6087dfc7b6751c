# Nothing a session, a role or a database owner sets changes what durable
# computes (docs/design.md section 7): one scenario of API calls and ticks runs
# under the defaults and again under hostile settings -- set per session
# (every DateStyle x TimeZone x IntervalStyle combination), per role
# (ALTER ROLE ... SET) and per database (ALTER DATABASE ... SET) -- and
# must leave the same tasks, steps, waits, events, schedules, idempotency
# keys and days of history, every timestamp kept in jsonb in one canonical
# form.  Then the reconciler, restarted under a database's and a role's
# hostile settings (also statement_timeout, lock_timeout, SERIALIZABLE and
# a search_path that shadows pg_catalog), must settle the same scenario
# the same way, without an error in the log (the scenario holds a row the
# reconciler waits for).
#
# Before 0.5.0 it failed on events' times in the session's offset, the
# stuck alarm's timeout in its IntervalStyle, the recovery package in both,
# a six-month sleep an hour off in Europe/Lisbon, and the reconciler's tick
# killed by its database's lock_timeout.  The days of history (and ticks
# under DateStyle SQL, Postgres or German with a zone such as XYZ-3) depend
# on durable.maintain_history no longer parsing pg_get_expr (section 1 of
# the 0.5.0 script).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use Time::Local qw(timegm);
use DurableNode;

my $node = DurableNode::new_node('hostile', "durable.reconcile_interval = '100ms'");
my $superuser = $node->safe_psql('postgres', 'SELECT current_user');

# every function written in SQL or PL/pgSQL pins the settings of the text
# forms it reads or writes (a CREATE OR REPLACE without them drops them)
is($node->safe_psql('postgres', q{
	SELECT string_agg(p.oid::regprocedure::text, ', ' ORDER BY p.oid::regprocedure::text)
	FROM pg_proc p
	JOIN pg_language l ON l.oid = p.prolang
	JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
	JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'durable'
	WHERE l.lanname IN ('sql', 'plpgsql')
	  AND NOT coalesce(p.proconfig, '{}') @> ARRAY['search_path=pg_catalog, pg_temp',
	      'DateStyle=ISO, MDY', 'IntervalStyle=postgres', 'TimeZone=UTC', 'extra_float_digits=1']}),
	'', 'every SQL and PL/pgSQL function pins search_path, DateStyle, IntervalStyle, TimeZone and extra_float_digits');

my @datestyles = ('SQL, DMY', 'Postgres, MDY', 'German, DMY', 'ISO, YMD');
my @timezones = ('Europe/Lisbon', 'Asia/Kolkata', 'Asia/Shanghai', 'Europe/Dublin',
	'America/St_Johns', 'XYZ-3');
my @intervalstyles = ('postgres', 'sql_standard', 'iso_8601');
my @float_digits = (-15, 0, 3);

my @combos;
for my $ds (@datestyles)
{
	for my $tz (@timezones)
	{
		for my $is (@intervalstyles)
		{
			push @combos, {
				datestyle => $ds, timezone => $tz, intervalstyle => $is,
				extra_float_digits => $float_digits[ @combos % 3 ] };
		}
	}
}

sub describe
{
	my ($c) = @_;
	return "DateStyle '$c->{datestyle}', TimeZone '$c->{timezone}', IntervalStyle '$c->{intervalstyle}', extra_float_digits $c->{extra_float_digits}";
}

sub settings_sql
{
	my ($c, $how) = @_;
	return join('', map { "$how $_ = '$c->{$_}';\n" }
		qw(datestyle timezone intervalstyle extra_float_digits));
}

# durable_emit takes the event's queue since 0.5.0 (docs/design.md section 12);
# the scenario calls whichever the installed version has
my $emit_sql = $node->safe_psql('postgres',
	"SELECT count(*) FROM pg_proc WHERE proname = 'durable_emit' AND pronargs = 3")
  ? "SELECT durable_emit(:'q', :'ev', '{\"x\": 1.5}');"
  : "SELECT durable_emit(:'ev', '{\"x\": 1.5}');";

# The scenario, for a queue named by $tag.  With $ticks 'call', a tick is a
# durable_reconcile() call after the leases ran out (1 ms); with 'worker'
# it is the reconciler's, waited for, and the leases are long enough for
# the steps to be taken before the reconciler sees them expire.
sub scenario
{
	my ($db, $tag, $ticks) = @_;
	my $short = $ticks eq 'call' ? '1 millisecond' : '300 milliseconds';
	# the reconciler waits for a row another transaction holds (a
	# lock_timeout of its database's or role's would fail its tick)
	my $hold = $ticks eq 'call' ? ''
	  : "BEGIN;\nSELECT FROM durable.live_tasks WHERE task_id = :p FOR UPDATE;\n"
	  . "SELECT pg_sleep(1);\nCOMMIT;";
	my %tick;
	for my $what (qw(a b f l j))
	{
		my $cond = {
			a => q{'SELECT state <> ''running'' FROM durable.tasks WHERE task_id = ' || :a},
			b => q{'SELECT state <> ''running'' FROM durable.tasks WHERE task_id = ' || :b},
			f => q{'SELECT count(*) = 2 FROM durable.live_tasks WHERE stuck_alarm_at IS NOT NULL AND task_id IN (' || :f || ', ' || :m || ')'},
			l => q{'SELECT state <> ''running'' FROM durable.tasks WHERE task_id = ' || :k},
			j => q{'SELECT last_run IS NOT NULL FROM durable.schedules WHERE schedule_name OPERATOR(pg_catalog.=) ' || quote_literal(:'sn') || ' AND NOT EXISTS (SELECT FROM durable.idempotency_keys WHERE scope OPERATOR(pg_catalog.=) ' || quote_literal(:'q') || ')'},
		}->{$what};
		$tick{$what} = $ticks eq 'call'
		  ? "SELECT pg_sleep(0.005);\nSELECT count(*) FROM durable_reconcile();"
		  : "CALL public.wait_until($cond);";
	}
	return <<"SQL";
\\set q hq_${tag}
\\set qs hq_${tag}_s
\\set qv hq_${tag}_v
\\set ev hev_${tag}
\\set sn hsched_${tag}
\\warn scenario $tag
SELECT durable_create_queue(:'q', lease => '1 hour', retry_base => 1, retry_cap => 1, max_attempts => 5);
SELECT durable_create_queue(:'qs', lease => '1 hour', progress_timeout => '1 millisecond');
-- A: an idempotent task whose lease runs out is retried after 1 s
SELECT durable_enqueue(:'q', '{"t": "a"}', priority => 1, deadline => '1 day 02:00:00') AS a \\gset
SELECT fence AS af FROM durable_claim(:'q', 'w', '$short') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun \\gset
$tick{a}
-- B: an unsafe step started when the lease runs out goes to review
SELECT durable_enqueue(:'q', '{"t": "b"}', priority => 2, class => 'unsafe') AS b \\gset
SELECT fence AS bf FROM durable_claim(:'q', 'w', '$short') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun \\gset
SELECT version AS bv FROM durable_step(:b, :bf, 's1', 'unsafe', '{"r": 1}') \\gset
SELECT durable_step_start(:b, :bf, 's1', :bv);
$tick{b}
-- C: a sleep for a duration (across a change of summer time in some of
-- the zones), D: a sleep until a time
SELECT durable_enqueue(:'q', '{"t": "c"}', priority => 3) AS c \\gset
SELECT fence AS cf FROM durable_claim(:'q', 'w') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun \\gset
SELECT durable_sleep(:c, :cf, 'nap', duration => '6 mons 1 day 02:00:00.25');
SELECT durable_enqueue(:'q', '{"t": "d"}', priority => 4) AS d \\gset
SELECT fence AS df FROM durable_claim(:'q', 'w') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun \\gset
SELECT durable_sleep(:d, :df, 'nap', until => '2027-03-28 01:30:00+00');
-- E: an await with a timeout, then its event
SELECT durable_enqueue(:'q', '{"t": "e"}', priority => 5) AS e \\gset
SELECT fence AS ef FROM durable_claim(:'q', 'w') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun \\gset
SELECT * FROM durable_await(:e, :ef, 'w', :'ev', timeout => '6 mons 2 hours');
$emit_sql
-- F: no progress for longer than its queue's progress_timeout: a stuck alarm
SELECT durable_enqueue(:'qs', '{"t": "f"}') AS f \\gset
BEGIN;
SELECT fence AS ff FROM durable_claim(:'qs', 'w', '6 mons') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun \\gset
SELECT durable_heartbeat(:f, :ff, 'p1', '6 mons');
COMMIT;
-- M: a progress_timeout of six months, across a change to summer time in
-- some of the zones: no progress for half an hour longer than that on the
-- UTC calendar is stuck, for the views as for the alarm
SELECT durable_create_queue(:'qv', lease => '1 hour', progress_timeout => '6 mons');
SELECT durable_enqueue(:'qv', '{"t": "m"}') AS m \\gset
BEGIN;
SELECT fence AS mf FROM durable_claim(:'qv', 'w') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun \\gset
UPDATE durable.live_tasks SET progress_at = pg_catalog.timezone('UTC',
    pg_catalog.timezone('UTC', pg_catalog.now()) OPERATOR(pg_catalog.-) '6 mons'::pg_catalog.interval)
    OPERATOR(pg_catalog.-) '30 minutes'::pg_catalog.interval
 WHERE task_id OPERATOR(pg_catalog.=) :m;
COMMIT;
INSERT INTO public.viewed
SELECT :'q', (SELECT stuck FROM durable.queue_stats WHERE queue_name OPERATOR(pg_catalog.=) :'qv'),
       (SELECT count(*) FROM durable.stuck_tasks WHERE queue_name OPERATOR(pg_catalog.=) :'qv');
$tick{f}
-- G: a failure retried after 1 s; H: a commit
SELECT durable_enqueue(:'q', '{"t": "g"}', priority => 7) AS g \\gset
SELECT fence AS gf FROM durable_claim(:'q', 'w') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun \\gset
SELECT durable_fail(:g, :gf, 'transient', '{"e": "boom"}');
SELECT durable_enqueue(:'q', '{"t": "h"}', priority => 8) AS h \\gset
SELECT fence AS hf FROM durable_claim(:'q', 'w') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun \\gset
SELECT durable_commit(:h, :hf, '{"ok": true}');
-- L: a child that fails for good wakes its parent
SELECT durable_enqueue(:'q', '{"t": "p"}', priority => 9) AS p \\gset
SELECT fence AS pf FROM durable_claim(:'q', 'w') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun \\gset
SELECT durable_spawn(:p, :pf, 'kid', :'q', '{"t": "k"}', priority => 10, max_attempts => 1) AS k \\gset
SELECT * FROM durable_join(:p, :pf, 'j');
SELECT fence AS cf2 FROM durable_claim(:'q', 'w', '$short') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun \\gset
$hold
$tick{l}
-- I: an idempotency key whose time is up; J: a schedule one occurrence behind
SELECT fence AS kf FROM durable_idempotent_begin(:'q', :'q', 'k1', '{"r": 1}') \\gset
SELECT durable_idempotent_finish(:'q', :'q', 'k1', :kf, '{"done": 1}', '1 millisecond');
SELECT durable_schedule(:'sn', '0 0 1 1 *', :'q', '{"s": 1}', timezone => 'America/St_Johns');
UPDATE durable.schedules SET next_run = '2026-01-01 03:30:00+00'
 WHERE schedule_name OPERATOR(pg_catalog.=) :'sn';
$tick{j}
-- K: what an operator reads
INSERT INTO public.packages SELECT :'q', x, durable_recovery_package(x)
 FROM unnest(ARRAY[:b, :c, :e, :f]::bigint[]) x;
INSERT INTO public.verified SELECT :'q', count(*) FROM durable_verify();
SQL
}

# A queue's tasks, steps, events, waits, schedule, keys and what the
# operator read, under fixed settings, each line with the time it is read
# against (0: none).
sub dump_sql
{
	my ($tag) = @_;
	return <<"SQL";
SET datestyle = 'ISO, MDY'; SET timezone = 'UTC'; SET intervalstyle = 'postgres';
SET extra_float_digits = 1; SET search_path = pg_catalog, public;
\\set q hq_${tag}
\\set qs hq_${tag}_s
\\set qv hq_${tag}_v
WITH t AS (
  SELECT t.*, row_number() OVER (ORDER BY t.queue_name, t.task_id) AS i,
         (SELECT max(e.at) FROM durable.events e
           WHERE e.partition_key = t.partition_key AND e.task_id = t.task_id) AS last_at
  FROM durable.tasks t WHERE t.queue_name IN (:'q', :'qs', :'qv')),
e AS (SELECT e.*, t.i FROM durable.events e JOIN t USING (partition_key, task_id)),
s AS (SELECT s.*, t.i FROM durable.steps s JOIN t USING (partition_key, task_id))
SELECT line FROM (
  SELECT t.i, 0 AS o, 0 AS seq,
         format('%s|task %s: queue %s, %s, class %s, priority %s, attempt %s of %s, version %s, fence %s, stop %s, in doubt %s, checkpoint %s, keyed %s, run_at %s, deadline %s, lease_until %s, finished_at %s, lease %s, progress %s, payload %s, result %s, error %s, checkpoint %s, metadata %s, waits %s, child %s',
                extract(epoch FROM t.last_at), t.i, CASE t.queue_name WHEN :'qs' THEN 'stuck' WHEN :'qv' THEN 'slow' ELSE 'main' END,
                t.state, t.class, t.priority, t.attempt, t.max_attempts, t.version, t.fence,
                t.stop_code, t.steps_in_doubt, t.checkpoint_version, t.idempotency_key IS NOT NULL,
                to_jsonb(t.run_at), t.deadline, to_jsonb(t.lease_until), to_jsonb(t.finished_at),
                t.lease, t.progress, t.payload, t.result, t.last_error, t.checkpoint, t.metadata,
                t.waits, t.parent_id IS NOT NULL) AS line
  FROM t
  UNION ALL
  SELECT e.i, 1, e.seq, format('%s|  event %s: %s, %s, fence %s, step %s, %s',
         extract(epoch FROM e.at), e.seq, e.kind, e.state, e.fence, e.step, e.detail)
  FROM e
  UNION ALL
  SELECT s.i, 2, s.ordinal, format('%s|  step %s: %s, %s, version %s, attempt %s, receipt %s, request %s, result %s, evidence %s, error %s',
         extract(epoch FROM s.updated_at), s.step, s.state, s.class, s.version, s.attempt,
         s.receipt, s.request, s.result, s.evidence, s.error)
  FROM s
  UNION ALL
  SELECT 1000, 0, 0, format('0|schedule: next %s, last %s, %s, %s, task %s', to_jsonb(c.next_run),
         to_jsonb(c.last_run), c.timezone, c.payload, (SELECT t.i FROM t WHERE t.task_id = c.last_task_id))
  FROM durable.schedules c WHERE c.queue_name = :'q'
  UNION ALL
  SELECT 1001, 0, 0, format('0|idempotency keys left: %s', count(*))
  FROM durable.idempotency_keys k WHERE k.scope = :'q'
  UNION ALL
  SELECT 1002, t.i, 0, format('%s|waiting_tasks: task %s, %s, %s, since %s, until %s',
         extract(epoch FROM t.last_at), t.i, w.wait_name, w.kind, to_jsonb(w.since), to_jsonb(w.until))
  FROM durable.waiting_tasks w JOIN t USING (task_id)
  UNION ALL
  SELECT 1003, t.i, 0, format('%s|package of task %s: %s', extract(epoch FROM t.last_at), t.i,
         p.doc #- '{task,task_id}' #- '{task,partition_key}')
  FROM public.packages p JOIN t ON t.task_id = p.task WHERE p.q = :'q'
  UNION ALL
  SELECT 1004, 0, 0, format('0|durable_verify() problems: %s', v.problems)
  FROM public.verified v WHERE v.q = :'q'
  UNION ALL
  SELECT 1005, 0, 0, format('0|viewed stuck: queue_stats %s, stuck_tasks %s', v.stuck, v.stuck_tasks)
  FROM public.viewed v WHERE v.q = :'q'
) d ORDER BY i, o, seq, line;
SQL
}

# The days of history: the partitions of the three history tables.
my $days_sql = q{
	SELECT string_agg(c.relname, ' ' ORDER BY c.relname)
	FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
	WHERE i.inhparent IN ('durable.task_history'::regclass,
	                      'durable.step_history'::regclass, 'durable.event_log'::regclass)};

# A timestamp as it is found anywhere in a dump: canonical (ISO 8601 in UTC,
# "+00:00", as JSON writes it), or not.
my $ts_re = qr/(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(\.\d+)?((?:[+-]\d\d(?::?\d\d)?)|Z)?/;

# A dump as compared: names and ids of the run taken out, every time in it
# written against the time its line is read against (rounded to seconds),
# or as itself when it is a whole minute (a time the scenario gave, or a
# schedule's), and each timestamp that is not canonical listed.
sub canonical
{
	my ($raw, $bad) = @_;
	my @out;
	for my $line (split /\n/, $raw)
	{
		my ($ref, $text) = split /\|/, $line, 2;
		next unless defined $text;
		$text =~ s/\bh(q|ev|sched)_[a-z0-9]+/h$1_X/g;
		$text =~ s/\b\d{12,}\b/<id>/g;
		$text =~ s/\b[0-9a-f]{64}\b/<key>/g;
		# how long the scenario took, not what durable decided
		$text =~ s/"elapsed_ms": \d+/"elapsed_ms": <ms>/g;
		$text =~ s/"(role|actor)": "[^"]*"/"$1": <who>/g;
		$text =~ s{$ts_re}{
			my ($y, $mo, $d, $h, $mi, $s, $frac, $off) = ($1, $2, $3, $4, $5, $6, $7 // '', $8 // '');
			my $whole = $&;
			push @$bad, $whole
			  unless $whole =~ /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?\+00:00$/;
			my $offset = 0;
			if ($off =~ /^([+-])(\d\d):?(\d\d)?$/)
			{
				$offset = ($2 * 3600 + ($3 // 0) * 60) * ($1 eq '-' ? -1 : 1);
			}
			my $epoch = timegm($s, $mi, $h, $d, $mo - 1, $y) + ($frac || 0) - $offset;
			if ($s == 0 && !$frac)
			{
				my @u = gmtime($epoch);
				sprintf('%04d-%02d-%02d %02d:%02d UTC', $u[5] + 1900, $u[4] + 1, $u[3], $u[2], $u[1]);
			}
			else
			{
				'@' . (0 + sprintf('%.0f', $epoch - $ref));
			}
		}ge;
		push @out, $text;
	}
	return join("\n", @out) . "\n";
}

sub dump_of
{
	my ($db, $tag, $bad) = @_;
	my $raw = $node->safe_psql($db, dump_sql($tag));
	return canonical($raw, $bad);
}

# Run a scenario script; returns its errors (stderr without the markers).
sub run_script
{
	my ($db, $sql, @params) = @_;
	my ($ret, $stdout, $stderr) = $node->psql($db, $sql, on_error_stop => 0, @params);
	return $stderr;
}

# compare a run's dump with the baseline; on a difference show the first lines that differ
sub same_outcome
{
	my ($got, $want, $bad, $name) = @_;
	my $ok = is(scalar(@$bad), 0, "$name: every timestamp in stored jsonb is canonical")
	  or diag('not canonical: ' . join(', ', @$bad[ 0 .. ($#$bad < 4 ? $#$bad : 4) ]));
	if ($got eq $want)
	{
		pass("$name: same outcome as under the defaults");
		return;
	}
	my @g = split /\n/, $got;
	my @w = split /\n/, $want;
	my @diff;
	for my $i (0 .. ($#g > $#w ? $#g : $#w))
	{
		my ($gl, $wl) = ($g[$i] // '<none>', $w[$i] // '<none>');
		push @diff, "  want: $wl\n  got:  $gl" if $gl ne $wl;
		last if @diff >= 3;
	}
	fail("$name: same outcome as under the defaults");
	diag(join("\n", @diff));
}

my $support = q{
	CREATE TABLE public.packages (q text, task bigint, doc jsonb);
	CREATE TABLE public.verified (q text, problems bigint);
	CREATE TABLE public.viewed (q text, stuck bigint, stuck_tasks bigint);
	-- what a test waits for, each look in a transaction of its own (a
	-- SERIALIZABLE snapshot would see nothing change)
	CREATE PROCEDURE public.wait_until(cond text) LANGUAGE plpgsql AS $$
	DECLARE done bool;
	BEGIN
		FOR i IN 1 .. 300 LOOP
			EXECUTE cond INTO done;
			IF done THEN RETURN; END IF;
			COMMIT;
			PERFORM pg_catalog.pg_sleep(0.05);
		END LOOP;
		RAISE EXCEPTION 'timed out waiting for: %', cond;
	END $$;
};

# --- sessions: every combination, in one database without a reconciler ---

$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', "CREATE EXTENSION durable; $support");
# the databases of the per-database sample, copied before any work
my @db_sample = @combos[ 1, 23, 38, 52, 70 ];
$node->safe_psql('postgres', "CREATE DATABASE hd$_ TEMPLATE app") for 0 .. $#db_sample;

my $errors = run_script('app', scenario('app', 'base', 'call'));
is($errors, "scenario base", 'the scenario runs without an error under the defaults');
my @nobad;
my $baseline = dump_of('app', 'base', \@nobad);
is(scalar(@nobad), 0, 'under the defaults every timestamp in stored jsonb is canonical')
  or diag(join(', ', @nobad));
my $days = $node->safe_psql('app', $days_sql);
note("baseline:\n$baseline");

my $script = '';
for my $n (0 .. $#combos)
{
	$script .= "RESET ALL;\n" . settings_sql($combos[$n], 'SET') . scenario('app', "s$n", 'call');
}
$errors = run_script('app', $script);
my %errors_of;
my $current = '';
for my $l (split /\n/, $errors)
{
	if ($l =~ /^scenario (\S+)$/) { $current = $1; next; }
	$errors_of{$current} .= "$l\n";
}
my $session_failures = 0;
for my $n (0 .. $#combos)
{
	my @bad;
	my $name = 'session ' . describe($combos[$n]);
	my $ok = ok(!defined $errors_of{"s$n"}, "$name: no error")
	  or diag($errors_of{"s$n"});
	my $got = dump_of('app', "s$n", \@bad);
	$session_failures++ unless $ok && $got eq $baseline && !@bad;
	same_outcome($got, $baseline, \@bad, $name);
}
is($node->safe_psql('app', $days_sql), $days,
	'after every session combination the days of history are those of the defaults');

# --- roles: ALTER ROLE ... SET, a sample ---

my @role_sample = @combos[ 5, 16, 33, 47, 61, 66 ];
for my $k (0 .. $#role_sample)
{
	my $c = $role_sample[$k];
	$node->safe_psql('app', "CREATE ROLE hr$k LOGIN SUPERUSER;\n"
		  . settings_sql($c, "ALTER ROLE hr$k SET"));
	my @bad;
	my $name = 'role ' . describe($c);
	my $err = run_script('app', scenario('app', "r$k", 'call'), extra_params => [ '-U', "hr$k" ]);
	is($err, "scenario r$k", "$name: no error");
	same_outcome(dump_of('app', "r$k", \@bad), $baseline, \@bad, $name);
}
is($node->safe_psql('app', $days_sql), $days,
	'after the roles\' runs the days of history are those of the defaults');

# --- databases: ALTER DATABASE ... SET, a sample ---

for my $k (0 .. $#db_sample)
{
	my $c = $db_sample[$k];
	$node->safe_psql('postgres', settings_sql($c, "ALTER DATABASE hd$k SET"));
	my @bad;
	my $name = 'database ' . describe($c);
	my $err = run_script("hd$k", scenario("hd$k", "d$k", 'call'));
	is($err, "scenario d$k", "$name: no error");
	same_outcome(dump_of("hd$k", "d$k", \@bad), $baseline, \@bad, $name);
	is($node->safe_psql("hd$k", $days_sql), $days, "$name: the same days of history");
}

# --- the reconciler, under its database's and its role's settings ---

# The test's own sessions in the reconciler's database run as a role of
# their own, whose settings undo those of the database that would stop the
# test's own statements (not durable's); the hostile role is the
# reconciler's.
$node->safe_psql('postgres', q{
	CREATE ROLE tester LOGIN SUPERUSER;
	ALTER ROLE tester SET statement_timeout = 0;
	ALTER ROLE tester SET lock_timeout = 0;
	ALTER ROLE tester SET idle_in_transaction_session_timeout = 0;
	ALTER ROLE tester SET default_transaction_isolation = 'read committed';
	ALTER ROLE tester SET search_path = public, pg_catalog;
} . $support);
my @as_tester = (extra_params => [ '-U', 'tester' ]);
sub tq { my ($sql) = @_; return $node->safe_psql('postgres', $sql, @as_tester); }

sub worker_pid
{
	return tq("SELECT pid FROM pg_stat_activity WHERE backend_type = 'durable reconciler'");
}

$errors = run_script('postgres', scenario('postgres', 'wbase', 'worker'), @as_tester);
is($errors, "scenario wbase", 'the reconciler settles the scenario under the defaults');
my @wbad;
my $wbaseline = canonical(tq(dump_sql('wbase')), \@wbad);
is(scalar(@wbad), 0, 'with the reconciler under the defaults every timestamp in stored jsonb is canonical');
my $wdays = tq($days_sql);

# a restart: the new reconciler reads its database's and its role's settings
sub restart_reconciler
{
	my $old = worker_pid();
	tq("SELECT pg_terminate_backend($old)");
	my $back = '';
	for (1 .. 300)
	{
		$back = worker_pid();
		last if $back ne '' && $back ne $old;
		sleep 0.1;
	}
	ok($back ne '' && $back ne $old, 'the reconciler comes back');
}

tq(q{
	CREATE SCHEMA hostile;
	CREATE FUNCTION hostile.now() RETURNS timestamptz LANGUAGE sql
		AS $$ SELECT '2000-01-01 00:00:00+00'::pg_catalog.timestamptz $$;
	CREATE FUNCTION hostile.texteq(text, text) RETURNS boolean LANGUAGE sql
		AS $$ SELECT false $$;
	CREATE OPERATOR hostile.= (leftarg = text, rightarg = text, function = hostile.texteq);
	CREATE FUNCTION hostile.jsonb_typeof(jsonb) RETURNS text LANGUAGE sql
		AS $$ SELECT 'hostile'::pg_catalog.text $$;
});
my @worker_sample = ($combos[3], $combos[58]);
for my $k (0 .. 1)
{
	my $c = $worker_sample[$k];
	my $how = $k == 0 ? 'ALTER DATABASE postgres SET' : "ALTER ROLE $superuser SET";
	tq(settings_sql($c, $how) . qq{
		$how statement_timeout = '1ms';
		$how lock_timeout = '1ms';
		$how idle_in_transaction_session_timeout = '1ms';
		$how default_transaction_isolation = 'serializable';
		$how search_path = hostile, pg_catalog, public;
	});
	restart_reconciler();
	my $log = -s $node->logfile;
	my @bad;
	my $name = ($k == 0 ? "the reconciler under its database's " : "the reconciler under its role's ")
	  . describe($c) . ', statement_timeout, lock_timeout, SERIALIZABLE and search_path';
	my $err = run_script('postgres', settings_sql($c, 'SET') . scenario('postgres', "w$k", 'worker'),
		@as_tester);
	is($err, "scenario w$k", "$name: settles the scenario");
	same_outcome(canonical(tq(dump_sql("w$k")), \@bad), $wbaseline, \@bad, $name);
	is(tq($days_sql), $wdays, "$name: the same days of history");
	my @failed = grep { /\b(ERROR|FATAL):/ } split /\n/, substr(slurp_file($node->logfile), $log);
	is(join("\n", @failed), '', "$name: nothing failed in the log");
	tq(qq{
		ALTER DATABASE postgres RESET ALL;
		ALTER ROLE $superuser RESET ALL;
	});
}

note("$session_failures of " . scalar(@combos) . ' session combinations differ from the defaults');
$node->stop;
done_testing();
