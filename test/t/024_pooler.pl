# durable behind a pooler: PgBouncer in transaction mode and in session
# mode, each in front of the same server with two server connections a
# database (test/perl/DurablePgBouncer.pm).
#
# 1. Every call of the SQL API, as the README uses them, from one client
#    whose every transaction is made to land on another server backend than
#    its last (a second client holds the other one meanwhile; PgBouncer
#    hands out the connection used last first): durable keeps nothing of a
#    session between transactions that a pooled client would miss.  Its
#    per-backend state is plans, caches invalidated by DDL and a note of
#    each worker's last claim (which only spares writes); no session
#    setting, temporary table, advisory lock or prepared statement of the
#    client's.  In session mode the client keeps its backend.
# 2. LISTEN durable_ready: in session mode a listening client is woken by
#    an enqueue; in transaction mode its LISTEN stays on the backend it ran
#    on, which the client no longer holds in its next transaction: the
#    notification never reaches it, so a pooled client must poll (or listen
#    on a connection of its own, past the pooler).
# 3. Worker programs through the pooler (the table @workers: the C worker
#    of examples/, and the example workers of the Python and TypeScript
#    clients, pooled behind the transaction-mode pooler, where they poll,
#    and listening behind the session-mode one): killed
#    with SIGKILL at a step's worst moments and stopped with SIGTERM while
#    several of them share the two server connections; then fresh workers
#    finish, every task completes, every effect once.  Both connections of
#    each worker, the service's too, go through the pooler.
use strict;
use warnings;
use DBI;
use IPC::Run;
use Time::HiRes qw(usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;
use DurablePgBouncer;
use DurablePython;

my $node = DurableNode::new_node('pooled',
	"durable.reconcile_interval = '100ms'", "max_connections = 60");
$node->safe_psql('postgres', 'CREATE DATABASE service');
$node->safe_psql('service', slurp_file('examples/service.sql'));
my $user = $node->safe_psql('postgres', 'SELECT current_user');

my %bouncers = map {
	$_ => DurablePgBouncer->new($node, $_, pool_mode => $_, default_pool_size => 2)
} qw(transaction session);
note('PgBouncer ' . $bouncers{transaction}->admin('SHOW VERSION'));

# a DBI client through a pooler: no prepared statements of its own, as a
# client library's "pooled" option would have it
sub client
{
	my ($bouncer) = @_;
	my $dsn = 'dbi:Pg:' . join(';', split / /, $bouncer->connstr('postgres'));
	return DBI->connect($dsn, '', '',
		{ AutoCommit => 1, RaiseError => 1, PrintError => 0, PrintWarn => 0,
		  pg_server_prepare => 0 });
}

# ---- 1. the SQL API ----

for my $mode (qw(transaction session))
{
	my $app = client($bouncers{$mode});
	my $other = client($bouncers{$mode});
	my (@backends, @holders, @failed);

	# One transaction of the app; the other client holds a backend through
	# it, so that in transaction mode the app gets the one it did not use
	# last.  The other commits first, so that its backend is the one used
	# last: it takes the app's next time.
	my $run = sub {
		my ($sql, @binds) = @_;
		$other->begin_work;
		push @holders, $other->selectrow_array('SELECT pg_backend_pid()');
		$app->begin_work;
		push @backends, $app->selectrow_array('SELECT pg_backend_pid()');
		my $rows = eval { $app->selectall_arrayref($sql, { Slice => {} }, @binds) };
		my ($error, $sqlstate) = ($@, $app->state);
		$other->commit;
		$rows ? $app->commit : $app->rollback;
		return ($rows, $error, $sqlstate);
	};
	# a call that must work: its rows (as hashes)
	my $call = sub {
		my ($sql, @binds) = @_;
		my ($rows, $error) = $run->($sql, @binds);
		push @failed, "$sql: $error" unless $rows;
		return $rows || [ {} ];
	};
	# the first column of its first row
	my $value = sub { my $row = $call->(@_)->[0]; return (values %$row)[0] };
	# a call that must be refused with sqlstate
	my $refused = sub {
		my ($sqlstate, $sql, @binds) = @_;
		my ($rows, $error, $got) = $run->($sql, @binds);
		$got = 'no error' if $rows;
		push @failed, "$sql: $got, not $sqlstate" unless $got eq $sqlstate;
	};

	my $q = "api_$mode";
	$call->("SELECT durable_create_queue(?, lease => '30 seconds', max_attempts => 5, notify => true)", $q);
	$call->("SELECT durable_alter_queue(?, progress_timeout => '1 hour')", $q);
	my $first = $value->('SELECT durable_enqueue(?, ?)', $q, '{"to": "ada"}');
	my $keyed = $value->("SELECT durable_enqueue(?, '{\"to\": \"bob\"}', idempotency_key => 'welcome-bob')", $q);
	is($value->("SELECT durable_enqueue(?, '{\"to\": \"bob\"}', idempotency_key => 'welcome-bob')", $q),
		$keyed, "$mode: an enqueue repeated from another backend returns the same task");
	$refused->('55U03', "SELECT durable_enqueue(?, '{\"to\": \"eve\"}', idempotency_key => 'welcome-bob')", $q);
	$call->("SELECT durable_enqueue_batch(?, ARRAY['{\"n\": 1}', '{\"n\": 2}']::jsonb[])", $q);

	# a worker: claim, heartbeat, a step through its states, commit
	my $claim = $call->("SELECT task_id, fence FROM durable_claim(?, 'pooled-worker')", $q)->[0];
	my ($task, $fence) = @$claim{qw(task_id fence)};
	is($task, $first, "$mode: the oldest task was claimed first");
	$call->("SELECT durable_heartbeat(?, ?, progress => 'rendered')", $task, $fence);
	$call->('SELECT * FROM durable_heartbeat_batch(ARRAY[?]::bigint[], ARRAY[?]::bigint[])', $task, $fence);
	my $step = $call->("SELECT version, idempotency_key FROM durable_step(?, ?, 'charge', 'idempotent', '{\"cents\": 100}')",
		$task, $fence)->[0];
	my $version = $value->("SELECT durable_step_start(?, ?, 'charge', ?)", $task, $fence, $step->{version});
	$call->("SELECT durable_record_receipt(?, ?, 'charge', 'succeeded', 'ch-1', '{}')", $task, $fence);
	$call->("SELECT durable_commit(?, ?, '{\"charged\": true}', step => 'charge', expected_version => ?)",
		$task, $fence, $version + 1);
	is($call->("SELECT state, idempotency_key FROM durable_step(?, ?, 'charge', 'idempotent', '{\"cents\": 100}')",
			$task, $fence)->[0]{idempotency_key}, $step->{idempotency_key},
		"$mode: the replayed step has its key, read on another backend");
	$call->("SELECT durable_checkpoint(?, ?, '{\"page\": 2}', 0)", $task, $fence);
	$call->("SELECT durable_commit(?, ?, result => '{\"message_id\": \"m-1\"}')", $task, $fence);
	$refused->('55U01', 'SELECT durable_commit(?, ?)', $task, $fence);

	# a failure, a release, a commit that claims the next
	$claim = $call->("SELECT task_id, fence FROM durable_claim(?, 'pooled-worker')", $q)->[0];
	is($value->("SELECT durable_fail(?, ?, 'transient', '{\"http\": 503}', retry_after => '1 hour')", @$claim{qw(task_id fence)}),
		'schedule_retry', "$mode: a transient failure schedules a retry");
	$claim = $call->("SELECT task_id, fence FROM durable_claim(?, 'pooled-worker')", $q)->[0];
	$call->("SELECT durable_release(?, ?, 'shutdown')", @$claim{qw(task_id fence)});
	$claim = $call->("SELECT task_id, fence FROM durable_claim(?, 'pooled-worker', batch => 2)", $q)->[0];
	$call->("SELECT * FROM durable_commit_and_claim(?, ?, worker => 'pooled-worker')", @$claim{qw(task_id fence)});
	$call->("SELECT durable_commit_batch(ARRAY(SELECT task_id FROM durable.tasks WHERE queue_name = ? AND state = 'running'),"
		  . " ARRAY(SELECT fence FROM durable.tasks WHERE queue_name = ? AND state = 'running'))", $q, $q);

	# a workflow that waits: sleep, await an event, spawn and join a child
	my $wf = $value->(q{SELECT durable_enqueue(?, '{"wf": true}')}, $q);
	$claim = $call->("SELECT task_id, fence FROM durable_claim(?, 'pooled-worker')", $q)->[0];
	is($value->("SELECT durable_sleep(?, ?, 'nap', until => '2000-01-01')", @$claim{qw(task_id fence)}),
		'elapsed', "$mode: a sleep already over has elapsed");
	is($value->("SELECT status FROM durable_await(?, ?, 'paid', 'pay-1')", @$claim{qw(task_id fence)}),
		'waiting', "$mode: an await of an event not emitted waits");
	is($value->(q{SELECT durable_emit(?, 'pay-1', '{"ok": true}')}, $q), 1, "$mode: the event was emitted");
	$claim = $call->("SELECT task_id, fence FROM durable_claim(?, 'pooled-worker')", $q)->[0];
	is($claim->{task_id}, $wf, "$mode: the event woke the workflow");
	is($value->("SELECT status FROM durable_await(?, ?, 'paid', 'pay-1')", @$claim{qw(task_id fence)}),
		'received', "$mode: replayed, the await has received the event");
	my $child = $value->("SELECT durable_spawn(?, ?, 'label', ?)", @$claim{qw(task_id fence)}, $q);
	is($value->("SELECT status FROM durable_join(?, ?, 'labels')", @$claim{qw(task_id fence)}),
		'waiting', "$mode: the join waits for its child");
	my $c = $call->("SELECT task_id, fence FROM durable_claim(?, 'pooled-worker')", $q)->[0];
	is($c->{task_id}, $child, "$mode: the child was claimed");
	$call->('SELECT durable_commit(?, ?)', @$c{qw(task_id fence)});
	$claim = $call->("SELECT task_id, fence FROM durable_claim(?, 'pooled-worker')", $q)->[0];
	is($value->("SELECT status FROM durable_join(?, ?, 'labels')", @$claim{qw(task_id fence)}),
		'done', "$mode: the child's end woke the parent, and its join is done");
	$call->('SELECT durable_commit(?, ?)', @$claim{qw(task_id fence)});

	# schedules
	$call->("SELECT durable_schedule(?, '0 3 * * *', ?)", "nightly_$mode", $q);
	is($value->('SELECT count(*) FROM durable.schedule_list WHERE schedule_name = ?', "nightly_$mode"), 1,
		"$mode: the schedule is listed");
	$call->('SELECT durable_unschedule(?)', "nightly_$mode");

	# operators: pause, resume, expire a lease, review, cancel, quarantine, replay
	$call->('SELECT durable_pause(?)', $q);
	my $paused = $value->(q{SELECT durable_enqueue(?, '{"steps": 1}')}, $q);
	is($value->("SELECT count(*) FROM durable_claim(?, 'pooled-worker')", $q), 0,
		"$mode: a paused queue hands nothing out");
	$call->('SELECT durable_resume(?)', $q);
	$claim = $call->("SELECT task_id, fence FROM durable_claim(?, 'pooled-worker')", $q)->[0];
	is($claim->{task_id}, $paused, "$mode: resumed, it does");
	my $unsafe = $call->("SELECT version FROM durable_step(?, ?, 'email', 'unsafe', '{}')",
		@$claim{qw(task_id fence)})->[0];
	$call->("SELECT durable_step_start(?, ?, 'email', ?)", @$claim{qw(task_id fence)}, $unsafe->{version});
	is($value->("SELECT durable_expire_lease(?, 'worker host lost')", $claim->{task_id}),
		'manual_review', "$mode: an expired lease with an unsafe step in doubt goes to review");
	$refused->('55U01', 'SELECT durable_heartbeat(?, ?)', @$claim{qw(task_id fence)});
	is($value->(q{SELECT p->'recommended_action'->>'action' FROM durable_recovery_package(?) p},
			$claim->{task_id}), 'resolve', "$mode: its recovery package asks for a decision");
	is($value->(q{SELECT count(*) FROM durable.review_queue WHERE task_id = ?}, $claim->{task_id}), 1,
		"$mode: it is in the review queue");
	is($value->(q{SELECT durable_resolve(?, 'mark_not_executed', 'ops', '{"checked": "mail log"}')},
			$claim->{task_id}), 'ready', "$mode: resolved, it is ready again");
	$call->(q{SELECT durable_cancel(?, 'not wanted')}, $claim->{task_id});
	my $doomed = $value->(q{SELECT durable_enqueue(?, '{}')}, $q);
	$call->(q{SELECT durable_quarantine(?, 'poison')}, $doomed);
	is($value->(q{SELECT count(*) FROM durable_replay_dead_letters(?, reason => 'poison')}, $q), 1,
		"$mode: the quarantined task was replayed");
	$call->('SELECT durable_grant_queue(?, ?, ?)', $q, $user, 'work');
	$call->('SELECT durable_revoke_queue(?, ?, ?)', $q, $user, 'work');
	$call->('SELECT * FROM durable_reconcile()');

	# request idempotency, inbox, outbox
	my $begin = $call->(q{SELECT status, fence FROM durable_idempotent_begin(?, 'api', ?, '{"a": 1}')}, $q, "req-$mode")->[0];
	is($begin->{status}, 'started', "$mode: a request began");
	$call->(q{SELECT durable_idempotent_advance(?, 'api', ?, ?, 'charged')}, $q, "req-$mode", $begin->{fence});
	$call->(q{SELECT durable_idempotent_finish(?, 'api', ?, ?, '{"ok": true}')}, $q, "req-$mode", $begin->{fence});
	is($value->(q{SELECT response->>'ok' FROM durable_idempotent_begin(?, 'api', ?, '{"a": 1}')}, $q, "req-$mode"),
		'true', "$mode: the same request again returns the first response");
	is($value->(q{SELECT durable_inbox_receive(?, 'billing', ?, '{}')}, $q, "m-$mode"), 1,
		"$mode: an inbox message is new the first time");
	is($value->(q{SELECT durable_inbox_receive(?, 'billing', ?, '{}')}, $q, "m-$mode"), 0,
		"$mode: ... and a duplicate the second, on another backend");
	$call->(q{SELECT durable_outbox_emit(?, ?, '{"n": 1}')}, $q, "topic_$mode");
	my $msg = $call->(q{SELECT message_id, fence FROM durable_outbox_claim(?, 'pub') WHERE topic = ?}, $q, "topic_$mode")->[0];
	is($value->('SELECT durable_outbox_ack(?, ARRAY[?]::bigint[], ?)', $q, @$msg{qw(message_id fence)}), 1,
		"$mode: an outbox message was claimed and acknowledged");

	# the views and the checks
	$call->("SELECT * FROM durable.$_") for qw(status queue_stats tasks events workers review_queue
	  stuck_tasks waiting_tasks dead_letters schedule_stats wait_stats metrics queue_counters queue_gauges);
	$call->('SELECT durable_metrics_prometheus()');
	is($value->(q{SELECT count(*) FROM durable.workers WHERE queue_name = ? AND worker = 'pooled-worker'}, $q),
		1, "$mode: the worker's claims are recorded once, from every backend they ran on");
	is($value->(q{SELECT count(*) FROM durable.events e JOIN durable.tasks t USING (partition_key, task_id)
		WHERE t.queue_name = ? AND e.kind = 'lease_expired' AND e.actor = ?
		  AND e.detail->>'reason' = 'worker host lost'}, $q, $user),
		1, "$mode: the expired lease names its operator and reason");
	is($value->('SELECT count(*) FROM durable_verify()'), 0, "$mode: durable_verify() reports nothing");

	is(join("\n", @failed), '', "$mode: every call worked as it does without a pooler");

	# what a session keeps, a transaction-mode client does not: a statement
	# the client prepared is on the backend it prepared it on
	$run->('PREPARE probe AS SELECT 1');
	my ($ran, undef, $sqlstate) = $run->('EXECUTE probe');
	is($ran ? 'ran' : $sqlstate, $mode eq 'transaction' ? '26000' : 'ran',
		"$mode: a statement prepared in one transaction "
		  . ($mode eq 'transaction' ? 'is unknown in the next' : 'runs in the next'));
	my %app = map { $_ => 1 } @backends;
	my %both = map { $_ => 1 } @backends, @holders;
	my $switches = grep { $backends[$_] != $backends[ $_ - 1 ] } 1 .. $#backends;
	if ($mode eq 'transaction')
	{
		is($switches, $#backends,
			"transaction: each of the app's " . scalar(@backends) . ' transactions ran on another backend than the one before');
		is(scalar(keys %both), 2, 'transaction: ... two backends served both clients');
	}
	else
	{
		is(scalar(keys %app), 1, 'session: the app kept its backend for all its transactions');
	}
	$_->disconnect for $app, $other;
}

# ---- 2. LISTEN durable_ready ----

# whether a client has been told of a ready task, after a round trip
# (pg_notifies returns what came with it or before)
sub notified
{
	my ($dbh) = @_;
	$dbh->selectrow_array('SELECT 1');
	while (my $n = $dbh->pg_notifies)
	{
		return 1 if $n->[0] eq 'durable_ready';
	}
	return 0;
}

$node->safe_psql('postgres', "SELECT durable_create_queue('announced', notify => true)");
my $direct = DBI->connect('dbi:Pg:' . join(';', 'host=' . $node->host, 'port=' . $node->port,
		'dbname=postgres'), '', '', { AutoCommit => 1, RaiseError => 1 });
$direct->do('LISTEN durable_ready');
for my $mode (qw(session transaction))
{
	my $listener = client($bouncers{$mode});
	my $other = client($bouncers{$mode});
	$listener->begin_work;
	$listener->do('LISTEN durable_ready');
	my $listened_on = $listener->selectrow_array('SELECT pg_backend_pid()');
	$listener->commit;

	# the other client takes the backend the LISTEN ran on, if it is free
	$other->begin_work;
	my $held = $other->selectrow_array('SELECT pg_backend_pid()');
	$node->safe_psql('postgres', "SELECT durable_enqueue('announced', '{}')");
	# the connection past the pooler hears it at once
	my $waited = 0;
	usleep(100_000) until notified($direct) || ++$waited > 10 * $PostgreSQL::Test::Utils::timeout_default;
	ok($waited <= 10 * $PostgreSQL::Test::Utils::timeout_default,
		"$mode: a listener past the pooler was notified of the enqueue");
	my $now_on = $listener->selectrow_array('SELECT pg_backend_pid()');
	my $listening = $listener->selectrow_array('SELECT count(*) FROM pg_listening_channels()');
	if ($mode eq 'session')
	{
		is("$now_on $listening", "$listened_on 1", 'session: the listener keeps its backend, still listening');
		$waited = 0;
		usleep(100_000) until notified($listener) || ++$waited > 10 * $PostgreSQL::Test::Utils::timeout_default;
		ok($waited <= 10 * $PostgreSQL::Test::Utils::timeout_default,
			'session: ... and is notified through the pooler');
	}
	else
	{
		is($held, $listened_on, 'transaction: another client now holds the backend the LISTEN ran on');
		isnt($now_on, $listened_on, "transaction: the listener's next transaction runs on another one");
		is($listening, 0, '... where nobody listens');
		is(notified($listener), 0, '... so the notification does not reach it: a pooled client polls');
		is($listener->selectrow_array(q{SELECT count(*) FROM durable_claim('announced', 'poller')}), 1,
			'transaction: polling finds the task');
	}
	$other->commit;
	$_->disconnect for $listener, $other;
}
$direct->disconnect;

# ---- 3. worker programs through the pooler ----

# The client libraries' example workers share one command line: pooled
# behind a transaction-mode pooler (no prepared statements, no LISTEN: they
# poll), not behind a session-mode one; one task a claim, so that each of
# the doomed workers started together gets one.
sub client_example_options
{
	my (%o) = @_;
	my %env = $o{mode} eq 'transaction' ? (DURABLE_POOLED => 1) : ();
	$env{DURABLE_CRASH_AT} = $o{crash_at} if $o{crash_at};
	$env{DURABLE_CALL_MS} = $o{call_ms} if $o{call_ms};
	return (\%env, '--lease', $o{lease}, '--idle-exit', $o{idle_exit}, '--batch', 1);
}

# the Python client as a user installs it: the built wheel in a fresh venv
my ($python, $python_missing) = DurablePython::installed_python(PostgreSQL::Test::Utils::tempdir('python'));

# One entry a worker program: how to run it; the form of connection string
# it takes, the name of a DurablePgBouncer method ('connstr' for libpq's
# keywords, 'url' for node-postgres); why it cannot run, if so; and how it
# spells the options the test gives it: the lease and the idle time after
# which it stops by itself in seconds, a point to kill itself at
# (POINT:CLASS), the time each service call takes in ms.  It returns the
# environment and the arguments to add.  The worker takes --db, --service,
# --queue and --name, says its name in the result of each task it
# completes ("by"), and prints nothing the test reads.
my @workers = (
	{
		name => 'c',
		cmd => ['examples/durable_worker'],
		connstr => 'connstr',
		missing => !-x 'examples/durable_worker' && 'examples/durable_worker is not built (make worker)',
		options => sub {
			my (%o) = @_;
			my @args = ('--lease', $o{lease}, '--idle-exit', 1000 * $o{idle_exit});
			push @args, '--crash-at', $o{crash_at} if $o{crash_at};
			push @args, '--call-ms', $o{call_ms} if $o{call_ms};
			return ({}, @args);
		},
	},
	{
		# the Python client's, from its built wheel
		name => 'python',
		cmd => [ $python, 'examples/python/worker.py' ],
		connstr => 'connstr',
		missing => $python_missing,
		options => \&client_example_options,
	},
	{
		# the TypeScript client's (pgdurable from clients/ts, which npm ci in
		# examples/ts links and builds)
		name => 'ts',
		cmd => [ 'node', 'examples/ts/worker.js' ],
		connstr => 'url',
		missing => !-d 'examples/ts/node_modules/pgdurable/dist'
		  && 'clients/ts is not built (npm ci in examples/ts; tools/test does)',
		options => \&client_example_options,
	},
);

my $steps = '{"steps": [["reserve", "idempotent"], ["price", "pure"], '
  . '["charge", "queryable"], ["email", "unsafe"]]}';
# a worker stopped anywhere: no unsafe step, which a worker that does not
# finish its call first would leave to a person
my $retry_safe = '{"steps": [["reserve", "idempotent"], ["price", "pure"], '
  . '["charge", "queryable"]]}';

sub start_worker
{
	my ($w, $bouncer, $queue, $name, %o) = @_;
	my $form = $w->{connstr};
	my ($env, @args) = $w->{options}->(%o,
		mode => $bouncer == $bouncers{transaction} ? 'transaction' : 'session');
	my %run = (out => '', err => '');
	local %ENV = (%ENV, %$env);
	$run{h} = IPC::Run::start(
		[ @{ $w->{cmd} }, '--db', $bouncer->$form('postgres'),
		  '--service', $bouncer->$form('service'),
		  '--queue', $queue, '--name', $name, @args ],
		'>', \$run{out}, '2>', \$run{err});
	return \%run;
}

sub finish_all
{
	$_->{h}->finish for @_;
	return @_;
}

sub effects_of
{
	my ($queue) = @_;
	my $keys = join(',', map { "'$_'" } split /\n/, $node->safe_psql('postgres', qq{
		SELECT s.idempotency_key FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id)
		WHERE t.queue_name = '$queue'}));
	return $node->safe_psql('service',
		"SELECT count(*) || ' ' || count(DISTINCT key) FROM effects WHERE key IN ($keys)");
}

sub enqueue
{
	my ($queue, $tasks, $payload) = @_;
	$node->safe_psql('postgres', qq{
		SELECT durable_create_queue('$queue', lease => '1 s', retry_base => 1, retry_cap => 1);
		SELECT count(durable_enqueue('$queue', '$payload')) FROM generate_series(1, $tasks);
	});
}

for my $w (@workers)
{
	if ($w->{missing})
	{
		fail("$w->{name} worker: $w->{missing}");
		next;
	}
	for my $mode (qw(transaction session))
	{
		my $bouncer = $bouncers{$mode};
		my ($killed, $stopped) = ("$w->{name}_${mode}_kill", "$w->{name}_${mode}_term");
		my $who = "$w->{name}-$mode";
		enqueue($killed, 8, $steps);
		enqueue($stopped, 4, $retry_safe);

		# killed with SIGKILL at each retry-safe step's worst moment, after an
		# unsafe step's receipt and before the task's commit, all at once
		my @points = qw(after_call:idempotent after_call:pure after_call:queryable
		  after_receipt:unsafe before_commit);
		my @doomed = finish_all(map {
			start_worker($w, $bouncer, $killed, "$who-doomed-$_",
				lease => 1, idle_exit => 0, crash_at => $_)
		} @points);
		is(join(' ', map { $_->{h}->full_result(0) & 127 } @doomed), join(' ', (9) x @points),
			"$w->{name}, $mode: a worker killed itself with SIGKILL at each of @points")
		  or diag(join("\n", map { $_->{err} } @doomed));

		# stopped with SIGTERM while it holds a task
		my $term = start_worker($w, $bouncer, $stopped, "$who-term",
			lease => 1, idle_exit => 5, call_ms => 300);
		$node->poll_query_until('postgres', qq{
			SELECT count(*) > 0 FROM durable.tasks
			WHERE queue_name = '$stopped' AND state = 'running' AND owner = '$who-term'})
		  or die 'the worker claimed nothing';
		$term->{h}->signal('TERM');
		$term->{h}->finish;
		my $status = $term->{h}->full_result(0);
		ok($status == 0 || ($status & 127) == 15, "$w->{name}, $mode: SIGTERM stopped the worker")
		  or diag("status $status: $term->{err}");

		# five finishers share the pooler's two server connections a database
		my @finishers = finish_all(
			(map { start_worker($w, $bouncer, $killed, "$who-finisher-$_", lease => 1, idle_exit => 4) } 1 .. 3),
			(map { start_worker($w, $bouncer, $stopped, "$who-finisher-$_", lease => 1, idle_exit => 4) } 4 .. 5));
		is(join(' ', map { $_->{h}->full_result(0) } @finishers), '0 0 0 0 0',
			"$w->{name}, $mode: the finishers stopped by themselves")
		  or diag(join("\n", map { $_->{err} } @finishers));
		# each completed task's result names the worker that committed it
		# (the C worker's name comes from its application_name, which it set
		# with SET once: PgBouncer carries it to every backend it runs on)
		for ([ $killed, 8, 3 ], [ $stopped, 4, 2 ])
		{
			my ($queue, $tasks, $effects) = @$_;
			is($node->safe_psql('postgres', qq{
				SELECT count(*) FILTER (WHERE state = 'completed')
				       || ' ' || count(*) FILTER (WHERE result->>'by' LIKE '$who-%')
				FROM durable.tasks WHERE queue_name = '$queue'}), "$tasks $tasks",
				"$queue: every task completed, each by one of this run's workers");
			is(effects_of($queue), ($effects * $tasks) . ' ' . ($effects * $tasks),
				"$queue: every effect happened exactly once");
		}
	}
}

# across everything: nothing lost, nothing done twice, every row agrees with its history
is($node->safe_psql('service',
		'SELECT count(*) FROM (SELECT key FROM effects GROUP BY key HAVING count(*) > 1) d'),
	'0', 'no side effect happened twice');
is($node->safe_psql('postgres', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() reports nothing');

$_->stop for values %bouncers;
$node->stop;
done_testing();
