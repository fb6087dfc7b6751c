# The agent example (examples/agent/), on pgdurable installed from its wheel
# and against a real server with the reconciler: its own crash test kills
# the worker at every step boundary of a run and prints a verdict line for
# each thing it promises (docs/agent-runs.md); each must hold, none may be
# missing, and what the runs left in the database must say the same.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;
use DurablePython;

my ($python, $missing) = DurablePython::installed_python(PostgreSQL::Test::Utils::tempdir('python'));
if ($missing)
{
	fail("the agent example: $missing");
	done_testing();
	exit;
}

my $node = DurableNode::new_node('agent', "durable.reconcile_interval = '200ms'");
my $user = $node->safe_psql('postgres', 'SELECT current_user');
my $db = "host=" . $node->host . " port=" . $node->port . " user=$user dbname=postgres";

my @promises = (
	'no tool effect twice',
	'no decided prompt asked again',
	'the budget never passed',
	'the unsafe e-mail in review when in doubt',
	'the model and prompt versions pinned',
	'the stream read live');

my ($out, $err) = ('', '');
IPC::Run::run([ $python, 'examples/agent/crash_test.py', '--db', $db ], '>', \$out, '2>', \$err);
my $status = $? >> 8;
note($out);
is($status, 0, 'the crash test passes') or diag($err);
for my $promise (@promises)
{
	like($out, qr/^verdict: \Q$promise\E: yes \(/m, $promise);
}
my @verdicts = $out =~ /^verdict: /mg;
is(scalar @verdicts, scalar @promises, 'a verdict line for each promise, no other');
like($out, qr/^  run +\d+ +crash at after_call:unsafe +killed +needs_review$/m,
	"the run killed after its e-mail's call is in review");
like($out, qr/^  \[model-5\] Order A-100 was late/m,
	'the watcher printed the final answer as the model streamed it');

# what the runs left in the database says the same as the verdicts
is($node->safe_psql('postgres',
	"SELECT count(*) FROM durable.tasks WHERE queue_name = 'agent_runs' AND state = 'needs_review'"),
	'2', 'two runs wait for a person: their e-mails in doubt');
is($node->safe_psql('postgres',
	"SELECT string_agg(s.state || ' ' || s.step, ', ') FROM durable.steps s JOIN durable.tasks t USING (task_id)
	 WHERE t.queue_name = 'agent_runs' AND s.step LIKE 'model-%' AND s.state <> 'committed'"),
	'planned model-4', 'every model call made is recorded; the one the budget refused stays planned');
is($node->safe_psql('postgres', 'SELECT count(*) FROM durable_verify()'), '0', 'durable_verify() finds nothing');

$node->stop;
done_testing();
