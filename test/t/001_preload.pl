# durable loads through shared_preload_libraries, survives a restart, and
# gives the same decisions before and after it.
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

$node->restart;
is($node->safe_psql('postgres', $plan), '1,2,4,11,16,35', 'same plan after a restart');

my ($rc, $out, $err) = $node->psql('postgres', "SELECT durable_retry_delay('x', 0)");
isnt($rc, 0, 'a bad attempt is an error');
like($err, qr/attempt must be at least 1/, 'with a clear message');

$node->stop;
done_testing();
