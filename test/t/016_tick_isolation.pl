# No single row, setting or partition stops the reconciler (docs/design.md section
# 7): with a schedule whose occurrence key another request took, a day of
# history that cannot be dropped and a queue whose retry tokens cannot be
# taken, all failing at once, the running reconciler still settles expired
# leases, tick after tick; each failing part is logged once when it starts
# failing and once when it recovers, and durable.status shows it meanwhile.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;

my $node = DurableNode::new_node('tick', "durable.reconcile_interval = '50ms'",
	"durable.retention = '30d'");
my $log_start = -s $node->logfile;

sub log_count
{
	my ($pattern) = @_;
	my $log = slurp_file($node->logfile, $log_start);
	return scalar grep { /$pattern/ } split /\n/, $log;
}

sub sql { return $node->safe_psql('postgres', $_[0]); }

# One transaction: a tick between the schedule's UPDATE and the enqueue
# that takes its key would run the occurrence first.
sql(q{
	BEGIN;
	SELECT durable_create_queue('jobs', lease => '100 ms', max_attempts => 1000,
	                            retry_base => 1, retry_cap => 1);
	SELECT durable_create_queue('deep', lease => '100 ms', max_attempts => 1000,
	                            retry_capacity => 1, retry_refill_rate => 0.000001,
	                            retry_base => 1, retry_cap => 1);
	UPDATE durable.queues SET retry_tokens = -1e13 WHERE queue_name = 'deep';

	-- a yearly schedule, due since this New Year, whose occurrence key
	-- another request took
	SELECT durable_schedule('taken', '0 0 1 1 *', 'jobs', '{"mine": true}');
	UPDATE durable.schedules SET next_run = date_trunc('year', now(), 'UTC')
	WHERE schedule_name = 'taken';
	SELECT durable_enqueue('jobs', '{"theirs": true}',
	                       idempotency_key => 'schedule:taken:' ||
	                           extract(epoch FROM date_trunc('year', now(), 'UTC'))::bigint);

	-- a day of history past retention that a view holds
	CREATE TABLE durable.task_history_p20000101
	    (LIKE durable.task_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
	ALTER TABLE durable.task_history ATTACH PARTITION durable.task_history_p20000101
	    FOR VALUES FROM ('2000-01-01 00:00:00+00') TO ('2000-01-02 00:00:00+00');
	CREATE VIEW holds_a_day AS SELECT * FROM durable.task_history_p20000101;
	COMMIT;
});

# Workers that crash, again and again: every lease they leave must come
# back through the reconciler, in both queues, while the parts fail.
my $rounds = 6;
for my $round (1 .. $rounds)
{
	sql(q{
		SELECT durable_enqueue('jobs', '{}', class => 'idempotent');
		SELECT durable_enqueue('deep', '{}', class => 'idempotent');
		SELECT count(*) FROM durable_claim('jobs', 'crashed', batch => 10) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
		SELECT count(*) FROM durable_claim('deep', 'crashed', batch => 10) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
	});
	ok($node->poll_query_until('postgres', q{
		SELECT count(*) = 0 FROM durable.tasks
		WHERE state = 'running' AND queue_name IN ('jobs', 'deep')}),
		"round $round: every expired lease is settled while parts fail");
}

my $failing = sql(q{
	SELECT string_agg(f->>'part' || ' ' || (f->>'sqlstate'), ', ' ORDER BY f->>'part')
	FROM durable.status, jsonb_array_elements(failures) f});
is($failing, 'history: drop durable.task_history_p20000101 2BP01, '
	. 'retry tokens: deep 22008, schedule: taken 55U03',
	'durable.status shows each failing part with its SQLSTATE');
ok(sql(q{SELECT bool_and((f->>'failures')::int > 1) FROM durable.status,
	jsonb_array_elements(failures) f}), 'and counts how often each failed');
is(sql(q{SELECT last_error LIKE 'idempotency key %already used for a different request (SQLSTATE 55U03)'
	FROM durable.schedule_list WHERE schedule_name = 'taken'}), 't',
	'the schedule says why its occurrence was skipped');
is(sql(q{SELECT count(*) FROM durable.tasks t WHERE t.queue_name = 'jobs'
	AND t.payload = '{"theirs": true}'}), '1', 'the other request keeps its key');

# said once each, however many ticks failed
is(log_count(qr/could not run "schedule: taken"/), 1, 'the schedule is said once');
is(log_count(qr/could not run "history: drop durable.task_history_p20000101"/), 1,
	'the day of history is said once');
is(log_count(qr/could not run "retry tokens: deep"/), 1, 'the queue\'s tokens are said once');
is(log_count(qr/\b(ERROR|FATAL):/), 0, 'no tick failed as a whole');
is(sql(q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'durable reconciler'}),
	'1', 'the reconciler never stopped');

# mended: each part runs again, says so once, and leaves durable.status;
# the schedule, replaced, is no longer the one that failed
sql(q{
	DROP VIEW holds_a_day;
	UPDATE durable.queues SET retry_tokens = 1, retry_refill_rate = 1000 WHERE queue_name = 'deep';
	SELECT durable_schedule('taken', '0 0 1 1 *', 'jobs', '{"mine": true}');
});
is(sql(q{SELECT count(*) FROM durable.tick_failures WHERE part = 'schedule: taken'}), '0',
	'a schedule replaced leaves durable.status at once');
sql(q{
	UPDATE durable.schedules SET next_run = now() WHERE schedule_name = 'taken';
	SELECT durable_enqueue('deep', '{}', class => 'idempotent');
	SELECT count(*) FROM durable_claim('deep', 'crashed', batch => 10) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
});
ok($node->poll_query_until('postgres', 'SELECT failing_parts = 0 FROM durable.status'),
	'once mended, no part fails');
is(log_count(qr/runs "(history: drop durable.task_history_p20000101|retry tokens: deep)" again/),
	2, 'each recovery is said once');
ok(sql(q{SELECT last_error IS NULL AND last_task_id IS NOT NULL FROM durable.schedule_list
	WHERE schedule_name = 'taken'}), 'the schedule enqueues again');
is(sql(q{SELECT count(*) FROM pg_class WHERE relname = 'task_history_p20000101'}), '0',
	'the day of history is gone');
is(sql('SELECT count(*) FROM durable_verify()'), '0', 'durable_verify() finds nothing');

$node->stop;
done_testing();
