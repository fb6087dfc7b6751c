# durable loads through shared_preload_libraries, survives a restart, and
# gives the same decisions before and after it.  durable.status shows the
# reconciler running in durable.database (to an operator too, who cannot
# see a superuser's backend_type), and a database other than that one is
# told at CREATE EXTENSION that no reconciler works in it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('preload');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'durable'");
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION durable');
my $plan = q{SELECT string_agg(durable_retry_delay('flight-1', a)::text, ',' ORDER BY a)
             FROM generate_series(1, 6) a};
is($node->safe_psql('postgres', $plan), '1,2,4,11,16,35', 'reference retry plan');

like($node->safe_psql('postgres', 'SHOW shared_preload_libraries'),
	qr/durable/, 'durable is preloaded');

ok($node->poll_query_until('postgres', q{
	SELECT preloaded AND reconciler = 'running' AND reconciler_pid IS NOT NULL
	       AND reconciler_database = 'postgres'
	FROM durable.status}), 'durable.status: the reconciler runs in durable.database');
is($node->safe_psql('postgres', q{
	CREATE ROLE watcher IN ROLE durable_operator;
	SET ROLE watcher;
	SELECT reconciler || ' ' || (reconciler_pid IS NOT NULL) FROM durable.status}),
	'running true', 'to an operator as well');

$node->safe_psql('postgres', 'CREATE DATABASE other');
my ($rc, $out, $err) = $node->psql('other', 'CREATE EXTENSION durable');
like($err, qr/NOTICE:  the durable reconciler works in database "postgres", not in "other"/,
	'CREATE EXTENSION elsewhere says the reconciler works in another database');
is($node->safe_psql('other', 'SELECT reconciler, reconciler_pid FROM durable.status'),
	'in another database|', 'and so does durable.status');

$node->restart;
is($node->safe_psql('postgres', $plan), '1,2,4,11,16,35', 'same plan after a restart');

($rc, $out, $err) = $node->psql('postgres', "SELECT durable_retry_delay('x', 0)");
isnt($rc, 0, 'a bad attempt is an error');
like($err, qr/attempt must be at least 1/, 'with a clear message');

$node->stop;
done_testing();
