# The Python reference worker (examples/python/worker.py, on pgdurable and
# psycopg 3; the JavaScript one runs the same scenarios in 023_client_ts)
# against a real server and the stand-in service of examples/service.sql,
# which counts effects: the crash scenarios of DurableWorkerScenarios
# (SIGKILL in the middle of a step for every class, SIGTERM, connections the
# server closes, a workflow that waits), then across everything: nothing
# lost, nothing done twice, durable_verify() empty.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurablePython;
use DurableWorkerScenarios;

my $node = DurableWorkerScenarios::new_node('workers');
my $user = $node->safe_psql('postgres', 'SELECT current_user');
my ($host, $port) = ($node->host, $node->port);
# the Python worker runs on pgdurable installed from its wheel into a fresh
# virtual environment (test/t/022_client_python.pl checks the package itself)
my ($venv_python, $venv_missing) =
  DurablePython::installed_python(PostgreSQL::Test::Utils::tempdir('python'));

if ($venv_missing)
{
	fail("python worker: $venv_missing");
}
else
{
	DurableWorkerScenarios::run($node, {
		name => 'python',
		cmd => [ $venv_python, 'examples/python/worker.py' ],
		db => "host=$host port=$port user=$user dbname=postgres",
		service => "host=$host port=$port user=$user dbname=service" });
}
# the JavaScript worker, on the pgdurable package installed from its
# tarball, runs these scenarios in 023_client_ts

DurableWorkerScenarios::check_everything($node);

$node->stop;
done_testing();
