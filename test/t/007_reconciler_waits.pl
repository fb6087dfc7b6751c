# The reconciler waits quietly for what it cannot help, says so once in the
# log and checks again: a durable.database that does not exist yet, an
# extension that is not installed, has been dropped or is older than the
# library.  No ERROR or FATAL comes of it, and it works as soon as it can.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('waits');
$node->init;
$node->append_conf('postgresql.conf', join("\n",
	"shared_preload_libraries = 'durable'",
	"durable.database = 'later'",
	"durable.reconcile_interval = '100ms'",
	"fsync = off") . "\n");
$node->start;

# how often a line matching the pattern is in the log
sub log_count
{
	my ($pattern) = @_;
	my $log = slurp_file($node->logfile);
	my @lines = grep { /$pattern/ } split /\n/, $log;
	return scalar @lines;
}

# no database yet: the launcher says so once, and nothing fails
sleep 3;
is(log_count(qr/waiting for database "later" to exist/), 1,
	'a missing durable.database is said once');
is(log_count(qr/\b(ERROR|FATAL):/), 0, 'with no ERROR or FATAL');

# the database appears: the reconciler starts in it within the check interval
$node->safe_psql('postgres', 'CREATE DATABASE later');
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE backend_type = 'durable reconciler' AND datname = 'later'"),
	'the reconciler starts once the database exists');

# no extension in it: said once, checked every tick (a hundred in ten seconds)
sleep 2;
is(log_count(qr/waiting for extension "durable" in database "later"$/), 1,
	'a missing extension is said once');

# installed: it works
$node->safe_psql('later', q{
	CREATE EXTENSION durable;
	SELECT durable_create_queue('jobs', lease => '50 ms');
	SELECT durable_enqueue('jobs', '{}');
	SELECT count(*) FROM durable_claim('jobs', 'doomed') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
});
ok($node->poll_query_until('later', "SELECT state = 'waiting' FROM durable.tasks"),
	'once installed, it settles an expired lease');

# dropped, and installed at an older version: said once each, no error
$node->safe_psql('later', 'DROP EXTENSION durable');
sleep 2;
is(log_count(qr/waiting for extension "durable" in database "later"$/), 2,
	'a dropped extension is said once more');
$node->safe_psql('later', "CREATE EXTENSION durable VERSION '0.1.0'");
sleep 2;
is(log_count(qr/waiting for extension "durable" in database "later" to be updated/), 1,
	'an extension older than the library is said once');
$node->safe_psql('later', q{
	ALTER EXTENSION durable UPDATE;
	SELECT durable_create_queue('jobs', lease => '50 ms');
	SELECT durable_enqueue('jobs', '{}');
	SELECT count(*) FROM durable_claim('jobs', 'doomed') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
});
ok($node->poll_query_until('later', "SELECT state = 'waiting' FROM durable.tasks"),
	'after the update it works again');
is($node->safe_psql('later',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'durable reconciler'"),
	'1', 'one reconciler all along');
is(log_count(qr/\b(ERROR|FATAL):/), 0, 'and the log has no ERROR or FATAL');

$node->stop;
done_testing();
