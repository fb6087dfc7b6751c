# A crash costs only the tasks it touched (docs/design.md section 4): a
# worker of the Python client (clients/python, its built wheel) claims
# batches of 10, and one task of the queue kills its worker (SIGKILL, from
# its handler) each time it runs.  The worker is started again after every
# crash, as a service manager would, until the queue is settled.
#
# The poison task spends its attempts and ends in the dead letters: it does
# not loop for ever.  Every other task, however many times a crash took
# its batch down before it began, completes on its first attempt; the
# tasks a crash held unbegun went back with the action not_begun.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;
use DurablePython;

my $tmp = PostgreSQL::Test::Utils::tempdir('crash_loop');
my ($python, $why) = DurablePython::installed_python($tmp);
$python or BAIL_OUT($why);

my $node = DurableNode::new_node('crash_loop', "durable.reconcile_interval = '100ms'");
my $user = $node->safe_psql('postgres', 'SELECT current_user');
my $db = sprintf('host=%s port=%d user=%s dbname=postgres', $node->host, $node->port, $user);

my $tasks = 25;
$node->safe_psql('postgres', q{
	SELECT durable_create_queue('loop', lease => '1 second', max_attempts => 3,
	                            retry_base => 1, retry_cap => 1)});
# the poison first: the highest priority, so that the first batch holds it
# and nine tasks it will take down with it
my $poison = $node->safe_psql('postgres',
	q{SELECT durable_enqueue('loop', '{"poison": true}', priority => 10)});
$node->safe_psql('postgres',
	"SELECT count(durable_enqueue('loop', jsonb_build_object('n', n))) FROM generate_series(2, $tasks) n");

# the worker: a handler that returns its task's number, or kills the
# process that runs it
my $script = "$tmp/worker.py";
open my $fh, '>', $script or die $!;
print $fh <<'EOF';
import os, signal, sys
import pgdurable

def handle(task):
    if task.payload.get("poison"):
        os.kill(os.getpid(), signal.SIGKILL)
    return {"n": task.payload["n"]}

pgdurable.Worker(sys.argv[1], "loop", handle, name=sys.argv[2], batch=10, poll=0.2,
                 idle_exit=3).run()
EOF
close $fh;

sub settled
{
	return $node->safe_psql('postgres',
		"SELECT count(*) = 0 FROM durable.unfinished_tasks WHERE queue_name = 'loop'") eq 't';
}

# started again after each exit, until nothing is left to do; the bound is
# only a guard against a loop for ever, which is the bug this would show
my ($runs, $crashes) = (0, 0);
while (!settled() && $runs < 60)
{
	$runs++;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $python, $script, $db, "w$runs" ], '>', \$out, '2>', \$err);
	$crashes++ if ($? & 127) == 9;
}
ok(settled(), "the queue settles: $runs worker runs, $crashes of them killed by the poison task");

is($node->safe_psql('postgres',
		"SELECT state || ' ' || attempt || ' ' || stop_code FROM durable.tasks WHERE task_id = $poison"),
	'failed 3 attempts_exhausted',
	'the poison task spent its three attempts and is a dead letter');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM durable.dead_letters WHERE task_id = $poison"), '1',
	'... listed with the dead letters');
is($crashes, 3, 'it killed its worker once per attempt, no more');

is($node->safe_psql('postgres', qq{
	SELECT count(*) FILTER (WHERE state = 'completed' AND attempt = 1
	                          AND result = jsonb_build_object('n', payload -> 'n'))
	FROM durable.tasks WHERE queue_name = 'loop' AND task_id <> $poison}),
	$tasks - 1, 'every other task completed on its first attempt');
my $returned = $node->safe_psql('postgres', qq{
	SELECT count(*) FROM durable.events e JOIN durable.tasks t USING (task_id)
	WHERE t.queue_name = 'loop' AND e.kind = 'lease_expired' AND e.detail ->> 'action' = 'not_begun'});
cmp_ok($returned, '>=', 9, "the tasks a crash held unbegun went back for nothing ($returned times)");
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM durable.events e JOIN durable.tasks t USING (task_id)
	WHERE t.queue_name = 'loop' AND e.kind = 'lease_expired'
	AND e.detail ->> 'action' IS DISTINCT FROM 'not_begun' AND t.task_id <> $poison}),
	'0', 'no lease of another task ran out after it began');
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM durable.events e
	WHERE e.task_id = $poison AND e.kind = 'lease_expired' AND e.detail ->> 'action' <> 'not_begun'}),
	'3', "the poison task's three lost leases were judged by the recovery table");

$node->stop;
done_testing();
