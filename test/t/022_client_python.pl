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
#    statements; pooled, it does neither and says so once; either way one
#    line at start says the queue, the name, the lease, the batch, the
#    concurrency and the mode, and why;
# 4. a user's own test of a worker that crashes and whose task comes back at
#    once through durable_expire_lease (clients/python/examples/
#    test_crash_recovery.py, which clients/python/README.md shows as it is);
# 5. producers (clients/python/tests/producer_checks.py): enqueue in the
#    caller's transaction (rolled back: no task; committed: the task), every
#    option of durable_enqueue by name, a batch, debounce, throttle, emit,
#    schedule; a typed error for each refusal, chained from psycopg's; a
#    result awaited: completed, failed, cancelled, timed out;
# 6. durable_begin: a worker killed with a batch claimed spends the attempt
#    of the task it began only (the others go back not_begun); a task
#    whose lease ended before it began (55U01 at durable_begin) is dropped
#    unrun, and run when it comes back;
# 7. a connection string that cannot work (nothing listens, an unknown
#    role, a malformed string, a malformed heartbeat_dsn): run() raises
#    ConnectFailed with the reason after a few attempts, at once for a
#    malformed one;
# 8. PgBouncer in transaction mode, given to a worker without pooled=True:
#    it finds out at start, and says so in its first line; told pooled=False
#    it finds out from the error its first prepared statement meets, says so
#    once, and goes on unprepared; no task fails either way; the heartbeat
#    connects where heartbeat_dsn says;
# 9. concurrency=4: four handlers run at the same time, each on a loop of
#    its own.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;
use DurablePgBouncer;
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

# A worker inside its step 'reserve' until the test lets it go on: the
# service's table is locked before the worker starts, so that the step
# stays started however slowly the machine runs (a call that only took
# half a second could be over before a poll saw it).  Returns the worker
# and the session holding the service; COMMIT there lets the call finish.
sub worker_held_in_step
{
	my ($queue, $name, $task) = @_;
	my $held = $node->background_psql('service');
	$held->query_safe('BEGIN');
	$held->query_safe('LOCK TABLE effects IN EXCLUSIVE MODE');
	my $run = start_worker($queue, $name, {}, '--idle-exit', '0.5');
	step_started($task, 'reserve');
	return ($run, $held);
}

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
($w, my $held) = worker_held_in_step('py_cancel', 'py-cancel', $task);
my $s = $node->background_psql('postgres');
$s->query_safe('BEGIN');
$s->query_safe("SELECT FROM durable.live_tasks WHERE task_id = $task FOR UPDATE");
$held->query_safe('COMMIT');
$held->quit;
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
($w, $held) = worker_held_in_step('py_deadlock', 'py-deadlock', $task);
$s->query_safe("SET deadlock_timeout = '60s'");
$s->query_safe('BEGIN');
$s->query_safe("SELECT FROM durable.live_tasks WHERE task_id = $task FOR UPDATE");
$held->query_safe('COMMIT');
$held->quit;
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
		like($w->{err}, qr/worker py-session: queue py_session, lease the queue's, batch 10, concurrency 1, session mode \(each statement ran in the connection's own server session\): LISTEN durable_ready/,
			'... and its first line says the queue, the name, the lease, the batch, the concurrency and the mode, and why');
	}
	else
	{
		is("$listens $prepared", '0 0', 'pooled mode: no LISTEN, no prepared statement');
		my $said = () = $w->{err} =~ /pooled \(pooled=True\): no prepared statements, no LISTEN \(it needs a session connection\); polling every 0.2 s/g;
		is($said, 1, '... and it says so once, in its first line');
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

# ---- 5. producers ----

$node->safe_psql('postgres', q{
	CREATE TABLE orders (note text);
	SELECT durable_create_queue('py_produce', max_attempts => 1);
	SELECT durable_create_queue('py_idle');
	SELECT durable_set_rate_limit('py-llm', 10, '1 minute');
	SELECT durable_create_budget('py-spend', 100);
	CREATE ROLE py_outsider LOGIN;
});
($out, $err) = run_python($python, 'clients/python/tests/producer_checks.py', $db,
	"host=$host port=$port user=py_outsider dbname=postgres");
my %fact = map { /^(\w+)=(.*)$/ ? ($1 => $2) : () } split /\n/, $out;
sub fact_is
{
	my ($name, $expected, $what) = @_;
	is($fact{$name}, $expected, $what) or diag($err);
}
sub fact_like
{
	my ($name, $expected, $what) = @_;
	like($fact{$name} // '', $expected, $what) or diag($err);
}
sub task_row
{
	my ($task, $columns) = @_;
	return $node->safe_psql('postgres', "SELECT $columns FROM durable.tasks WHERE task_id = " . ($task || 0));
}

fact_is('in_transaction_before_rollback', 'INTRANS', 'enqueue on the caller\'s connection runs in its open transaction');
is(task_row($fact{rolled_back}, 'count(*)') . ' '
	. $node->safe_psql('postgres', "SELECT count(*) FROM orders WHERE note = 'rolled back'"), '0 0',
	'... rolled back, it leaves neither the application\'s row nor the task');
fact_like('rolled_back_result', qr/^UnknownObject 42704 from psycopg: task \d+ does not exist$/,
	'... whose result is then UnknownObject (42704), chained from psycopg\'s error');
fact_is('still_in_transaction', 'INTRANS', '... and enqueue never commits by itself');
is(task_row($fact{committed}, q{state || ' ' || payload || ' ' || idempotency_key}) . ', '
	. $node->safe_psql('postgres', "SELECT count(*) FROM orders WHERE note = 'committed'"),
	'ready {"note": "committed"} order-1, 1',
	'... committed, the application\'s row and the task are both there');
is(task_row($fact{in_block}, 'state') . ' '
	. $node->safe_psql('postgres', "SELECT count(*) FROM orders WHERE note = 'block'"), 'ready 1',
	'... as in psycopg\'s transaction block');

is(task_row($fact{with_options}, q{concat_ws(' | ', payload, idempotency_key, run_at AT TIME ZONE 'UTC', priority,
	class, max_attempts, deadline, workflow_version, metadata, concurrency_key, fairness_key, rate_limits,
	budgets)}),
	'{"all": "options"} | all-options | 2031-01-02 03:04:05 | 7 | queryable | 9 | 02:00:00 | w-3 | '
	  . '{"tenant": "t1"} | c1 | f1 | {"py-llm": 2} | {py-spend,task:' . ($fact{with_options} // '') . '}',
	'every option of durable_enqueue, given by name, is the task\'s');
is($node->safe_psql('postgres', 'SELECT amount FROM durable.budgets WHERE name = ' . "'task:" . ($fact{with_options} // 0) . "'"),
	'12.5', '... spend_limit too: a budget of its own');
fact_is('same_key_same_payload', 'True', '... the same key with the same payload returns the same task');
is(task_row($fact{deadline_as_text}, 'deadline'), '3 days', '... a deadline may be PostgreSQL\'s text');
is(task_row($fact{committed}, q{concat_ws(' | ', priority, class, max_attempts IS NOT NULL, deadline, metadata, run_at <= now())}),
	'0 | idempotent | t | t',
	'... and what is left out takes durable\'s defaults');

fact_like('idempotency_conflict', qr/^IdempotencyConflict 55U03 from psycopg: idempotency key "all-options" was already used/,
	'another payload under the key: IdempotencyConflict (55U03)');
fact_like('unknown_queue', qr/^UnknownObject 42704 from psycopg: queue "py_nowhere" does not exist$/,
	'no such queue: UnknownObject (42704)');
fact_like('unknown_rate_limit', qr/^UnknownObject 42704 from psycopg: rate limit "py-none" does not exist$/,
	'no such rate limit: UnknownObject (42704)');
fact_like('bad_class', qr/^InvalidArgument 22023 from psycopg: unknown activity class "careless"$/,
	'a bad value: InvalidArgument (22023)');
fact_like('permission_denied', qr/^PermissionDenied 42501 from psycopg: permission denied for function durable_enqueue$/,
	'a role without durable_producer: PermissionDenied (42501)');
fact_like('unknown_task', qr/^UnknownObject 42704 from psycopg: task 1 does not exist$/,
	'the result of no task: UnknownObject (42704)');
fact_is('is_a_durable_error', 'True', 'they are DurableErrors, BudgetExhausted (55U05) too');
fact_is('after_refusal', 'INERROR', '... and a refusal leaves the caller\'s transaction to the caller (failed, not rolled back)');

my @batch = split /,/, ($fact{batch} // '');
is($node->safe_psql('postgres', 'SELECT string_agg(concat_ws(\' \', payload, idempotency_key, priority), \', \' ORDER BY task_id)'
		. ' FROM durable.tasks WHERE task_id IN (' . join(',', @batch, 0) . ')'),
	'{"b": 1} b-1 2, {"b": 2} 2, {"b": 3} b-3 2',
	'enqueue_batch: a task a payload, each with its key (or none), the options for all');
fact_is('batch_again', 'True', '... a key used again returns its task');
fact_is('debounced', 'True', 'debounce: one task for the calls of a key');
is(task_row($fact{debounced_task}, q{payload::text || ' ' || (run_at > now() + interval '59 minutes')}),
	'{"text": "hello"} true', '... with the last payload, an hour after the last call');
fact_is('throttled', 'True', 'throttle: one task a key per period');
fact_is('emitted', '[True, False]', 'emit: true the first time, false for the same payload again');
fact_like('emit_conflict', qr/^IdempotencyConflict 55U03 from psycopg: event "paid:1" of queue "py_idle" was already emitted/,
	'... IdempotencyConflict for another');
fact_is('next_run', 'True', 'schedule returns the next run');
is($node->safe_psql('postgres',
		q{SELECT concat_ws(' ', cron, timezone, queue_name, payload) FROM durable.schedule_list WHERE schedule_name = 'py-nightly'}),
	'0 3 * * * Europe/Paris py_idle {"nightly": true}', '... the schedule as given');
fact_like('bad_cron', qr/^InvalidArgument 22023 from psycopg: invalid cron expression "every day"/,
	'... a bad cron expression: InvalidArgument (22023)');
fact_like('schedule_denied', qr/^PermissionDenied 42501 /, '... a role without durable_operator: PermissionDenied');
fact_is('unscheduled', '[True, False]', 'unschedule: true, then false when there is none');

fact_is('completed', '{"done": {"how": "slow"}}', 'wait_for_result: the result of a task a worker completed');
fact_is('result', q{Result(state='completed', result={'done': {'how': 'slow'}}, error=None, finished_at=None, stop_code=None)},
	'result: its state and result');
fact_like('wait_in_transaction', qr/^InTransaction: wait_for_result for task \d+ with a transaction open/,
	'... refused with a transaction open, whose task could not run before it ends');
fact_is('failed', 'TaskFailed True {"error": "Failed", "message": "the card was declined"}',
	'... TaskFailed with the error of a task that failed');
fact_is('after_wait', 'IDLE', '... each poll a transaction of its own, none left open');
fact_like('timed_out', qr/^ResultTimeout True ready True: task \d+ is still ready after 1.5 s$/,
	'... ResultTimeout, a TimeoutError and a DurableError, once the timeout ran out');
fact_is('cancelled', 'TaskCancelled True', '... TaskCancelled for a task cancelled');
fact_like('wait_unknown', qr/^UnknownObject 42704 /, '... UnknownObject at once for no task');

# ---- 6. durable_begin ----

$node->safe_psql('postgres', q{
	CREATE TABLE py_runs (task_id bigint, fence bigint, thread text);
	CREATE TABLE py_gate ();
	CREATE ROLE py_hb LOGIN;
	GRANT durable_worker TO py_hb;
});

# option_worker(dsn, queue, options as JSON): clients/python/tests/option_worker.py
sub option_worker
{
	my ($dsn, $queue, $options) = @_;
	my %run = (out => '', err => '');
	$run{h} = IPC::Run::start([ $python, 'clients/python/tests/option_worker.py', $dsn, $queue, $options ],
		'>', \$run{out}, '2>', \$run{err});
	return \%run;
}

# a worker holds a batch of three and dies in the first task's handler:
# only that one had begun
$node->safe_psql('postgres', q{
	SELECT durable_create_queue('py_begin', lease => '1 s', retry_base => 1, retry_cap => 1);
	SELECT durable_enqueue('py_begin', '{"kill": true}', priority => 10);
	SELECT count(durable_enqueue('py_begin', '{"steps": 1}')) FROM generate_series(1, 2);
});
$w = option_worker($db, 'py_begin', '{"name": "py-begin", "batch": 3}');
$w->{h}->finish;
is($w->{h}->full_result(0) & 127, 9, 'a worker that holds a batch of three was killed in its first task\'s handler')
  or diag($w->{err});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM durable.tasks WHERE queue_name = 'py_begin' AND state = 'running'})
  or die 'the leases never ran out';
is($node->safe_psql('postgres', q{
	SELECT string_agg(format('%s: attempt %s, %s', t.payload, t.attempt,
		(SELECT string_agg(e.detail ->> 'action', ' ') FROM durable.events e
		 WHERE e.task_id = t.task_id AND e.kind = 'lease_expired')), E'\n' ORDER BY t.priority DESC, t.task_id)
	FROM durable.tasks t WHERE t.queue_name = 'py_begin'}),
	join("\n", '{"kill": true}: attempt 1, retry_same_activity',
		'{"steps": 1}: attempt 0, not_begun', '{"steps": 1}: attempt 0, not_begun'),
	'the worker had said it began the task it ran (durable_begin): that attempt is spent; '
	  . 'the two it never began went back with their attempts (not_begun)');
$w = option_worker($db, 'py_begin', '{"name": "py-begin-2"}');
$w->{h}->finish;
is($node->safe_psql('postgres', q{
	SELECT string_agg(state || ' attempt ' || attempt || ' ' || (began_at IS NOT NULL), ', ' ORDER BY priority DESC, task_id)
	FROM durable.tasks WHERE queue_name = 'py_begin'}),
	'completed attempt 2 true, completed attempt 1 true, completed attempt 1 true',
	'... the next worker finished them all, each begun');

# the first task of a batch ends the second's lease before it began: the
# worker's durable_begin for it is refused (55U01), and it drops it unrun
$node->safe_psql('postgres', q{
	SELECT durable_create_queue('py_begin_stale', lease => '1 hour');
	SELECT durable_enqueue('py_begin_stale', '{"expire_other": true}', priority => 10);
	SELECT durable_enqueue('py_begin_stale', '{"steps": 1}');
});
my $second = $node->safe_psql('postgres',
	q{SELECT task_id FROM durable.tasks WHERE queue_name = 'py_begin_stale' AND priority = 0});
$w = option_worker($db, 'py_begin_stale', '{"name": "py-begin-stale", "batch": 2}');
$w->{h}->finish;
like($w->{err}, qr/task $second lost: [^\n]*stale/, 'a task whose lease ended before it began: durable_begin is refused (55U01), the task dropped');
is($node->safe_psql('postgres', qq{
	SELECT (SELECT count(*) FROM py_runs r WHERE r.task_id = t.task_id) || ' run, under fence '
	  || (SELECT string_agg(r.fence::text, ',') FROM py_runs r WHERE r.task_id = t.task_id)
	  || ' of ' || t.fence || ', ' || t.state || ' attempt ' || t.attempt
	FROM durable.tasks t WHERE t.task_id = $second}), '1 run, under fence 3 of 3, completed attempt 1',
	'... its handler never ran under the old fence; it ran once when the task came back, at its first attempt')
  or diag($w->{err});
like($w->{err}, qr/lost 1,/, '... counted lost once');

# ---- 7. a connection string that cannot work ----

my $nobody_listens = PostgreSQL::Test::Cluster::get_free_port();
my @start = ($python, 'clients/python/tests/start_failures.py', "host=127.0.0.1 port=$nobody_listens dbname=postgres",
	"host=$host port=$port user=py_nobody dbname=postgres", $db);
($out, $err) = ('', '');
IPC::Run::run(\@start, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
my %failure = map { /^(\w+): (.*)$/ ? ($1 => $2) : () } split /\n/, $out;
like($failure{refused} // '', qr/^ConnectFailed after \d+ s \(OperationalError\): could not connect after 5 attempts over \d+ s: .*Connection refused/,
	'nothing listens: run() raises ConnectFailed with the reason, after five attempts')
  or diag($err);
like($failure{unknown_role} // '', qr/^ConnectFailed after \d+ s \(OperationalError\): could not connect after 5 attempts over \d+ s: .*role "py_nobody" does not exist/,
	'an unknown role: the same, with the server\'s reason') or diag($err);
like($failure{malformed} // '', qr/^ConnectFailed after 0 s \(ProgrammingError\): bad connection string: missing "=" after "nonsense"/,
	'a malformed connection string: at once') or diag($err);
like($failure{heartbeat_malformed} // '', qr/^ConnectFailed after 0 s \(ProgrammingError\): heartbeat_dsn: bad connection string: /,
	'... a malformed heartbeat_dsn too, whose heartbeat would let every lease run out') or diag($err);
is(scalar(() = $err =~ /could not connect \([^\n]*\); attempt \d of 5 in \d s/g), 8,
	'... each attempt said in a line');

# ---- 8. PgBouncer in transaction mode, the worker not told ----

my $bouncer = DurablePgBouncer->new($node, 'py_tx', pool_mode => 'transaction', default_pool_size => 2);
note('PgBouncer ' . $bouncer->admin('SHOW VERSION'));
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('py_auto', lease => '30 s');
	SELECT count(durable_enqueue('py_auto', '{"steps": $pure}')) FROM generate_series(1, 8);
});
my $log_at = -s $node->logfile;
$w = start_worker('py_auto', 'py-auto', {}, '--idle-exit', '0.5', '--db', $bouncer->connstr('postgres'));
$w->{h}->finish;
is($w->{h}->full_result(0) . ' ' . $node->safe_psql('postgres', q{
	SELECT string_agg(DISTINCT state || ' attempt ' || attempt, ', ') FROM durable.tasks WHERE queue_name = 'py_auto'}),
	'0 completed attempt 1', 'the example worker through PgBouncer in transaction mode, without --pooled: every task completed at once')
  or diag($w->{err});
like($w->{err}, qr/worker py-auto: queue py_auto, [^\n]*, pooled \(a transaction-mode pooler: [^\n]*\): no prepared statements, no LISTEN/,
	'... it found the pooler at start, and its first line says so, and why');
my @log = grep { /\] py-auto( heartbeat)?: / } split /\n/, substr(slurp_file($node->logfile), $log_at);
ok(@log > 0, '... its statements are in the server\'s log');
is(scalar(grep { /LISTEN durable_ready|execute _pg3_/ } @log), 0, '... none a LISTEN or a prepared statement');
like($w->{err}, qr/stopped: completed 8, failed 0,/, '... and nothing failed');
unlike($w->{err}, qr/lost a prepared statement/, '... nor met a pooler\'s error');

# told pooled=False, through a pool of one server session in which another
# client left a prepared statement of the name psycopg gives its first
# (a PgBouncer that tracks protocol-level prepared statements itself, 1.21
# on, would rename psycopg's and spare the worker the error: not this one)
my @untracked = $bouncer->version >= 12100 ? (max_prepared_statements => 0) : ();
my $one = DurablePgBouncer->new($node, 'py_tx1', pool_mode => 'transaction', default_pool_size => 1,
	@untracked);
IPC::Run::run([ 'psql', '-XAtq', '-d', $one->connstr('postgres'), '-c', 'PREPARE _pg3_0 AS SELECT 1' ])
  or die 'could not prepare through the pooler';
$node->safe_psql('postgres', q{
	SELECT durable_create_queue('py_react', lease => '30 s');
	SELECT count(durable_enqueue('py_react', '{"steps": 3}')) FROM generate_series(1, 8);
});
$w = option_worker($one->connstr('postgres'), 'py_react', '{"name": "py-react", "pooled": false}');
$w->{h}->finish;
is($node->safe_psql('postgres', q{
	SELECT string_agg(DISTINCT state || ' attempt ' || attempt, ', ') FROM durable.tasks WHERE queue_name = 'py_react'}),
	'completed attempt 1', 'pooled=False behind a transaction-mode pooler: every task completed at its first attempt')
  or diag($w->{err});
is(scalar(() = $w->{err} =~ /a transaction-mode pooler lost a prepared statement \(42P05: prepared statement "_pg3_0" already exists\): pooled mode from now on/g),
	1, '... the error of its first prepared statement made it go over to pooled mode, saying so once');
like($w->{err}, qr/session mode \(pooled=False\)/, '... from session mode, as it was told');
like($w->{err}, qr/failed 0, [^\n]*lost 0,/, '... no task failed or lost for it');

# the heartbeat through heartbeat_dsn (as another role, to tell it apart):
# the handler waits in a step while the test holds py_gate's lock, longer
# than a third of the lease
$node->safe_psql('postgres', q{
	SELECT durable_create_queue('py_hbdsn', lease => '3 s');
	SELECT durable_enqueue('py_hbdsn', '{"gate": true}');
});
$s = $node->background_psql('postgres');
$s->query_safe('BEGIN');
$s->query_safe('LOCK TABLE py_gate IN ACCESS EXCLUSIVE MODE');
$w = option_worker($bouncer->connstr('postgres'), 'py_hbdsn',
	qq({"name": "py-hbdsn", "heartbeat_dsn": "host=$host port=$port user=py_hb dbname=postgres"}));
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE usename = 'py_hb' AND application_name = 'py-hbdsn heartbeat'})
  or die "the heartbeat never connected as py_hb: $w->{err}";
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_stat_activity WHERE usename <> 'py_hb' AND application_name = 'py-hbdsn heartbeat'}),
	'0', 'heartbeat_dsn: the heartbeat connects there, not where the worker does');
$s->query_safe('COMMIT');
$s->quit;
$w->{h}->finish;
is(task_is($node->safe_psql('postgres', q{SELECT task_id FROM durable.tasks WHERE queue_name = 'py_hbdsn'})),
	'completed attempt 1', '... and kept the lease through a call longer than it') or diag($w->{err});

# ---- 9. concurrency ----

# four tasks that each wait (a minute at most) until four handlers wait together
$node->safe_psql('postgres', q{
	SELECT durable_create_queue('py_concurrent', lease => '2 minutes');
	SELECT count(durable_enqueue('py_concurrent', '{"barrier": 4}')) FROM generate_series(1, 4);
});
$w = option_worker($db, 'py_concurrent', '{"name": "py-concurrent", "concurrency": 4}');
$w->{h}->finish;
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE state = 'completed' AND attempt = 1) || ' completed, '
	  || count(DISTINCT result ->> 'thread') || ' threads'
	FROM durable.tasks WHERE queue_name = 'py_concurrent'}), '4 completed, 4 threads',
	'concurrency=4: four handlers ran at the same time (they met at a barrier), each in a loop of its own')
  or diag($w->{err});
like($w->{err}, qr/worker py-concurrent: queue py_concurrent, lease the queue's, batch 1, concurrency 4, /,
	'... a batch of one task a loop, as its first line says');
like($w->{err}, qr/stopped: completed 4, failed 0,/, '... counted together');

$_->stop for $bouncer, $one;

is($node->safe_psql('postgres', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() reports nothing');
$node->stop;
done_testing();
