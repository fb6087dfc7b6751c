# Eight pgbench clients claim and commit 20,000 tasks, each claim and each
# commit its own transaction: every task ends completed exactly once, the
# fences of each task strictly increase, and no task is left behind.
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

$node->stop;
done_testing();
