# pgdurable, the Python client library (clients/python), as a user gets it
# and against a real server (the crash tests of examples/python/worker.py
# on the installed wheel are 010's):
#
# 1. it builds offline as a wheel and an sdist (python3 -m build
#    --no-isolation, from a copy of clients/python); each installs with
#    pip --no-index into a fresh virtual environment and imports from there
#    at durable's version; without psycopg it says in one line how to
#    install it;
# 2. the SQLSTATE table, each provoked on a task a worker holds: 55U01
#    (durable_expire_lease: the task is dropped, and finished once it comes
#    back), 57014 (pg_cancel_backend) and 40P01 (a deadlock) run the
#    statement again, a lost heartbeat connection reconnects before the
#    lease runs out; whatever else a handler raises is durable_fail with
#    its error class;
# 3. in session mode the worker LISTENs and lets psycopg prepare its
#    statements; pooled, it does neither and says so once;
# 4. a user's own test of a worker that crashes and whose task comes back at
#    once through durable_expire_lease (clients/python/examples/
#    test_crash_recovery.py, which clients/python/README.md shows as it is).
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;
use DurablePython;

# ---- 1. the package ----

my $tmp = PostgreSQL::Test::Utils::tempdir('pgdurable');
my ($wheel, $sdist) = DurablePython::build($tmp);
ok($wheel && $sdist, 'clients/python builds a wheel and an sdist offline')
  or BAIL_OUT('pgdurable did not build: see the log');
my $version = (slurp_file('durable.control') =~ /^default_version\s*=\s*'([^']+)'/m)[0];
like($wheel, qr{/pgdurable-\Q$version\E-py3-none-any\.whl$}, "the wheel is pgdurable $version for any Python 3");
like($sdist, qr{/pgdurable-\Q$version\E\.tar\.gz$}, "the sdist is pgdurable $version");

my $check = 'import sys, pgdurable; print(pgdurable.__version__, pgdurable.__file__.startswith(sys.prefix))';
my %python;
for my $artifact ([ wheel => $wheel ], [ sdist => $sdist ])
{
	my ($kind, $file) = @$artifact;
	$python{$kind} = DurablePython::venv("$tmp/venv-$kind", $file, 1);
	ok($python{$kind}, "the $kind installs into a fresh venv with pip, offline");
	my ($out, $err) = run_python($python{$kind}, '-c', $check);
	is($out, "$version True\n", "... and pgdurable $version imports from that venv, not from the source")
	  or diag($err);
}
my $python = $python{wheel} or BAIL_OUT('the wheel did not install');

# a venv without Debian's psycopg: one line says what to install
my $bare = DurablePython::venv("$tmp/venv-bare", $wheel, 0);
my ($out, $err) = run_python($bare, '-c', 'import pgdurable');
like((split /\n/, $err)[-1], qr/^ImportError: pgdurable needs psycopg 3: pip install 'psycopg\[binary\]'/,
	'without psycopg, importing pgdurable says how to install it');
($out, $err) = run_python($bare, 'examples/python/worker.py', '--help');
like($err, qr/\Apgdurable needs psycopg 3: pip install[^\n]*\n\z/,
	'... and the example worker says it in one line, no traceback');

# ---- a server, the stand-in service, the example worker from the venv ----

my $node = DurableNode::new_node('client_python',
	"durable.reconcile_interval = '100ms'", "log_statement = 'all'",
	"log_line_prefix = '%m [%p] %a: '");
$node->safe_psql('postgres', 'CREATE DATABASE service');
$node->safe_psql('service', slurp_file('examples/service.sql'));
my $user = $node->safe_psql('postgres', 'SELECT current_user');
my ($host, $port) = ($node->host, $node->port);
my $db = "host=$host port=$port user=$user dbname=postgres";

sub run_python
{
	my ($py, @args) = @_;
	my ($o, $e) = ('', '');
	IPC::Run::run([ $py, @args ], '>', \$o, '2>', \$e);
	return ($o, $e);
}

sub start_worker
{
	my ($queue, $name, $env, @args) = @_;
	my %run = (out => '', err => '');
	local %ENV = (%ENV, %$env);
	$run{h} = IPC::Run::start(
		[ $python, 'examples/python/worker.py', '--db', $db,
		  '--service', "host=$host port=$port user=$user dbname=service",
		  '--queue', $queue, '--name', $name, @args ],
		'>', \$run{out}, '2>', \$run{err});
	return \%run;
}

sub one_task
{
	my ($queue, $lease, $steps) = @_;
	$node->safe_psql('postgres',
		"SELECT durable_create_queue('$queue', lease => '$lease', retry_base => 1, retry_cap => 1)");
	return $node->safe_psql('postgres', "SELECT durable_enqueue('$queue', '{\"steps\": $steps}')");
}

sub step_started
{
	my ($task, $step) = @_;
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = 1 FROM durable.steps
		WHERE task_id = $task AND step = '$step' AND state = 'started'})
	  or die "step $step of task $task never started";
}

sub task_is
{
	my ($task) = @_;
	return $node->safe_psql('postgres',
		"SELECT state || ' attempt ' || attempt FROM durable.tasks WHERE task_id = $task");
}

# effects of the task's steps at the service: all of them, and distinct keys
sub effects_of
{
	my ($task) = @_;
	my $keys = join(',', map { "'$_'" } split /\n/, $node->safe_psql('postgres',
		"SELECT idempotency_key FROM durable.steps WHERE task_id = $task"));
	return $node->safe_psql('service',
		"SELECT count(*) || ' ' || count(DISTINCT key) FROM effects WHERE key IN ($keys)");
}

# until the worker has written what matches (a minute at most)
sub wait_for_output
{
	my ($run, $what) = @_;
	for (1 .. 600)
	{
		$run->{h}->pump_nb;
		return 1 if $run->{err} =~ $what;
		select(undef, undef, undef, 0.1);
	}
	die "the worker never wrote $what: $run->{err}";
}

# the worker's main connection (not its heartbeat's) waits for a lock
sub wait_for_lock
{
	my ($name) = @_;
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE application_name = '$name' AND wait_event_type = 'Lock'})
	  or die "$name never waited for the lock";
}

my $two_steps = '[["reserve", "idempotent"], ["charge", "idempotent"]]';

# ---- 2. the SQLSTATE table ----

# 55U01: an operator ends the lease of a task the worker holds in the
# middle of a call; the queue's lease is an hour, so only that brings it back
my $task = one_task('py_expire', '1 hour', '[["reserve", "idempotent"]]');
my $w = start_worker('py_expire', 'py-expire', { DURABLE_CALL_MS => 4000 }, '--idle-exit', '3');
step_started($task, 'reserve');
# after the heartbeat's first beat (the next is a third of an hour away), so
# that the worker's own next write meets the new fence
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'py-expire heartbeat'
	  AND state = 'idle' AND query LIKE '%durable_heartbeat_batch%'})
  or die 'the heartbeat never beat';
is($node->safe_psql('postgres', "SELECT durable_expire_lease($task, 'test')"), 'retry_same_activity',
	'55U01: durable_expire_lease settles the task the worker holds by the recovery table: retry');
$w->{h}->finish;
like($w->{err}, qr/task $task lost: [^\n]*stale/, '... the worker\'s next write was refused (stale fence) and it dropped the task');
like($w->{err}, qr/lost 1,/, '... once');
is(task_is($task), 'completed attempt 2', '... which came back after the retry delay and was finished');
is(effects_of($task), '1 1', '... with its effect once (the resend under its key deduplicated)');
is($node->safe_psql('postgres', qq{
	SELECT actor || ' ' || (detail ->> 'reason') || ' ' || (detail ->> 'expired_by')
	FROM durable.events WHERE task_id = $task AND kind = 'lease_expired'}),
	"$user test $user", '... and the lease_expired event names who ended the lease and why');

# 57014: the worker's statement is cancelled while it waits for a lock
$task = one_task('py_cancel', '30 s', $two_steps);
$w = start_worker('py_cancel', 'py-cancel', { DURABLE_CALL_MS => 500 }, '--idle-exit', '0.5');
step_started($task, 'reserve');
my $s = $node->background_psql('postgres');
$s->query_safe('BEGIN');
$s->query_safe("SELECT FROM durable.live_tasks WHERE task_id = $task FOR UPDATE");
wait_for_lock('py-cancel');
is($node->safe_psql('postgres', q{
	SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity
	WHERE application_name = 'py-cancel' AND wait_event_type = 'Lock'}), '1',
	'57014: the worker\'s statement was cancelled (pg_cancel_backend)');
wait_for_output($w, qr/57014/);
wait_for_lock('py-cancel');
$s->query_safe('COMMIT');
$w->{h}->finish;
like($w->{err}, qr/canceling statement due to user request \(57014\); retrying the statement/,
	'... and the worker ran it again');
is(task_is($task) . ', ' . effects_of($task), 'completed attempt 1, 2 2',
	'... finishing the task at its first attempt, every effect once');

# 40P01: the worker's statement waits for a row lock while holding a lock on
# the table that the row's holder then asks for; the worker's deadlock
# check, a second in, finds the cycle first (the other waits a minute)
$task = one_task('py_deadlock', '30 s', $two_steps);
$w = start_worker('py_deadlock', 'py-deadlock', { DURABLE_CALL_MS => 500 }, '--idle-exit', '0.5');
step_started($task, 'reserve');
$s->query_safe("SET deadlock_timeout = '60s'");
$s->query_safe('BEGIN');
$s->query_safe("SELECT FROM durable.live_tasks WHERE task_id = $task FOR UPDATE");
wait_for_lock('py-deadlock');
$s->query_safe('LOCK TABLE durable.live_tasks IN ACCESS EXCLUSIVE MODE');
$s->query_safe('COMMIT');
$w->{h}->finish;
like($w->{err}, qr/deadlock detected \(40P01\); retrying the statement/,
	'40P01: the worker\'s statement was chosen as the deadlock victim, and ran again');
is(task_is($task) . ', ' . effects_of($task), 'completed attempt 1, 2 2',
	'... finishing the task at its first attempt, every effect once');
$s->quit;

# a lost heartbeat connection: it reconnects, and the lease of the task in
# a call longer than the lease never runs out
$task = one_task('py_heartbeat', '6 s', '[["reserve", "idempotent"]]');
$w = start_worker('py_heartbeat', 'py-hb', { DURABLE_CALL_MS => 9000 }, '--idle-exit', '0.5');
step_started($task, 'reserve');
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'py-hb heartbeat'")
  or die 'no heartbeat connection';
is($node->safe_psql('postgres', q{
	SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
	WHERE application_name = 'py-hb heartbeat'}), '1',
	'the heartbeat\'s connection was terminated (pg_terminate_backend)');
$w->{h}->finish;
like($w->{err}, qr/heartbeat: [^\n]*; reconnecting/, '... it reconnected');
is(task_is($task) . ', ' . effects_of($task), 'completed attempt 1, 1 1',
	'... and kept the lease through a call longer than it: finished at the first attempt');
like($w->{err}, qr/lost 0,/, '... never lost');

# a heartbeat that hangs: the worker stops using the task once no beat has
# renewed its lease for two thirds of it (the server's lease, which the
# test extends itself, has not run out)
$task = one_task('py_watchdog', '3 s', '[["reserve", "idempotent"]]');
$w = start_worker('py_watchdog', 'py-watchdog', { DURABLE_CALL_MS => 8000 }, '--idle-exit', '0.5');
step_started($task, 'reserve');
$s = $node->background_psql('postgres');
$s->query_safe('BEGIN');
$s->query_safe(qq{
	SELECT durable_heartbeat(task_id, fence, 'test: the lease, while the heartbeat hangs', '1 hour')
	FROM durable.tasks WHERE task_id = $task});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	WHERE application_name = 'py-watchdog heartbeat' AND wait_event_type = 'Lock'})
  or die 'the heartbeat never waited for the lock';
# until the worker gives the task up, or (without the watchdog) waits for
# the lock itself after its call
for (my $tries = 0;; $tries++)
{
	$w->{h}->pump_nb;
	last if $w->{err} =~ /task $task lost/;
	last if $node->safe_psql('postgres', q{
		SELECT count(*) FROM pg_stat_activity
		WHERE application_name = 'py-watchdog' AND wait_event_type = 'Lock'}) eq '1';
	die "the worker neither gave the task up nor waited: $w->{err}" if $tries > 1800;
	select(undef, undef, undef, 0.1);
}
$s->query_safe('COMMIT');
$s->quit;
$w->{h}->finish;
like($w->{err}, qr/task $task lost: no heartbeat has renewed its lease for [\d.]+ s of [\d.]+/,
	'a hung heartbeat: the worker stopped using the task before its next durable call');
$node->safe_psql('postgres', qq{
	SELECT durable_expire_lease(task_id, 'test') FROM durable.tasks
	WHERE task_id = $task AND state = 'running'});
$node->poll_query_until('postgres', qq{
	SELECT state <> 'running' AND run_at <= now() FROM durable.tasks WHERE task_id = $task})
  or die 'the task never came back';
$w = start_worker('py_watchdog', 'py-watchdog-2', {}, '--idle-exit', '0.5');
$w->{h}->finish;
is(task_is($task) . ', ' . effects_of($task), 'completed attempt 2, 1 1',
	'... and the task came back, its effect once');

# what a handler raises becomes durable_fail with its error class (a
# second attempt at most, a second's retry delay)
$node->safe_psql('postgres', q{
	CREATE TABLE written (task_id bigint);
	CREATE TABLE called (how text);
	SELECT durable_create_queue('py_fail', max_attempts => 2, retry_base => 1, retry_cap => 1);
	SELECT count(durable_enqueue('py_fail', jsonb_build_object('fail', f)))
	FROM unnest(ARRAY['raise', 'permanent', 'unknown', 'call', 'unsafe_call', 'conflict', 'transaction',
		'step_in_transaction', 'sleep_in_transaction', 'spawn_in_transaction', 'emit_in_transaction',
		'caught_call', 'rolled_back', 'own_conn', 'cast']) f;
});
($out, $err) = run_python($python, 'clients/python/tests/failing_worker.py', $db, 'py_fail');
is($node->safe_psql('postgres', q{
	SELECT string_agg(format('%s: %s at attempt %s%s', t.payload ->> 'fail', t.state, t.attempt,
		(SELECT ', step ' || string_agg(s.state || ' at attempt ' || s.attempt, ', ')
		 FROM durable.steps s WHERE s.task_id = t.task_id)), E'\n' ORDER BY t.task_id)
	FROM durable.tasks t WHERE t.queue_name = 'py_fail'}),
	join("\n",
		'raise: failed at attempt 2',
		'permanent: failed at attempt 1',
		'unknown: needs_review at attempt 1',
		'call: completed at attempt 2, step committed at attempt 2',
		'unsafe_call: needs_review at attempt 1, step unknown at attempt 1',
		'conflict: failed at attempt 2, step committed at attempt 1',
		'transaction: completed at attempt 1',
		'step_in_transaction: failed at attempt 1',
		'sleep_in_transaction: failed at attempt 1',
		'spawn_in_transaction: failed at attempt 1',
		'emit_in_transaction: completed at attempt 1',
		'caught_call: completed at attempt 2, step committed at attempt 2',
		'rolled_back: completed at attempt 1',
		'own_conn: completed at attempt 2',
		'cast: failed at attempt 1'),
	'a handler\'s error is durable_fail with its class: transient by default (retried, then exhausted), '
	  . 'as Failed says, transient from an idempotent call, unknown from an unsafe one, permanent for 55U03; '
	  . 'its own write commits with the task; a step, a wait or a spawn inside task.transaction() fails '
	  . 'the task, an emit does not; a step call\'s failure is recorded even when the handler catches it; '
	  . 'a transaction rolled back after complete() does not complete the task; an 08001 on the handler\'s '
	  . 'own connection is the handler\'s (transient), not the worker\'s; 22P02 is permanent')
  or diag($err);
is($node->safe_psql('postgres', 'SELECT count(*) FROM written'), '1', '... that write once');
is($node->safe_psql('postgres', 'SELECT count(*) FROM called'), '0',
	'... the step inside task.transaction() never called anything');
is($node->safe_psql('postgres', q{
	SELECT string_agg(t.payload ->> 'fail', ' ' ORDER BY t.task_id) FROM durable.tasks t
	WHERE t.queue_name = 'py_fail' AND t.state = 'failed'
	  AND t.last_error ->> 'error' = 'InTransaction'}),
	'step_in_transaction sleep_in_transaction spawn_in_transaction',
	'... each of those three failed with InTransaction');
is($node->safe_psql('postgres', q{
	SELECT t.result FROM durable.tasks t
	WHERE t.queue_name = 'py_fail' AND t.payload ->> 'fail' = 'rolled_back'}),
	'{"written": false}', '... the handler\'s return after the rolled-back block is the task\'s result');
unlike($err, qr/connection lost/, '... and the worker never took the handler\'s connection for its own');

# a queryable step, the README's charge, whose handler uses the result
# (charge['id']): it has one shape however the step settled
$node->safe_psql('postgres', q{
	CREATE TABLE charges (n serial, key text UNIQUE);
	SELECT durable_create_queue('py_lookup', lease => '1 hour');
});
sub lookup_worker
{
	my ($env) = @_;
	local %ENV = (%ENV, %$env);
	my ($o, $e) = ('', '');
	my $h = IPC::Run::start([ $python, 'clients/python/tests/lookup_worker.py', $db, 'py_lookup' ],
		'>', \$o, '2>', \$e);
	$h->finish;
	return ($h->full_result(0), $e);
}
sub charge_of
{
	my ($task) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT t.state || ' ' || t.result || ', step ' || s.state || ' ' || s.result || ' '
		  || coalesce(s.effect_id, '-') || ', ' || (SELECT count(*) FROM charges c WHERE c.key = s.idempotency_key)
		  || ' charge'
		FROM durable.tasks t JOIN durable.steps s USING (partition_key, task_id)
		WHERE t.task_id = $task AND s.step = 'charge'});
}
sub expire_if_held
{
	my ($task) = @_;
	$node->safe_psql('postgres', qq{
		SELECT durable_expire_lease(task_id, 'test') FROM durable.tasks
		WHERE task_id = $task AND state = 'running'});
}

# the call raised after charging: the step is unknown, for a look-up, not
# a person; a lookup that raises (the service is down) leaves it there
# without stopping the worker; the next one settles it with the charge
$task = $node->safe_psql('postgres', q{SELECT durable_enqueue('py_lookup', '{"call": "raise"}')});
my ($rc, $log) = lookup_worker({ LOOKUP => 'down' });
is($node->safe_psql('postgres', qq{
	SELECT t.state <> 'needs_review' AND s.state = 'unknown'
	FROM durable.tasks t JOIN durable.steps s USING (partition_key, task_id)
	WHERE t.task_id = $task AND s.step = 'charge'}), 't',
	'a queryable step whose call raised is unknown (durable_step_unknown), not sent to review')
  or diag($log);
expire_if_held($task);
($rc, $log) = lookup_worker({ LOOKUP => 'down' });
is($rc, 0, '... a reconcile handler whose lookup raises keeps running, and stops by itself') or diag($log);
like($log, qr/task $task: looking step charge up failed \(the payment service is down\); left to its lease/,
	'... saying that it left the task to its lease');
expire_if_held($task);
($rc, $log) = lookup_worker({});
like(charge_of($task), qr/^completed \{"charged": "ch-(\d+)"\}, step committed \{"id": "ch-\1"\} -, 1 charge$/,
	'... the next one settles it: the step\'s result is what the call returns, and the task uses it')
  or diag($log);

# killed right after the call: the reconcile handler looks it up (the
# first one while the service is down)
$task = $node->safe_psql('postgres', q{SELECT durable_enqueue('py_lookup', '{"call": "ok"}')});
($rc, $log) = lookup_worker({ DURABLE_CRASH_AT => 'after_call:queryable' });
is($rc & 127, 9, 'a worker killed itself right after a queryable call');
expire_if_held($task);
($rc, $log) = lookup_worker({ LOOKUP => 'down' });
is($rc, 0, '... the reconcile handler whose lookup raises keeps running, and stops by itself') or diag($log);
like($log, qr/task $task: looking step charge up failed \(the payment service is down\); left to its lease/,
	'... saying that it left the task to its lease');
expire_if_held($task);
($rc, $log) = lookup_worker({});
like(charge_of($task), qr/^completed \{"charged": "ch-(\d+)"\}, step committed \{"id": "ch-\1"\} -, 1 charge$/,
	'... looked up by the reconcile handler, its result is what the call returns')
  or diag($log);
like($log, qr/looked_up 1,/, '... once');

# the normal path, and a step the handler finds started on a task it holds
for my $how ('ok', 'held')
{
	$task = $node->safe_psql('postgres', qq{SELECT durable_enqueue('py_lookup', '{"call": "$how"}')});
	($rc, $log) = lookup_worker({});
	like(charge_of($task), qr/^completed \{"charged": "ch-(\d+)"\}, step committed \{"id": "ch-\1"\} ch-\1, 1 charge$/,
		$how eq 'ok' ? 'a queryable step that ran: the same shape, and its effect id'
		: 'one found started on a task the worker holds, looked up in the handler: the same, once')
	  or diag($log);
}

# ---- 3. session mode and pooled mode ----

my $pure = '[["price", "pure"], ["total", "pure"]]';
for my $mode ('session', 'pooled')
{
	$node->safe_psql('postgres', qq{
		SELECT durable_create_queue('py_$mode');
		SELECT count(durable_enqueue('py_$mode', '{"steps": $pure}')) FROM generate_series(1, 8);
	});
	my $log_at = -s $node->logfile;
	$w = start_worker("py_$mode", "py-$mode", {}, '--idle-exit', '0.5',
		$mode eq 'pooled' ? '--pooled' : ());
	$w->{h}->finish;
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM durable.tasks WHERE queue_name = 'py_$mode' AND state = 'completed'"),
		'8', "$mode mode: every task completed");
	my @log = grep { /\] py-$mode( heartbeat)?: / } split /\n/,
	  substr(slurp_file($node->logfile), $log_at);
	my $listens = grep { /LISTEN durable_ready/ } @log;
	my $prepared = grep { /execute _pg3_/ } @log;
	if ($mode eq 'session')
	{
		ok($listens && $prepared, 'session mode: LISTEN durable_ready, and statements prepared');
	}
	else
	{
		is("$listens $prepared", '0 0', 'pooled mode: no LISTEN, no prepared statement');
		my $said = () = $w->{err} =~ /pooled: LISTEN needs a session connection; polling/g;
		is($said, 1, '... and it says so once');
	}
}

# ---- 4. a user's own test, as clients/python/README.md shows it ----

{
	local $ENV{DURABLE_TEST_DSN} = $db;
	($out, $err) = run_python($python, 'clients/python/examples/test_crash_recovery.py');
}
is($out, "ok\n", "a user's test: a worker SIGKILLed mid-step, its task back at once by durable_expire_lease")
  or diag($err);
my ($shown) = slurp_file('clients/python/README.md') =~
  /\(it is `examples\/test_crash_recovery\.py`\).*?```python\n(.*?)```/s;
is($shown, slurp_file('clients/python/examples/test_crash_recovery.py'),
	'clients/python/README.md shows that test as it is');

is($node->safe_psql('postgres', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() reports nothing');
$node->stop;
done_testing();
