# Eight pgbench clients claim and commit 20,000 tasks, each claim and each
# commit its own transaction: every task ends completed exactly once, the
# fences of each task strictly increase, and no task is left behind.  Then
# in a queue with a concurrency limit of 1, with random priorities, at two
# isolation levels: never two running tasks of one key.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $tasks = 20_000;
my $clients = 8;

my $node = PostgreSQL::Test::Cluster->new('stress');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'durable'
max_connections = 40
fsync = off
});
$node->start;

$node->safe_psql('postgres', qq{
CREATE EXTENSION durable;
SELECT durable_create_queue('stress', lease => '10 minutes', partitions => 4);
SELECT count(durable_enqueue('stress', jsonb_build_object('n', n), priority => n % 3))
FROM generate_series(1, $tasks) n;
});

# a claim and its commit, in two transactions; a claim that finds nothing
# (everything left is locked by other clients) commits nothing
my $script = q{
SELECT coalesce(max(task_id), 0) AS task_id, coalesce(max(fence), 0) AS fence
FROM durable_claim('stress', 'client-' || :client_id) \gset
\if :task_id
SELECT durable_commit(:task_id, :fence, jsonb_build_object('client', :client_id));
\endif
};

# enough cycles for every task, with room for claims that find nothing
my $per_client = int($tasks / $clients * 1.25);
$node->pgbench("--no-vacuum --client=$clients --jobs=2 --transactions=$per_client",
	0, [qr/processed: @{[$clients * $per_client]}\/@{[$clients * $per_client]}/],
	[qr/^$/], 'pgbench claims and commits', { 'claim_commit' => $script });

is($node->safe_psql('postgres',
	"SELECT count(*) FILTER (WHERE state = 'completed') || '/' || count(*) FROM durable.tasks"),
	"$tasks/$tasks", 'every task completed, none left behind');

is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (
	  SELECT task_id FROM durable.events GROUP BY task_id
	  HAVING count(*) FILTER (WHERE kind = 'completed') <> 1) x}),
	'0', 'each task was completed exactly once');

is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (
	  SELECT fence, lag(fence) OVER (PARTITION BY task_id ORDER BY seq) AS before
	  FROM durable.events WHERE kind = 'claimed') x
	WHERE before IS NOT NULL AND fence <= before}),
	'0', 'the fences of each task strictly increase');

is($node->safe_psql('postgres', q{
	SELECT count(*) FROM durable.tasks t
	WHERE t.result->>'client' <> substr((SELECT actor FROM durable.events e
	                                      WHERE e.partition_key = t.partition_key
	                                      AND e.task_id = t.task_id AND e.kind = 'claimed'
	                                      ORDER BY seq DESC LIMIT 1), 8)}),
	'0', 'each task was committed by the client that held it');

is($node->safe_psql('postgres', q{
	SELECT count(*) FROM durable.tasks t
	WHERE t.version <> (SELECT max(seq) FROM durable.events e
	                    WHERE e.partition_key = t.partition_key AND e.task_id = t.task_id)
	   OR t.state <> (SELECT state FROM durable.events e
	                  WHERE e.partition_key = t.partition_key AND e.task_id = t.task_id
	                  ORDER BY seq DESC LIMIT 1)}),
	'0', 'every row agrees with the last event of its history');

# A concurrency limit of 1 under the same load, with random priorities:
# each cycle enqueues a task of one of three keys at a random priority,
# claims, and, holding what it claimed (its claim committed), counts the
# running tasks of the claimed task's key before committing it: never more
# than one.  Under READ COMMITTED and REPEATABLE READ, where a claim may be
# refused with 40001 and pgbench runs the cycle again.
$node->safe_psql('postgres', q{
SELECT durable_create_queue('keyed', lease => '10 minutes', partitions => 4,
                            concurrency_limit => 1);
CREATE TABLE keyed_seen (isolation text, concurrency_key text, running bigint);
});
my $keyed_cycles = 150;
for my $isolation ('read committed', 'repeatable read')
{
	my $keyed = qq{
SET default_transaction_isolation = '$isolation';
\\set key random(1, 3)
\\set priority random(0, 9)
SELECT durable_enqueue('keyed', '{}', priority => :priority,
                       concurrency_key => 'k' || :key) > 0 AS enqueued \\gset
SELECT coalesce(max(task_id), 0) AS task_id, coalesce(max(fence), 0) AS fence
FROM durable_claim('keyed', 'client-' || :client_id) \\gset
\\if :task_id
SELECT substr(concurrency_key, 2)::int AS claimed_key FROM durable.live_tasks
WHERE task_id = :task_id \\gset
INSERT INTO keyed_seen SELECT '$isolation', 'k' || :claimed_key, count(*)
FROM durable.live_tasks
WHERE queue_name = 'keyed' AND concurrency_key = 'k' || :claimed_key AND state = 'running';
SELECT durable_commit(:task_id, :fence);
\\endif
};
	(my $file = "keyed_cycle_$isolation") =~ tr/ /_/;
	$node->pgbench("--no-vacuum --client=$clients --jobs=2 --transactions=$keyed_cycles --max-tries=100",
		0, [qr/processed: @{[$clients * $keyed_cycles]}\/@{[$clients * $keyed_cycles]}/],
		[qr/^$/], "pgbench claims with a concurrency limit ($isolation)",
		{ $file => $keyed });
	is($node->safe_psql('postgres', qq{
		SELECT count(*) > 0 AND count(*) FILTER (WHERE running <> 1) = 0
		FROM keyed_seen WHERE isolation = '$isolation'}),
		't', "one running task of a key at a time ($isolation)");
}

$node->stop;
done_testing();
