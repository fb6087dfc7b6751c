# pg_dump and pg_restore keep every task, live and in history: the days of
# history are partitions pg_dump dumps with their rows (they are no members
# of the extension), the live tables and the default partitions are dumped
# as configuration tables.  After the restore the counts are the same,
# durable_verify() is empty, an enqueue key still answers with its finished
# task, and the running task can be committed under its fence.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
# the reconciler works in postgres; the databases here are reconciled by hand
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.database = 'postgres'\nfsync = off\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
	CREATE EXTENSION durable;
	SELECT durable_create_queue('q', max_attempts => 1);
	-- the days of history are made by the first reconciliation
	SELECT count(*) FROM durable_reconcile();
	SELECT durable_enqueue('q', jsonb_build_object('n', i),
		idempotency_key => CASE WHEN i = 1 THEN 'k-1' END) FROM generate_series(1, 6) i;
});
# task 1 completes, 2 fails for good, 3 runs with a committed step, 4 is
# cancelled, 5 and 6 stay ready
my @claimed = split /\n/, $node->safe_psql('src',
	"SELECT task_id || ' ' || fence FROM durable_claim('q', 'w', batch => 3) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun");
my ($t1, $f1) = split / /, $claimed[0];
my ($t2, $f2) = split / /, $claimed[1];
my ($t3, $f3) = split / /, $claimed[2];
$node->safe_psql('src', qq{
	SELECT durable_commit($t1, $f1, '{"done": 1}');
	SELECT durable_fail($t2, $f2, 'permanent', '{"reason": "bad input"}');
	SELECT state FROM durable_step($t3, $f3, 'charge', 'idempotent');
	SELECT durable_step_start($t3, $f3, 'charge', 1);
	SELECT durable_commit($t3, $f3, '{"charged": true}', step => 'charge', expected_version => 2);
	SELECT durable_cancel(task_id, 'not needed') FROM durable.live_tasks
	WHERE state = 'ready' ORDER BY task_id LIMIT 1;
});
my $counts = q{SELECT (SELECT string_agg(state || '=' || n, ',' ORDER BY state)
	FROM (SELECT state::text, count(*) n FROM durable.tasks GROUP BY 1) s) || '/' ||
	(SELECT count(*) FROM durable.events) || '/' || (SELECT count(*) FROM durable.steps) || '/' ||
	(SELECT count(*) FROM durable.task_keys) || '/' || (SELECT count(*) FROM durable.task_history)};
my $before = $node->safe_psql('src', $counts);
like($before, qr/^cancelled=1,completed=1,failed=1,ready=2,running=1\/\d+\/1\/1\/3$/,
	'the source holds tasks in every half') or diag($before);
is($node->safe_psql('src', 'SELECT count(*) FROM durable_verify()'), '0', 'and is consistent');
isnt($node->safe_psql('src', q{SELECT count(*) FROM pg_inherits WHERE inhparent = 'durable.task_history'::regclass}),
	'1', 'with days of history besides the default partition');

my $dump = $node->basedir . '/src.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('src'), '-f', $dump ], 'pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE dst');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('dst'), $dump ],
	'pg_restore, without an error');

is($node->safe_psql('dst', $counts), $before, 'every row is restored');
is($node->safe_psql('dst', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() is empty after the restore');
is($node->safe_psql('dst', "SELECT durable_enqueue('q', '{\"n\": 1}', idempotency_key => 'k-1')"),
	$t1, 'the key of a finished task still answers with it');
$node->safe_psql('dst', "SELECT durable_commit($t3, $f3)");
is($node->safe_psql('dst', "SELECT state FROM durable.tasks WHERE task_id = $t3"), 'completed',
	'the running task commits under its fence');
is($node->safe_psql('dst', 'SELECT count(*) FROM durable_reconcile()'), '0',
	'and reconciling the restored database finds nothing to do');
is($node->safe_psql('dst', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() is still empty');

$node->stop;
done_testing();
