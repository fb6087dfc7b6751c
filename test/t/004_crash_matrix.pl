# The crash matrix: a real worker program (examples/durable_worker) is
# killed with SIGKILL, or the server is shut down immediately, at every
# point of a one-step workflow, for every step class; then a fresh worker
# finishes what recovery allows.  Expected in every cell: a pure or
# idempotent step ends committed once with at most one effect; a queryable
# one is looked up and ends committed with exactly one effect; an unsafe one
# whose outcome nobody knows rests in NEEDS_REVIEW with a recovery package;
# nothing is lost and durable_verify() reports nothing.  Also: a frozen
# worker that wakes up after a takeover is fenced off, and a worker that
# heartbeats without progress raises a stuck alarm and nothing else.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;

my $bin = 'examples/durable_worker';
plan skip_all => "$bin is not built" unless -x $bin;

my $node = DurableNode::new_node('matrix',
	"durable.reconcile_interval = '100ms'", "max_connections = 250",
	"restart_after_crash = on");
$node->safe_psql('postgres', 'CREATE DATABASE service');
$node->safe_psql('service', slurp_file('examples/service.sql'));
my $db = $node->connstr('postgres');
my $svc = $node->connstr('service');

my @classes = qw(pure idempotent queryable unsafe);
my @points = qw(before_claim after_claim before_start before_call after_call
  after_receipt after_step_commit before_commit after_commit);
my %step_point = map { $_ => 1 }
  qw(before_start before_call after_call after_receipt after_step_commit);

# one queue and one single-step task per cell
sub setup_cells
{
	my ($prefix) = @_;
	my @cells;
	for my $class (@classes)
	{
		for my $point (@points)
		{
			my $queue = "${prefix}_${class}_${point}";
			$node->safe_psql('postgres', qq{
				SELECT durable_create_queue('$queue', lease => '300 ms',
				                            retry_base => 1, retry_cap => 1);
				SELECT durable_enqueue('$queue', '{"steps": [["op", "$class"]]}');
			});
			push @cells, { queue => $queue, class => $class, point => $point };
		}
	}
	return @cells;
}

sub start_worker
{
	my ($queue, $name, @args) = @_;
	my %w = (out => '', err => '');
	$w{h} = IPC::Run::start(
		[ $bin, '--db', $db, '--service', $svc, '--queue', $queue,
		  '--name', $name, @args ],
		'>', \$w{out}, '2>', \$w{err});
	return \%w;
}

sub fault_spec
{
	my ($cell) = @_;
	return $step_point{ $cell->{point} }
	  ? "$cell->{point}:$cell->{class}" : $cell->{point};
}

# what each cell must end as
sub expected
{
	my ($cell) = @_;
	my $in_doubt = $cell->{class} eq 'unsafe'
	  && ($cell->{point} eq 'before_call' || $cell->{point} eq 'after_call');
	my $effects = $cell->{class} eq 'pure' ? 0
	  : ($in_doubt && $cell->{point} eq 'before_call') ? 0 : 1;
	return ($in_doubt ? 'needs_review' : 'completed', $in_doubt ? 0 : 1, $effects);
}

sub check_cells
{
	my ($what, @cells) = @_;
	for my $cell (@cells)
	{
		my ($state, $commits, $effects) = expected($cell);
		my ($got_state, $got_commits, $key) = split /\|/, $node->safe_psql('postgres', qq{
			SELECT t.state, (SELECT count(*) FROM durable.events e
			                 WHERE e.partition_key = t.partition_key AND e.task_id = t.task_id
			                   AND e.kind = 'step_committed'),
			       s.idempotency_key
			FROM durable.tasks t JOIN durable.steps s USING (partition_key, task_id)
			WHERE t.queue_name = '$cell->{queue}'});
		my $got_effects = $node->safe_psql('service',
			"SELECT count(*) FROM effects WHERE key = '$key'");
		is("$got_state $got_commits $got_effects", "$state $commits $effects",
			"$what at $cell->{point}, $cell->{class} step: $state, committed $commits, effects $effects");
		if ($state eq 'needs_review')
		{
			is($node->safe_psql('postgres', qq{
				SELECT p->'unknown_side_effects'->0->>'idempotency_key' = '$key'
				       AND p->'recommended_action'->>'action' = 'resolve'
				FROM durable.tasks t, durable_recovery_package(t.task_id) p
				WHERE t.queue_name = '$cell->{queue}'}), 't',
				"  with a recovery package naming the step in doubt");
		}
	}
}

# fresh workers finish what recovery allows, one per queue at once
sub finish_cells
{
	my ($prefix, @cells) = @_;
	my @finishers = map { start_worker($_->{queue}, "$prefix-finisher", '--idle-exit', '2500', '--quiet') } @cells;
	$_->{h}->finish for @finishers;
	return @finishers;
}

# 1. the worker is killed with SIGKILL at each point.  It claims under a
# lease of an hour, so that on a loaded machine no lease runs out before
# the worker reaches its point; once it is dead, its lease is ended as an
# operator ends a dead worker's (durable_expire_lease settles it through
# the recovery table as the reconciler settles a lease that ran out).
my @cells = setup_cells('kill');
my @doomed = map { start_worker($_->{queue}, 'doomed', '--max-tasks', '1',
		'--lease', '1 hour', '--crash-at', fault_spec($_), '--quiet') } @cells;
for my $w (@doomed)
{
	$w->{h}->finish;
}
is(scalar(grep { ($_->{h}->full_result(0) & 127) == 9 } @doomed), scalar(@cells),
	'every doomed worker died of SIGKILL')
  or diag(join("\n", map { "$cells[$_]{queue}: status " . $doomed[$_]{h}->full_result(0)
		  . ", stderr: $doomed[$_]{err}" }
		grep { ($doomed[$_]{h}->full_result(0) & 127) != 9 } 0 .. $#doomed));
$node->safe_psql('postgres', q{
	SELECT durable_expire_lease(task_id, 'its worker was killed')
	FROM durable.tasks WHERE queue_name LIKE 'kill\_%' AND state = 'running'});
finish_cells('kill', @cells);
check_cells('worker killed', @cells);

# 2. the server is shut down immediately while a worker stands at each point
@cells = setup_cells('server');
my @frozen = map { start_worker($_->{queue}, 'frozen', '--max-tasks', '1',
		'--pause-at', fault_spec($_), '--quiet') } @cells;
for my $w (@frozen)
{
	$w->{h}->pump until $w->{out} =~ /paused at/;
}
pass('every worker stands at its point');
$node->stop('immediate');
$node->start;
for my $w (@frozen)
{
	kill 'CONT', $w->{h}->{KIDS}[0]{PID};
	$w->{h}->finish;
}
is(scalar(grep { ($_->{h}->full_result(0) & 127) == 0 } @frozen), scalar(@cells),
	'every frozen worker went on after the restart and stopped by itself');
sleep 1;
finish_cells('server', @cells);
check_cells('server killed', @cells);

# 3. a frozen worker wakes up after a takeover: its writes are rejected
for my $class (qw(idempotent unsafe))
{
	my $queue = "late_$class";
	$node->safe_psql('postgres', qq{
		SELECT durable_create_queue('$queue', lease => '300 ms', retry_base => 1, retry_cap => 1);
		SELECT durable_enqueue('$queue', '{"steps": [["op", "$class"]]}');
	});
	my $old = start_worker($queue, 'old-worker', '--max-tasks', '1',
		'--idle-exit', '0', '--pause-at', "before_call:$class");
	$old->{h}->pump until $old->{out} =~ /paused at/;
	sleep 1;
	my $new = start_worker($queue, 'new-worker', '--idle-exit', '2500', '--quiet');
	$new->{h}->finish;
	kill 'CONT', $old->{h}->{KIDS}[0]{PID};
	$old->{h}->finish;
	like($old->{out}, qr/stale writes rejected 1/, "$class: the old worker's late write was rejected");
	my $key = $node->safe_psql('postgres',
		"SELECT s.idempotency_key FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id)
		 WHERE t.queue_name = '$queue'");
	if ($class eq 'idempotent')
	{
		is($node->safe_psql('postgres', "SELECT state || ' ' || (result->>'by') FROM durable.tasks WHERE queue_name = '$queue'"),
			'completed new-worker', 'idempotent: the new worker completed the task');
		is($node->safe_psql('service', "SELECT count(*) FROM effects WHERE key = '$key'"),
			'1', 'idempotent: the key kept both calls to one effect');
	}
	else
	{
		is($node->safe_psql('postgres', "SELECT state FROM durable.tasks WHERE queue_name = '$queue'"),
			'needs_review', 'unsafe: nobody resent it; it waits for a person');
		is($node->safe_psql('service', "SELECT count(*) FROM effects WHERE key = '$key'"),
			'1', "unsafe: the old worker's call is the only effect");
	}
}

# 4. a worker that keeps heartbeating without progress: one stuck alarm, no retry
$node->safe_psql('postgres', q{
	SELECT durable_create_queue('stuck', lease => '2 s', progress_timeout => '200 ms');
	SELECT durable_enqueue('stuck', '{"steps": [["op", "idempotent"]]}');
});
my $stuck = start_worker('stuck', 'stuck-worker', '--stall-at', 'before_call:idempotent', '--quiet');
$stuck->{h}->finish;
is($node->safe_psql('postgres', q{
	SELECT t.state || ' fence ' || t.fence || ' alarms ' ||
	       count(*) FILTER (WHERE e.kind = 'stuck') || ' expiries ' ||
	       count(*) FILTER (WHERE e.kind = 'lease_expired')
	FROM durable.tasks t JOIN durable.events e USING (partition_key, task_id)
	WHERE t.queue_name = 'stuck' GROUP BY t.state, t.fence}),
	'completed fence 1 alarms 1 expiries 0',
	'a renewed lease without progress raised one alarm and was not taken away');

# across everything: nothing lost, nothing done twice, every row agrees with its history
is($node->safe_psql('postgres',
	"SELECT count(*) FROM durable.tasks WHERE state NOT IN ('completed', 'needs_review')"),
	'0', 'no task is lost');
is($node->safe_psql('service', 'SELECT count(*) FROM (SELECT key FROM effects GROUP BY key HAVING count(*) > 1) d'),
	'0', 'no side effect happened twice');
is($node->safe_psql('postgres', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() reports nothing');

$node->stop;
done_testing();
