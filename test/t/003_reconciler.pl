# The reconciler background worker: it runs, settles expired leases with no
# SQL call, follows SIGHUP, vacuums durable.tasks past its threshold, comes
# back after kill -9, and after an immediate shutdown in the middle of its
# work every expired lease is settled exactly once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use DurableNode;

my $node = DurableNode::new_node('reconciler',
	"durable.reconcile_interval = '100ms'", "restart_after_crash = on");

# it shows up, named, in the database it was given
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE backend_type = 'durable reconciler' AND datname = 'postgres'"),
	'the reconciler runs in durable.database');

# an expired lease is settled without any SQL call
$node->safe_psql('postgres', q{
	SELECT durable_create_queue('jobs', lease => '50 ms');
	SELECT durable_enqueue('jobs', '{"n": 1}');
	SELECT count(*) FROM durable_claim('jobs', 'doomed-worker') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
});
ok($node->poll_query_until('postgres',
	"SELECT state = 'waiting' FROM durable.tasks"), 'the expired lease was settled');
is($node->safe_psql('postgres',
	"SELECT actor || ' ' || (detail->>'action') FROM durable.events WHERE kind = 'lease_expired'"),
	'durable reconciler retry_same_activity', 'by the reconciler, through the recovery table');

# SIGHUP: an interval of an hour stops the ticks; a shorter one starts them again
$node->append_conf('postgresql.conf', "durable.reconcile_interval = '1h'");
$node->reload;
$node->poll_query_until('postgres', "SELECT setting = '3600000' FROM pg_settings WHERE name = 'durable.reconcile_interval'");
# give the worker time to take the new setting and finish a tick under way
sleep 1;
$node->safe_psql('postgres', q{
	SELECT durable_enqueue('jobs', '{"n": 2}');
	SELECT count(*) FROM durable_claim('jobs', 'slow-to-die', lease => '10 ms') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
});
sleep 2;
is($node->safe_psql('postgres', "SELECT count(*) FROM durable.tasks WHERE state = 'running'"),
	'1', 'with an interval of an hour the expired lease waits');
$node->append_conf('postgresql.conf', "durable.reconcile_interval = '100ms'");
$node->reload;
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM durable.tasks WHERE state = 'running'"),
	'after SIGHUP with a short interval it is settled');

# past durable.vacuum_threshold dead row versions it vacuums durable.tasks
# (vacuum_count counts no autovacuum), and goes on reconciling afterwards
$node->append_conf('postgresql.conf', "durable.vacuum_threshold = 100");
$node->reload;
$node->poll_query_until('postgres',
	"SELECT setting = '100' FROM pg_settings WHERE name = 'durable.vacuum_threshold'");
my $vacuums = $node->safe_psql('postgres',
	"SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'durable.live_tasks'::regclass");
$node->safe_psql('postgres', q{
	SELECT durable_create_queue('churn');
	SELECT count(durable_enqueue('churn', jsonb_build_object('n', i))) FROM generate_series(1, 200) i;
	SELECT durable_commit(task_id, fence) FROM durable_claim('churn', 'w', batch => 200) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
});
ok($node->poll_query_until('postgres',
	"SELECT vacuum_count > $vacuums FROM pg_stat_user_tables WHERE relid = 'durable.live_tasks'::regclass"),
	'the reconciler vacuumed durable.live_tasks');
is($node->safe_psql('postgres', "SELECT count(*) FROM durable.tasks WHERE queue_name = 'churn' AND state = 'completed'"),
	'200', 'the vacuum took no live row');
# an old snapshot pins the dead row versions: it vacuums once, and not
# again at every tick (twenty in two seconds) while nothing more has died
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$holder->query_safe('SELECT count(*) FROM durable.tasks');
$vacuums = $node->safe_psql('postgres',
	"SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'durable.live_tasks'::regclass");
$node->safe_psql('postgres', q{
	SELECT count(durable_enqueue('churn', jsonb_build_object('n', i))) FROM generate_series(1, 200) i;
	SELECT durable_commit(task_id, fence) FROM durable_claim('churn', 'w', batch => 200) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
});
ok($node->poll_query_until('postgres',
	"SELECT vacuum_count > $vacuums FROM pg_stat_user_tables WHERE relid = 'durable.live_tasks'::regclass"),
	'with an old snapshot open it vacuums once');
$vacuums = $node->safe_psql('postgres',
	"SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'durable.live_tasks'::regclass");
sleep 2;
is($node->safe_psql('postgres',
	"SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'durable.live_tasks'::regclass"),
	$vacuums, 'and not again while the snapshot pins what it could not remove');
$holder->query_safe('COMMIT');
$holder->quit;

$node->safe_psql('postgres', q{
	SELECT durable_enqueue('jobs', '{"n": 3}');
	SELECT count(*) FROM durable_claim('jobs', 'doomed-again', lease => '10 ms') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
});
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM durable.tasks WHERE state = 'running'"),
	'after vacuuming it still settles expired leases');

# kill -9: the postmaster restarts everything, and the reconciler comes back
my $pid = DurableNode::reconciler_pid($node);
ok($pid, "the reconciler has a pid ($pid)");
kill 'KILL', $pid;
# while the postmaster restarts every backend a psql may find nobody to
# write its query to (IPC::Run then dies of the broken pipe): ask again
my $back;
for my $try (1 .. 50)
{
	$back = eval {
		$node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM pg_stat_activity
			 WHERE backend_type = 'durable reconciler' AND pid <> $pid");
	};
	last if defined $back;
	sleep 0.2;
}
ok($back, 'a new reconciler runs after kill -9');
like($node->safe_psql('postgres', "SELECT durable_retry_delay('flight-1', 4)"), qr/^11$/,
	'and the server answers');

# an immediate shutdown in the middle of settling 2,000 expired leases,
# in batches of 50: after the restart every lease is settled exactly once
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET durable.reconcile_batch = 50;
	ALTER SYSTEM SET durable.reconciler_enabled = off;
	SELECT pg_reload_conf();
	SELECT durable_create_queue('crash', lease => '1 ms', retry_base => 3600, retry_cap => 3600);
	SELECT count(durable_enqueue('crash', jsonb_build_object('n', n))) FROM generate_series(1, 2000) n;
	SELECT count(*) FROM durable_claim('crash', 'crashed-worker', batch => 2000) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
});
$node->safe_psql('postgres', "ALTER SYSTEM SET durable.reconciler_enabled = on; SELECT pg_reload_conf();");
ok($node->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM durable.events WHERE kind = 'lease_expired' AND actor = 'durable reconciler'
	 AND task_id IN (SELECT task_id FROM durable.tasks WHERE queue_name = 'crash')"),
	'the reconciler is settling the crash queue');
$node->stop('immediate');
$node->start;
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM durable.tasks WHERE queue_name = 'crash' AND state = 'running'"),
	'after the restart no lease is left expired');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM durable.tasks t
	WHERE t.queue_name = 'crash'
	  AND (SELECT count(*) FROM durable.events e
	       WHERE e.partition_key = t.partition_key AND e.task_id = t.task_id
	         AND e.kind = 'lease_expired') <> 1}),
	'0', 'every lease was settled exactly once');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM durable.tasks WHERE queue_name = 'crash' AND (state <> 'waiting' OR fence <> 2)"),
	'0', 'each one revoked once: waiting with fence 2');
is($node->safe_psql('postgres', 'SELECT count(*) FROM durable_verify()'), '0',
	'the rows agree with the event log');

$node->stop;
done_testing();
