# The crash scenarios that every example worker of a client library runs
# against a real server and the stand-in service of examples/service.sql,
# which counts effects: the Python one (examples/python/worker.py) in
# 010_reference_workers, the JavaScript one (examples/ts/worker.js) in
# 023_client_ts.  Both example workers take the same arguments and the same
# environment (DURABLE_CRASH_AT, DURABLE_CALL_MS) and print the same stats.
#
# A worker is a hash: name (a short prefix of its queues, names and event
# keys, e.g. python), cmd (the command that runs it, an array), db and
# service (connection strings of the durable database and of the service's).
#
# run($node, $worker) runs the four scenarios:
#
# 1. workers kill themselves with SIGKILL in the middle of a step
#    (DURABLE_CRASH_AT: right after the external call, before the receipt
#    or the step's commit, for every class), then a fresh worker finishes
#    what recovery allows: idempotent steps resent under their key and
#    deduplicated by the service, queryable ones looked up, pure ones
#    recomputed, an unsafe one whose call nobody can confirm in review, one
#    with a receipt completed; every effect once;
# 2. SIGTERM in the middle of a step: the worker finishes that step and
#    gives every task it holds back at once (durable_release), so that they
#    are claimed again without waiting out their 30 s lease and without
#    using an attempt;
# 3. the server closes the worker's connections (pg_terminate_backend) mid-run:
#    it reconnects and finishes everything (steps that can be resent or
#    looked up), nothing twice;
# 4. a workflow that sleeps, awaits an event and fans out to children, its
#    first worker killed right after the await began: all complete, each
#    child spawned once, every effect once.
#
# new_node($name): a server for them (DurableNode's, its reconciler quick),
# with the service's database.
#
# check_everything($node): across everything a test did, nothing lost,
# nothing done twice, durable_verify() empty.
package DurableWorkerScenarios;

use strict;
use warnings;
use Exporter qw(import);
use IPC::Run;
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Utils ();
use Test::More;
use DurableNode;

our @EXPORT_OK = qw(start_worker run_worker tasks_of steps_of effects_of);

our $steps = '{"steps": [["reserve", "idempotent"], ["price", "pure"], '
  . '["charge", "queryable"], ["email", "unsafe"]]}';
# a connection can drop anywhere: no unsafe step, whose loss would need a person
our $retry_safe = '{"steps": [["reserve", "idempotent"], ["price", "pure"], '
  . '["charge", "queryable"]]}';

sub new_node
{
	my ($name) = @_;
	my $node = DurableNode::new_node($name,
		"durable.reconcile_interval = '100ms'", "max_connections = 100");
	$node->safe_psql('postgres', 'CREATE DATABASE service');
	$node->safe_psql('service', PostgreSQL::Test::Utils::slurp_file('examples/service.sql'));
	return $node;
}

# start_worker($worker, $queue, $name, \%env, @args): the worker started on
# $queue under $name; returns {h => IPC::Run harness, out, err}
sub start_worker
{
	my ($w, $queue, $name, $env, @args) = @_;
	my %run = (out => '', err => '');
	local %ENV = (%ENV, %$env);
	$run{h} = IPC::Run::start(
		[ @{ $w->{cmd} }, '--db', $w->{db}, '--service', $w->{service},
		  '--queue', $queue, '--name', $name, @args ],
		'>', \$run{out}, '2>', \$run{err});
	return \%run;
}

# run_worker: start_worker, and wait for it to end
sub run_worker
{
	my $run = start_worker(@_);
	$run->{h}->finish;
	return $run;
}

sub tasks_of
{
	my ($node, $queue, $what) = @_;
	return $node->safe_psql('postgres',
		"SELECT $what FROM durable.tasks t WHERE t.queue_name = '$queue'");
}

sub steps_of
{
	my ($node, $queue, $what, $where) = @_;
	return $node->safe_psql('postgres',
		"SELECT $what FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id)"
		  . " WHERE t.queue_name = '$queue'" . ($where ? " AND $where" : ''));
}

# the service's effects of the steps of $queue's tasks: 'count distinct'
sub effects_of
{
	my ($node, $queue) = @_;
	my $keys = join(',', map { "'$_'" } split /\n/,
		steps_of($node, $queue, 's.idempotency_key'));
	return $node->safe_psql('service',
		"SELECT count(*) || ' ' || count(DISTINCT key) FROM effects WHERE key IN ($keys)");
}

sub run
{
	my ($node, $w) = @_;
	my $lang = $w->{name};
	my $started = time;

	# 1. killed in the middle of a step, at each class's worst moment.  The
	# leases are 3 s: a live worker, whose heartbeat comes every second,
	# keeps its tasks on a loaded machine (a lease lost in the middle of the
	# unsafe call would put a second task in review, rightly), and the
	# finisher waits longer than that for the dead workers' tasks.
	my $queue = "${lang}_crash";
	my $tasks = 10;
	$node->safe_psql('postgres', qq{
		SELECT durable_create_queue('$queue', lease => '3 s', retry_base => 1, retry_cap => 1);
		SELECT count(durable_enqueue('$queue', '$steps')) FROM generate_series(1, $tasks);
	});
	my @points = qw(after_call:idempotent after_call:pure after_call:queryable
	  after_receipt:unsafe after_call:unsafe);
	my @doomed = map {
		run_worker($w, $queue, "$lang-doomed-$_", { DURABLE_CRASH_AT => $_ },
			'--lease', '3', '--batch', '2', '--idle-exit', '0')
	} @points;
	is(join(' ', map { $_->{h}->full_result(0) & 127 } @doomed), join(' ', (9) x @points),
		"$lang: a worker killed itself with SIGKILL at each of @points")
	  or diag(join("\n", map { $_->{err} } @doomed));

	my $finisher = run_worker($w, $queue, "$lang-finisher", {},
		'--lease', '3', '--idle-exit', '8');
	is($finisher->{h}->full_result(0), 0, "$lang: the finisher stopped by itself")
	  or diag($finisher->{err});
	like($finisher->{err}, qr/looked_up [1-9]/,
		"$lang: the finisher looked the queryable step up as a reconcile handler");
	is(tasks_of($node, $queue, "count(*) FILTER (WHERE state = 'completed') || ' ' ||"
			. " count(*) FILTER (WHERE state = 'needs_review')"),
		($tasks - 1) . ' 1',
		"$lang: every task completed but the one whose unsafe call nobody can confirm");
	is(steps_of($node, $queue, "string_agg(s.step || ' ' || s.state, ', ')",
			"t.state = 'needs_review' AND s.state <> 'committed'"), 'email unknown',
		"$lang: it waits in review for its e-mail step only");
	is(steps_of($node, $queue, "string_agg(DISTINCT s.step, ' ' ORDER BY s.step)", 's.attempt > 1'),
		'price reserve',
		"$lang: the idempotent and pure steps killed after their call were run again");
	my $looked_up = "s.step = 'charge' AND EXISTS (SELECT FROM durable.events e"
	  . " WHERE e.partition_key = s.partition_key AND e.task_id = s.task_id"
	  . " AND e.step = 'charge' AND e.kind = 'step_unknown')";
	is(steps_of($node, $queue, 'count(*)', "$looked_up AND s.receipt = 'succeeded' AND s.attempt = 1"),
		'1', "$lang: the charge killed after its call was looked up, not resent");
	is(steps_of($node, $queue,
			"string_agg(jsonb_typeof(s.result -> 'effect') || ' ' || (s.evidence = s.result)::text, ',')",
			$looked_up),
		'string true',
		"$lang: ... its result the operation's result, as the look-up returned it, and its evidence that");
	is(steps_of($node, $queue,
			"count(*) FILTER (WHERE (t.state <> 'completed' OR t.result -> 'steps' -> 'charge' = s.result)"
			  . " AND s.result = s.evidence AND jsonb_typeof(s.result -> 'effect') = 'string')"
			  . " || ' of ' || count(*)", "s.step = 'charge'"),
		"$tasks of $tasks",
		"$lang: every charge's result, the looked-up one too, is what the call returns, and its evidence");
	is(steps_of($node, $queue, "count(*) || ' ' || count(*) FILTER (WHERE s.result ? 'effect'"
			. " AND s.result = t.result -> 'steps' -> 'charge')", "s.step = 'charge' AND t.state = 'completed'"),
		($tasks - 1) . ' ' . ($tasks - 1),
		"$lang: every charge has one result shape, {\"effect\": ...}, however it settled, and the task's result holds it");
	is(steps_of($node, $queue, "count(*) FILTER (WHERE s.effect_id IS NOT NULL) || ' ' ||"
			. " count(*) FILTER (WHERE s.effect_id IS DISTINCT FROM s.result ->> 'effect')",
			"s.receipt = 'succeeded' AND NOT ($looked_up)"),
		steps_of($node, $queue, 'count(*)', "s.receipt = 'succeeded' AND NOT ($looked_up)") . ' 0',
		"$lang: every receipt a handler recorded names its effect (the step's effect id), the effect of the result");
	is(effects_of($node, $queue), (3 * $tasks) . ' ' . (3 * $tasks),
		"$lang: every idempotent, queryable and unsafe step took effect exactly once");

	# 2. SIGTERM in the middle of a step: the held tasks come back at once
	$queue = "${lang}_term";
	$node->safe_psql('postgres', qq{
		SELECT durable_create_queue('$queue', lease => '30 s');
		SELECT count(durable_enqueue('$queue', '$steps')) FROM generate_series(1, 4);
	});
	my $term = start_worker($w, $queue, "$lang-term", { DURABLE_CALL_MS => 400 },
		'--batch', '4');
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = 1 FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id)
		WHERE t.queue_name = '$queue' AND s.state = 'started'}) or die 'no step started';
	# held still while its steps are counted, so that the count is the one
	# SIGTERM meets however slow the machine: the steps committed, and the
	# one in hand (its SIGTERM waits for SIGCONT)
	# (a statement it sent just before may still run: read until it settles)
	$term->{h}->signal('STOP');
	my $in_hand = sub {
		steps_of($node, $queue, 'count(*)', "s.state IN ('committed', 'started')");
	};
	my ($committed_before, $again) = ($in_hand->(), -1);
	while ($again ne $committed_before)
	{
		usleep(200_000);
		($again, $committed_before) = ($committed_before, $in_hand->());
	}
	my $signalled = time;
	$term->{h}->signal('TERM');
	$term->{h}->signal('CONT');
	$term->{h}->finish;
	my $took = time - $signalled;
	is($term->{h}->full_result(0), 0, "$lang: SIGTERM: the worker stopped cleanly")
	  or diag($term->{err});
	ok($took < 5, sprintf("$lang: ... within %.1f s, not its 30 s lease", $took));
	is(tasks_of($node, $queue, "count(*) FILTER (WHERE state = 'running') || ' ' ||"
			. " count(*) FILTER (WHERE state = 'ready' AND attempt = 0)"), '0 4',
		"$lang: every task it held is ready again with its attempt given back");
	is(steps_of($node, $queue, 'count(*)', "s.state = 'committed'"), $committed_before,
		"$lang: the step in hand was finished first, and no other");
	is($node->safe_psql('postgres', qq{
		SELECT count(*) FROM durable.events e JOIN durable.tasks t USING (partition_key, task_id)
		WHERE t.queue_name = '$queue' AND e.kind = 'released' AND e.detail->>'reason' = 'shutdown'}),
		'4', "$lang: four 'released' events say why");
	run_worker($w, $queue, "$lang-term-finisher", {}, '--idle-exit', '1');
	is(tasks_of($node, $queue, "string_agg(DISTINCT state || ' attempt ' || attempt, ', ')"),
		'completed attempt 1',
		"$lang: claimed again at once, each completed at its first attempt");
	is(effects_of($node, $queue), '12 12', "$lang: and every effect happened once");

	# 3. the server closes the worker's connections mid-run: all of them,
	# its heartbeat's and its service client's too (application_name is the
	# worker's name, or begins with it)
	$queue = "${lang}_reconnect";
	$node->safe_psql('postgres', qq{
		SELECT durable_create_queue('$queue', lease => '1 s', retry_base => 1, retry_cap => 1);
		SELECT count(durable_enqueue('$queue', '$retry_safe')) FROM generate_series(1, 10);
	});
	my $rec = start_worker($w, $queue, "$lang-reconnect", { DURABLE_CALL_MS => 20 },
		'--lease', '1', '--batch', '3', '--idle-exit', '3');
	$node->poll_query_until('postgres', qq{
		SELECT count(*) >= 3 FROM durable.tasks WHERE queue_name = '$queue' AND state = 'completed'})
	  or die 'nothing completed';
	$node->safe_psql('postgres', qq{
		SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name LIKE '$lang-reconnect%'});
	$rec->{h}->finish;
	is($rec->{h}->full_result(0), 0, "$lang: after a lost connection the worker went on")
	  or diag($rec->{err});
	like($rec->{err}, qr/reconnecting/, "$lang: ... saying it reconnected");
	is(tasks_of($node, $queue, "count(*) FILTER (WHERE state = 'completed')"), '10',
		"$lang: ... and finished every task")
	  or diag($rec->{err});
	is(effects_of($node, $queue), '20 20', "$lang: ... with every effect once");

	# 4. a workflow that waits: charge, await the payment webhook, fan out
	# two labels to children, join them, sleep, e-mail; the first worker is
	# killed right after its await began
	$queue = "${lang}_wait";
	my $labels = "${lang}_labels";
	$node->safe_psql('postgres', qq{
		SELECT durable_create_queue('$queue', lease => '2 s', retry_base => 1, retry_cap => 1);
		SELECT durable_create_queue('$labels', lease => '2 s', retry_base => 1, retry_cap => 1);
		SELECT count(durable_enqueue('$queue', jsonb_build_object('steps', jsonb_build_array(
			jsonb_build_array('charge', 'idempotent'),
			jsonb_build_array('paid', 'await', 'pay:$lang:' || n, '1 hour'),
			jsonb_build_array('labels', 'spawn', '$labels', '2'),
			jsonb_build_array('labels', 'join'),
			jsonb_build_array('nap', 'sleep', '1 second'),
			jsonb_build_array('email', 'idempotent')))))
		FROM generate_series(1, 3) n;
	});
	my $doomed = run_worker($w, $queue, "$lang-wait-doomed", { DURABLE_CRASH_AT => 'after_wait:await' },
		'--batch', '1', '--idle-exit', '0');
	is($doomed->{h}->full_result(0) & 127, 9, "$lang: a worker killed itself right after its await began")
	  or diag($doomed->{err});
	my $waiter = run_worker($w, $queue, "$lang-waiter", {}, '--idle-exit', '1');
	like($waiter->{err}, qr/left_waiting [1-9]/, "$lang: the others left their tasks waiting");
	$node->safe_psql('postgres',
		"SELECT count(durable_emit('$queue', 'pay:$lang:' || n, jsonb_build_object('paid', n))) FROM generate_series(1, 3) n");
	for my $round (1 .. 20)
	{
		last if tasks_of($node, $queue, "count(*) FILTER (WHERE state <> 'completed')") eq '0';
		run_worker($w, $labels, "$lang-printer", {}, '--idle-exit', '0');
		run_worker($w, $queue, "$lang-waiter-$round", {}, '--idle-exit', '1');
	}
	is(tasks_of($node, $queue, "string_agg(DISTINCT state::text, ',')"), 'completed',
		"$lang: every workflow that waits completed");
	is(tasks_of($node, $labels, "count(*) FILTER (WHERE state = 'completed')"), '6',
		"$lang: two labels each, spawned once");
	is(effects_of($node, $queue) . ' / ' . effects_of($node, $labels), '6 6 / 6 6',
		"$lang: a charge and an e-mail each, a print per label, every one once");

	note(sprintf("$lang worker: %.1f s", time - $started));
	return;
}

# across everything: nothing lost, nothing done twice, every row agrees with its history
sub check_everything
{
	my ($node) = @_;
	is($node->safe_psql('postgres',
		"SELECT count(*) FROM durable.tasks WHERE state NOT IN ('completed', 'needs_review')"),
		'0', 'no task is lost');
	is($node->safe_psql('service',
			'SELECT count(*) FROM (SELECT key FROM effects GROUP BY key HAVING count(*) > 1) d'),
		'0', 'no side effect happened twice');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM durable_verify()'), '0',
		'durable_verify() reports nothing');
	return;
}

1;
