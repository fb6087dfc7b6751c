# ALTER EXTENSION durable UPDATE from 0.1.0 keeps every row: tasks in every
# state, their steps and events, a queue; afterwards durable_verify() is
# empty and the API works on the old rows.  Before the update the new
# library says what is wrong instead of failing on missing columns.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
# the reconciler works elsewhere: this database is updated by hand
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.database = 'postgres'\nfsync = off\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE old');
$node->safe_psql('old', "CREATE EXTENSION durable VERSION '0.1.0'");

# rows as 0.1.0 kept them, written directly: the 0.1.0 library is gone
$node->safe_psql('old', q{
	INSERT INTO durable.queues (queue_name, partition_base, partitions, lease,
		max_attempts, retry_base, retry_cap, retry_refill_rate, retry_tokens,
		retry_tokens_at, notify, created_at)
	VALUES ('old', 5, 1, '1 ms', 3, 1, 1, 10, 0, now(), false, now());
	INSERT INTO durable.tasks (partition_key, task_id, state, class, priority,
		attempt, max_attempts, version, fence, run_at, created_at, lease_until,
		finished_at, queue_name, idempotency_key, request_hash, payload,
		steps_in_doubt)
	SELECT 5, (n::bigint << 23) | 5, state::durable.task_state, 'idempotent', 0,
		least(fence, 1), 3, 1 + steps, fence, now() - interval '1 minute',
		now() - interval '1 hour',
		CASE WHEN state = 'running' THEN now() - interval '1 minute' END,
		CASE WHEN state IN ('completed', 'failed', 'cancelled') THEN now() END,
		'old', 'key-' || n, durable_request_hash(jsonb_build_object('n', n)),
		jsonb_build_object('n', n), doubt
	FROM (VALUES (1, 'ready', 0, 0, 0), (2, 'running', 1, 1, 1), (3, 'waiting', 1, 0, 0),
	             (4, 'completed', 1, 0, 1), (5, 'failed', 1, 0, 0),
	             (6, 'needs_review', 1, 1, 1), (7, 'cancelled', 0, 0, 0)) s(n, state, fence, doubt, steps);
	INSERT INTO durable.events (partition_key, task_id, seq, state, fence, at, kind, actor)
	SELECT partition_key, task_id, 1, state, fence, created_at, 'imported', 'w-old'
	FROM durable.tasks;
	INSERT INTO durable.steps (partition_key, task_id, step, state, class, version,
		attempt, ordinal, created_at, updated_at, idempotency_key, request_hash)
	SELECT t.partition_key, t.task_id, v.step, v.state::durable.step_state,
		v.class::durable.activity_class, 2, 1, 2, now(), now(),
		durable_idempotency_key(t.task_id::text, v.step), durable_request_hash('{}')
	FROM durable.tasks t,
	     (VALUES (2, 'a', 'started', 'idempotent'), (6, 'b', 'unknown', 'unsafe'),
	             (4, 'c', 'committed', 'idempotent')) v(n, step, state, class)
	WHERE t.task_id = (v.n::bigint << 23) | 5;
	INSERT INTO durable.events (partition_key, task_id, seq, state, fence, at, kind, actor, step, detail)
	SELECT s.partition_key, s.task_id, 2, t.state, t.fence, now(), 'step_' || s.state, 'w-old', s.step,
		jsonb_build_object('to', s.state)
	FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id);
	INSERT INTO durable.idempotency_keys (partition_key, scope, key, request_hash,
		created_at, locked_until, expires_at, recovery_point)
	VALUES (9, 'http', 'req-1', durable_request_hash('{}'), now(), now(), now() + interval '1 day', 'started');
	INSERT INTO durable.inbox (partition_key, consumer, message_id, payload_hash, received_at)
	VALUES (9, 'c', 'm-1', NULL, now());
});
is($node->safe_psql('old', 'SELECT count(*) FROM durable_verify()'), '0',
	'the rows written as 0.1.0 would have are consistent');
my $counts = q{SELECT (SELECT count(*) FROM durable.tasks) || '/' ||
	(SELECT count(*) FROM durable.events) || '/' || (SELECT count(*) FROM durable.steps) || '/' ||
	(SELECT count(*) FROM durable.idempotency_keys) || '/' || (SELECT count(*) FROM durable.inbox)};
my $before = $node->safe_psql('old', $counts);

# the new library refuses the old schema with a clear error
my ($rc, $out, $err) = $node->psql('old', "SELECT * FROM durable_claim('old', 'w')");
isnt($rc, 0, 'the API refuses to run on the 0.1.0 schema');
like($err, qr/extension durable is at version 0\.1\.0, but its library is version/,
	'and says why');
like($err, qr/ALTER EXTENSION durable UPDATE/, 'and what to do');

$node->safe_psql('old', 'ALTER EXTENSION durable UPDATE');
is($node->safe_psql('old', "SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
	$node->safe_psql('old', "SELECT default_version FROM pg_available_extensions WHERE name = 'durable'"),
	'updated to the default version');
is($node->safe_psql('old', $counts), $before, 'every row is kept');
is($node->safe_psql('old', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() is empty after the update');
is($node->safe_psql('old', q{SELECT (SELECT count(*) FROM durable.live_tasks) || '/' ||
	(SELECT count(*) FROM durable.task_history) || '/' || (SELECT count(*) FROM durable.live_steps) || '/' ||
	(SELECT count(*) FROM durable.step_history) || '/' || (SELECT count(*) FROM durable.task_keys)}),
	'4/3/2/1/7', 'unfinished tasks and their steps are live, finished ones in history, every key bound');

# the API works on the old rows: the ready task is claimed, the expired
# lease is judged, the task in review is resolved, the key still answers
my $t = sub { (shift() << 23) | 5 };
is($node->safe_psql('old', "SELECT task_id FROM durable_claim('old', 'w-new', lease => '1 minute')"),
	$t->(1), 'the ready task is claimed');
is($node->safe_psql('old', q{SELECT string_agg(task_id || ':' || action, ',') FROM durable_reconcile()}),
	$t->(2) . ':retry_same_activity', 'the expired lease goes through the recovery table');
is($node->safe_psql('old', "SELECT durable_resolve(" . $t->(6) . ", 'mark_not_executed', 'ops', '{}')"),
	'ready', 'the task in review is resolved');
is($node->safe_psql('old', "SELECT durable_enqueue('old', '{\"n\": 4}', idempotency_key => 'key-4')"),
	$t->(4), 'an old enqueue key still answers with its task');
is($node->safe_psql('old', "SELECT string_agg(task_id || ':' || action, ',') FROM durable_replay_dead_letters('old')"),
	$t->(5) . ':replayed', 'the failed task of 0.1.0 is replayed from history');
$node->safe_psql('old', 'SELECT durable_commit(task_id, fence) FROM durable.live_tasks WHERE task_id = ' . $t->(1));
is($node->safe_psql('old', "SELECT h.state || ':' || count(*) FILTER (WHERE e.kind = 'claimed') FROM durable.task_history h
	JOIN durable.events e USING (partition_key, task_id) WHERE task_id = " . $t->(1) . " GROUP BY h.state"),
	'completed:1', 'the claimed task commits into history with its claim');
is($node->safe_psql('old', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() is still empty');
is($node->safe_psql('old', "SELECT count(*) > 0 AND count(*) = count(role) FROM durable.events WHERE actor IS DISTINCT FROM 'w-old'"),
	't', 'every new event records the session role');

$node->stop;
done_testing();
