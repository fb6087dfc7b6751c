# What the client libraries and the example workers send resolves only to
# pg_catalog and durable's objects, whatever the role's search_path (issue
# 37): they run as a role whose search_path is "hostile, public,
# pg_catalog", where test/t/data/hostile_path.sql planted, generated from
# the catalog, a copy of every operator and function of pg_catalog and of
# durable's API, of count(*), a domain over every base type, and in public
# exact-match overloads of the common operators (such as &(bigint,
# integer)), each recording that it ran for that role:
#
# 1. the planted code does run for a statement that names things
#    unqualified (the check can fail);
# 2. the Python worker (examples/python/worker.py on clients/python) and
#    the JavaScript one (examples/ts/worker.js on clients/ts) through the
#    crash scenarios of DurableWorkerScenarios (claims, steps of every
#    class, receipts, commits, heartbeats, look-ups as a reconcile handler,
#    releases on SIGTERM, reconnects, sleeps, awaits, spawns, joins,
#    failures);
# 3. the C worker on libpq (examples/durable_worker): the same workflows,
#    one worker killed right after a queryable call, the next looking it up;
#
# and after each, nothing planted ran.  (The console's pages are checked
# the same way by its browser test, tools/console-test.)
use strict;
use warnings;
use Cwd;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableWorkerScenarios;

my $node = DurableWorkerScenarios::new_node('hostile_path');
my $user = $node->safe_psql('postgres', 'SELECT current_user');
my ($host, $port) = ($node->host, $node->port);
$node->safe_psql('postgres', slurp_file('test/t/data/hostile_path.sql'));
$node->safe_psql('postgres', q{
	CREATE ROLE victim LOGIN IN ROLE durable_worker, durable_producer;
	INSERT INTO hostile.targets VALUES ('victim');
	ALTER ROLE victim SET search_path = hostile, public, pg_catalog;
});
my $db = "host=$host port=$port user=victim dbname=postgres";
my $service = "host=$host port=$port user=$user dbname=service";

sub planted { return $node->safe_psql('postgres', 'SELECT hostile.report()') }

# ---- 1. the planted code runs for what is not qualified ----

$node->psql('postgres', 'SELECT (7::bigint & 32767), pg_catalog.count(*) FROM durable_heartbeat_batch(NULL, NULL)',
	extra_params => [ '-U', 'victim' ]);
like(planted(), qr/^[1-9][0-9]* shadowing object\(s\) ran: .*function durable_heartbeat_batch.*operator public\.&\(bigint, integer\)/,
	'a statement that names things unqualified runs the planted code (an API function, an operator of public)');
$node->safe_psql('postgres', 'SELECT hostile.reset()');
is(planted(), '0 shadowing object(s) ran', '... and the count starts again from nothing');

# ---- 2. the Python and the JavaScript workers ----

my $cwd = getcwd();
{
	local $ENV{PYTHONPATH} = "$cwd/clients/python/src";
	DurableWorkerScenarios::run($node, {
		name => 'python',
		cmd => [ '/usr/bin/python3', 'examples/python/worker.py' ],
		db => $db,
		service => $service });
}
is(planted(), '0 shadowing object(s) ran', 'python: nothing the client sent ran planted code');
$node->safe_psql('postgres', 'SELECT hostile.reset()');

if (-d 'examples/ts/node_modules/pgdurable/dist')
{
	DurableWorkerScenarios::run($node, {
		name => 'js',
		cmd => [ 'node', 'examples/ts/worker.js' ],
		db => "postgresql://victim\@localhost:$port/postgres?host=$host",
		service => "postgresql://$user\@localhost:$port/service?host=$host" });
	is(planted(), '0 shadowing object(s) ran', 'js: nothing the client sent ran planted code');
}
else
{
	fail('examples/ts/node_modules is missing: run npm ci in clients/ts and examples/ts (tools/test does)');
}
$node->safe_psql('postgres', 'SELECT hostile.reset()');

# ---- 3. the C worker ----

my $bin = 'examples/durable_worker';
if (-x $bin)
{
	$node->safe_psql('postgres', qq{
		SELECT durable_create_queue('c_hostile', lease => '1 s', retry_base => 1, retry_cap => 1);
		SELECT durable_create_queue('c_labels', lease => '1 s', retry_base => 1, retry_cap => 1);
		SELECT count(durable_enqueue('c_hostile', '$DurableWorkerScenarios::steps')) FROM generate_series(1, 3);
		SELECT durable_enqueue('c_hostile', jsonb_build_object('steps', jsonb_build_array(
			jsonb_build_array('charge', 'idempotent'),
			jsonb_build_array('paid', 'await', 'pay:c', '1 hour'),
			jsonb_build_array('labels', 'spawn', 'c_labels', '2'),
			jsonb_build_array('labels', 'join'),
			jsonb_build_array('nap', 'sleep', '1 second'))));
	});
	my $c = sub {
		my ($queue, $name, @args) = @_;
		my ($out, $err) = ('', '');
		IPC::Run::run([ $bin, '--db', $db, '--service', $service, '--queue', $queue,
			'--name', $name, '--lease', '1 second', @args ], '>', \$out, '2>', \$err);
		return "$out$err";
	};
	my $doomed = $c->('c_hostile', 'c-doomed', '--crash-at', 'after_call:queryable', '--idle-exit', '0');
	like($doomed, qr/killed at after_call/, 'c: a worker killed itself right after a queryable call');
	$node->safe_psql('postgres', "SELECT durable_emit('c_hostile', 'pay:c', '{}')");
	my $log = '';
	for my $round (1 .. 30)
	{
		last if $node->safe_psql('postgres',
			"SELECT count(*) FROM durable.tasks WHERE queue_name LIKE 'c\\_%' AND state <> 'completed'") eq '0';
		$log .= $c->('c_labels', "c-printer-$round", '--idle-exit', '0');
		$log .= $c->('c_hostile', "c-worker-$round", '--idle-exit', '1500');
	}
	is($node->safe_psql('postgres', q{
		SELECT string_agg(queue_name || ' ' || state || ' ' || n, ', ' ORDER BY queue_name)
		FROM (SELECT queue_name, state, count(*) AS n FROM durable.tasks
			  WHERE queue_name LIKE 'c\_%' GROUP BY 1, 2) s}),
		'c_hostile completed 4, c_labels completed 2',
		'c: every workflow completed, its children too')
	  or diag($log);
	like($log, qr/reconciled [1-9]/, 'c: ... the queryable step killed after its call looked up as a reconcile handler');
	is(planted(), '0 shadowing object(s) ran', 'c: nothing the worker sent ran planted code');
}
else
{
	fail("$bin is not built (make worker; tools/test builds it)");
}

$node->stop;
done_testing();
