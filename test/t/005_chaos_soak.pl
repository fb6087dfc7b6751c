# The chaos soak: several worker programs run three-step workflows
# (reserve: idempotent, charge: queryable, email: unsafe) while a driver
# kills random workers with SIGKILL and shuts the server down immediately a
# few times.  At the end it prints the figures of docs/design.md section 7 and fails
# if any task is lost, any side effect happened twice, any stale write
# landed, or verify disagrees.
#
# Bounded by default (under a minute, part of tools/test); tools/soak runs
# it longer: SOAK_SECONDS, SOAK_WORKFLOWS, SOAK_WORKERS, SOAK_RESTARTS,
# SOAK_KILL_EVERY_MS.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use DurableNode;

my $bin = 'examples/durable_worker';
plan skip_all => "$bin is not built" unless -x $bin;

my $seconds = $ENV{SOAK_SECONDS} || 45;
my $workflows = $ENV{SOAK_WORKFLOWS} || 6000;
my $nworkers = $ENV{SOAK_WORKERS} || 4;
my $restarts = $ENV{SOAK_RESTARTS} || 2;
my $kill_every = ($ENV{SOAK_KILL_EVERY_MS} || 800) / 1000;

my $node = DurableNode::new_node('soak',
	"durable.reconcile_interval = '100ms'", "max_connections = 100",
	"restart_after_crash = on");
$node->safe_psql('postgres', 'CREATE DATABASE service');
$node->safe_psql('service', slurp_file('examples/service.sql'));
my $db = $node->connstr('postgres');
my $svc = $node->connstr('service');

$node->safe_psql('postgres', q{
	SELECT durable_create_queue('soak', lease => '500 ms', max_attempts => 20,
	                            retry_base => 1, retry_cap => 2, partitions => 4);
});

# workflows arrive all along the soak, so that the chaos meets work in flight
my $enqueued = 0;
sub produce
{
	my ($upto) = @_;
	my $n = ($upto > $workflows ? $workflows : $upto) - $enqueued;
	return if $n <= 0;
	$node->safe_psql('postgres', qq{
		SELECT count(durable_enqueue('soak',
		    '{"steps": [["reserve", "idempotent"], ["charge", "queryable"], ["email", "unsafe"]]}'))
		FROM generate_series(1, $n)});
	$enqueued += $n;
}

my %workers;
my $started = 0;
my ($killed, $server_restarts, $stale_rejected) = (0, 0, 0);

sub start_worker
{
	my $name = 'worker-' . ++$started;
	my %w = (name => $name, out => '');
	$w{h} = IPC::Run::start(
		[ $bin, '--db', $db, '--service', $svc, '--queue', 'soak',
		  '--name', $name, '--idle-exit', '-1', '--quiet' ],
		'>', \$w{out}, '2>', \my $err);
	$workers{$name} = \%w;
}

# collect what a finished worker said; replace it unless told otherwise
sub reap
{
	my ($replace) = @_;
	for my $name (sort keys %workers)
	{
		my $w = $workers{$name};
		$w->{h}->pump_nb if $w->{h}->pumpable;
		next if $w->{h}->pumpable;
		$w->{h}->finish;
		$stale_rejected += $1 if $w->{out} =~ /stale writes rejected (\d+)/;
		delete $workers{$name};
		start_worker() if $replace;
	}
}

start_worker() for 1 .. $nworkers;

my $t0 = time;
my $next_kill = $t0 + $kill_every;
my @restart_at = map { $t0 + $seconds * $_ / ($restarts + 1) } 1 .. $restarts;
my $last_report = $t0;
while (time - $t0 < $seconds)
{
	usleep(50_000);
	produce(int($workflows * (time - $t0) / ($seconds * 0.9)) + 1);
	reap(1);
	if (time >= $next_kill && %workers)
	{
		my @names = sort keys %workers;
		my $victim = $workers{ $names[ int(rand(@names)) ] };
		kill 'KILL', $victim->{h}->{KIDS}[0]{PID};
		$killed++;
		$next_kill = time + $kill_every;
	}
	if (@restart_at && time >= $restart_at[0])
	{
		shift @restart_at;
		$node->stop('immediate');
		$node->start;
		$server_restarts++;
	}
	if (time - $last_report >= 5)
	{
		$last_report = time;
		diag(sprintf('%3ds: %s; %d workers killed, %d server restarts', time - $t0,
			$node->safe_psql('postgres',
				"SELECT string_agg(state || ' ' || n, ', ' ORDER BY state)
				 FROM (SELECT state, count(*) n FROM durable.tasks GROUP BY 1) s"),
			$killed, $server_restarts));
	}
}

# the chaos ends; the workers finish what recovery allows
produce($workflows);
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM durable.tasks WHERE state NOT IN ('completed', 'needs_review', 'failed')"),
	'every workflow came to rest');
kill 'TERM', $_->{h}->{KIDS}[0]{PID} for values %workers;
reap(0);

my ($completed, $review, $failed) = split /\|/, $node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state = 'needs_review'),
	       count(*) FILTER (WHERE state = 'failed')
	FROM durable.tasks});
my ($keys, $duplicates) = split /\|/, $node->safe_psql('service',
	'SELECT count(DISTINCT key), count(*) FILTER (WHERE n > 1)
	 FROM (SELECT key, count(*) n FROM effects GROUP BY key) k');
my ($recovery_rate, $recovery_time, $ambiguous, $escalation, $claims) = split /\|/,
  $node->safe_psql('postgres', q{
	SELECT coalesce(recovery_success_rate, 1), coalesce(extract(epoch FROM mean_recovery_time)::numeric(10, 3), 0),
	       ambiguous_outcome_rate, human_escalation_rate, claims_per_task
	FROM durable.history_metrics WHERE queue_name = 'soak'});

diag(sprintf("\n%d workflows, %d s, %d workers killed, %d server restarts\n"
	  . "  completed %d, in review %d, failed %d\n"
	  . "  side effects: %d keys, duplicates %d (rate %.4f)\n"
	  . "  recovery success rate %s, mean recovery time %s s\n"
	  . "  ambiguous outcome rate %s, human escalation rate %s, claims per task %s\n"
	  . "  stale writes rejected %d",
	$workflows, $seconds, $killed, $server_restarts, $completed, $review, $failed,
	$keys, $duplicates, $keys ? $duplicates / $keys : 0,
	$recovery_rate, $recovery_time, $ambiguous, $escalation, $claims, $stale_rejected));

is($completed + $review, $workflows, 'no workflow is lost: each completed or waits for a person');
is($failed, '0', 'none failed');
is($duplicates, '0', 'no side effect happened twice');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM durable.tasks t
	WHERE t.state = 'completed'
	  AND t.result->>'by' IS DISTINCT FROM (SELECT e.actor FROM durable.events e
	                                        WHERE e.partition_key = t.partition_key
	                                          AND e.task_id = t.task_id AND e.kind = 'claimed'
	                                        ORDER BY e.seq DESC LIMIT 1)}),
	'0', 'no stale write landed: each result is from the last holder');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM durable.steps s
	WHERE s.state = 'committed' AND s.class <> 'pure' AND s.effect_id IS NULL}),
	'0', 'every committed step carries the effect it made');
is($node->safe_psql('postgres', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() reports nothing');
ok($killed > 0 && $server_restarts == $restarts, 'the chaos happened');

$node->stop;
done_testing();
