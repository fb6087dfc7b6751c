# ALTER EXTENSION durable UPDATE from 0.1.0 keeps every row: tasks in every
# state, their steps and events, a queue; afterwards durable_verify() is
# empty and the API works on the old rows.  Before the update the new
# library says what is wrong instead of failing on missing columns.  From
# 0.4.0, events and waits move into their queues; from 0.8.0, outbox
# messages, inbox entries and request keys.
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

# From 0.4.0, with events and waits: events belong to a queue from 0.5.0
# on.  An await registered before moves to the awaiting task's queue, an
# event emitted before into every queue its emitter may emit into now,
# and a wait recorded in a task's row without a queue replays as one of
# the task's own queue.
$node->safe_psql('postgres', 'CREATE DATABASE ev');
$node->safe_psql('ev', "CREATE EXTENSION durable VERSION '0.4.0'");
$node->safe_psql('ev', q{
	CREATE ROLE vault_app IN ROLE durable_producer;
	CREATE ROLE intruder IN ROLE durable_producer;
	INSERT INTO durable.queues (queue_name, partition_base, partitions, lease,
		max_attempts, retry_base, retry_cap, retry_refill_rate, retry_tokens,
		retry_tokens_at, notify, created_at, restricted)
	VALUES ('shop', 7, 1, '1 hour', 3, 1, 1, 10, 0, now(), false, now(), false),
	       ('other', 100, 4, '1 hour', 3, 1, 1, 10, 0, now(), false, now(), false),
	       ('vault', 32766, 3, '1 hour', 3, 1, 1, 10, 0, now(), false, now(), true);
	INSERT INTO durable.queue_grants VALUES ('vault', 'vault_app'::regrole, 'enqueue');
	-- a grant whose role was dropped: an OID that names no role
	INSERT INTO durable.queue_grants VALUES ('vault', 4000000000, 'work');
	INSERT INTO durable.live_tasks (partition_key, task_id, priority, max_attempts, class,
		created_at, queue_name, payload, run_at, state, attempt, version, fence,
		lease_until, heartbeat_at, progress_at, lease, owner, waits)
	VALUES (7, (1::bigint << 23) | 7, 0, 3, 'idempotent', now(), 'shop', '{}', 'infinity',
	        'waiting', 0, 3, 2, NULL, NULL, NULL, NULL, 'w',
	        jsonb_build_object('pay', jsonb_build_object('kind', 'event', 'status', 'waiting',
	            'args', jsonb_build_object('event', 'paid:1', 'timeout', NULL), 'at', now()))),
	       (7, (2::bigint << 23) | 7, 0, 3, 'idempotent', now(), 'shop', '{}', now(),
	        'running', 1, 3, 1, now() + interval '1 hour', now(), now(), '1 hour', 'w',
	        jsonb_build_object('ship', jsonb_build_object('kind', 'event', 'status', 'received',
	            'args', jsonb_build_object('event', 'shipped:1', 'timeout', NULL), 'at', now(),
	            'payload', '{"carrier": "dhl"}'::jsonb)));
	INSERT INTO durable.event_log (partition_key, task_id, seq, state, fence, at, kind, actor)
	SELECT t.partition_key, t.task_id, s, t.state, t.fence, now(), 'imported', 'w-old'
	FROM durable.live_tasks t, generate_series(1, 3) s;
	-- partitions as 0.4.0 gave them, from a hash of the name alone
	INSERT INTO durable.event_waits (partition_key, event, task_id, name)
	VALUES (4242, 'paid:1', (1::bigint << 23) | 7, 'pay');
	INSERT INTO durable.emitted_events (partition_key, event, payload, payload_hash,
		emitted_at, role, created_at)
	VALUES (4242, 'paid:1', NULL, NULL, NULL, NULL, now()),
	       (17, 'shipped:1', '{"carrier": "dhl"}', durable_request_hash('{"carrier": "dhl"}'),
	        now(), 'vault_app', now()),
	       (18, 'forged:1', '{"x": 1}', durable_request_hash('{"x": 1}'), now(), 'intruder', now()),
	       (19, 'orphan:1', NULL, NULL, NULL, NULL, now());
});
is($node->safe_psql('ev', 'SELECT count(*) FROM durable_verify()'), '0',
	'the events and waits written as 0.4.0 would have are consistent');

# before the update the new library refuses the 0.3.0 emit, saying why
($rc, $out, $err) = $node->psql('ev', q{SELECT durable_emit('paid:1', '{}')});
isnt($rc, 0, 'the emit without a queue is refused before the update');
like($err, qr/durable_emit\(event, payload\) without a queue is no longer supported/, 'and says why');
like($err, qr/ALTER EXTENSION durable UPDATE/, 'and what to do');

$node->safe_psql('ev', 'ALTER EXTENSION durable UPDATE');
is($node->safe_psql('ev', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() is empty after the update');
is($node->safe_psql('ev', q{SELECT string_agg(queue_name || ':' || event, ',' ORDER BY event, queue_name)
	FROM durable.emitted_events WHERE emitted_at IS NOT NULL}),
	'other:forged:1,shop:forged:1,other:shipped:1,shop:shipped:1,vault:shipped:1',
	'emitted events are in every queue their emitter may emit into, not in a restricted one it may not');
is($node->safe_psql('ev', q{SELECT string_agg(queue_name || ':' || event, ',')
	FROM durable.emitted_events WHERE emitted_at IS NULL}),
	'shop:paid:1', 'an awaited event is in the awaiting task\'s queue; one nobody awaits is gone');
is($node->safe_psql('ev', q{SELECT queue_name || ':' || event || ':' || name FROM durable.event_waits}),
	'shop:paid:1:pay', 'the registered await is the awaiting task\'s queue\'s');
is($node->safe_psql('ev', q{SELECT count(*) FROM durable.emitted_events e JOIN durable.queues q USING (queue_name)
	WHERE e.partition_key - q.partition_base NOT BETWEEN 0 AND q.partitions - 1
	  AND e.partition_key + 32768 - q.partition_base NOT BETWEEN 0 AND q.partitions - 1}),
	'0', 'each event is in one of its queue\'s partitions');

# 0.9.0 keeps grants as privileges on a sequence per restricted queue: the
# grant of a role that exists moves there, the dangling one is gone
is($node->safe_psql('ev', q{SELECT string_agg(queue_name || ':' || grantee || ':' || privilege, ',')
	FROM durable.queue_grants}),
	'vault:vault_app:enqueue', 'the grant of a role moves to the queue\'s grants sequence, the dangling one is dropped');
is($node->safe_psql('ev', q{SELECT count(*) FROM pg_depend d JOIN durable.queues q
	ON d.objid = ('durable.' || q.grants_sequence)::regclass
	WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e'}),
	'0', 'which is no member of the extension, so pg_dump dumps it');
like($node->safe_psql('ev', q{SET ROLE vault_app; SELECT durable_enqueue('vault', '{}')}),
	qr/^\d+$/, 'the granted role enqueues after the update');
($rc, $out, $err) = $node->psql('ev', "\\set VERBOSITY sqlstate\nSET ROLE intruder; SELECT durable_enqueue('vault', '{}')");
like($err, qr/42501/, 'another role may not');
($rc, $out, $err) = $node->psql('ev', 'DROP ROLE vault_app');
like($err, qr/privileges for sequence durable\.queue_grants_/, 'and the granted role cannot be dropped while it holds the grant');

# the emit into the task's queue finds the moved registration and wakes it
my $tw = (1 << 23) | 7;
my $tr = (2 << 23) | 7;
is($node->safe_psql('ev', q{SELECT durable_emit('other', 'paid:1', '{"amount": 1}')}), 't',
	'another queue\'s event of that name is its own');
is($node->safe_psql('ev', "SELECT state || ':' || (run_at <= now()) FROM durable.live_tasks WHERE task_id = $tw"),
	'waiting:false', 'and does not wake the task');
is($node->safe_psql('ev', q{SELECT durable_emit('shop', 'paid:1', '{"amount": 10}')}), 't',
	'the emit into the task\'s queue is the first one');
is($node->safe_psql('ev', "SELECT (run_at <= now()) || ':' || (waits -> 'pay' ->> 'status') FROM durable.live_tasks WHERE task_id = $tw"),
	'true:received', 'and wakes the task that awaited it before the update');
# an emitted event is as it was: the same payload is no news, another 55U03
is($node->safe_psql('ev', q{SELECT durable_emit('shop', 'shipped:1', '{"carrier": "dhl"}')}), 'f',
	'an event emitted before the update is known with its payload');
($rc, $out, $err) = $node->psql('ev', q{SELECT durable_emit('vault', 'shipped:1', '{"carrier": "ups"}')});
like($err, qr/already emitted with another payload/, 'also in the restricted queue its emitter may emit into');
# the recorded wait replays as before; the queue is one of its arguments
is($node->safe_psql('ev', "SELECT status || ':' || payload FROM durable_await($tr, 1, 'ship', 'shipped:1')"),
	'received:{"carrier": "dhl"}', 'a wait recorded by 0.4.0 replays as an await of the task\'s queue');
is($node->safe_psql('ev', "SELECT status FROM durable_await($tr, 1, 'ship', 'shipped:1', queue => 'shop')"),
	'received', 'also when the replay names that queue');
($rc, $out, $err) = $node->psql('ev', "SELECT status FROM durable_await($tr, 1, 'ship', 'shipped:1', queue => 'other')");
like($err, qr/was started with other arguments/, 'and is another wait in another queue');
is($node->safe_psql('ev', "SELECT status || ':' || payload FROM durable_await($tr, 1, 'again', 'shipped:1')"),
	'received:{"carrier": "dhl"}', 'an await after the update finds the event emitted before it');
is($node->safe_psql('ev', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() is still empty');

# From 0.8.0, with outbox messages, inbox entries and request keys of
# every application in one namespace: from 0.9.0 on each name in use is a
# queue of its own (created where missing), and its rows are found there.
$node->safe_psql('postgres', 'CREATE DATABASE ns');
$node->safe_psql('ns', "CREATE EXTENSION durable VERSION '0.8.0'");
$node->safe_psql('ns', q{
	INSERT INTO durable.queues (queue_name, partition_base, partitions, lease,
		max_attempts, retry_base, retry_cap, retry_refill_rate, retry_tokens,
		retry_tokens_at, notify, created_at)
	VALUES ('http', 9, 4, '1 hour', 3, 1, 1, 10, 0, now(), false, now());
	INSERT INTO durable.outbox (partition_key, message_id, fence, attempt, created_at,
		lease_until, published_at, topic, key, payload)
	VALUES (11, (1::bigint << 23) | 11, 0, 0, now(), NULL, NULL, 'invoices', 'inv-1', '{"n": 1}'),
	       (12, (2::bigint << 23) | 12, 7, 1, now(), now() - interval '1 s', NULL, 'invoices', NULL, '{"n": 2}'),
	       (13, (3::bigint << 23) | 13, 8, 1, now(), NULL, now(), 'shipments', NULL, '{"n": 3}');
	INSERT INTO durable.inbox (partition_key, consumer, message_id, payload_hash, received_at)
	VALUES (21, 'webhooks', 'evt-1', durable_request_hash('{"paid": 1}'), now()),
	       (22, 'webhooks', 'evt-2', NULL, now());
	INSERT INTO durable.idempotency_keys (partition_key, scope, key, request_hash, completed,
		created_at, locked_until, expires_at, recovery_point, response, fence)
	VALUES (31, 'http', 'req-1', durable_request_hash('{"amount": 1}'), true, now(), now(),
	        now() + interval '1 day', 'finished', '{"status": 201}', 5),
	       (32, 'payments', 'req-2', durable_request_hash('{"amount": 2}'), false, now(),
	        now() + interval '1 hour', now() + interval '1 day', 'charged', NULL, 6);
});
my $ns_counts = q{SELECT (SELECT count(*) FROM durable.outbox) || '/' ||
	(SELECT count(*) FROM durable.inbox) || '/' || (SELECT count(*) FROM durable.idempotency_keys)};
my $ns_before = $node->safe_psql('ns', $ns_counts);

# before the update the new library refuses the forms without a queue
($rc, $out, $err) = $node->psql('ns', q{SELECT durable_inbox_receive('webhooks', 'evt-1')});
isnt($rc, 0, 'the inbox receipt without a queue is refused before the update');
like($err, qr/durable_inbox_receive\(\) without a queue is no longer supported/, 'and says why');
like($err, qr/ALTER EXTENSION durable UPDATE/, 'and what to do');

$node->safe_psql('ns', 'ALTER EXTENSION durable UPDATE');
is($node->safe_psql('ns', $ns_counts), $ns_before, 'every message, entry and key is kept');
is($node->safe_psql('ns', q{SELECT string_agg(queue_name || ':' || partitions || ':' || restricted, ',' ORDER BY queue_name)
	FROM durable.queues}),
	'http:4:false,invoices:1:false,payments:1:false,shipments:1:false,webhooks:1:false',
	'each topic, consumer and scope is a queue, created unrestricted where missing');
is($node->safe_psql('ns', q{SELECT count(*) FROM (
	  SELECT queue_name, partition_key FROM durable.inbox
	  UNION ALL SELECT queue_name, partition_key FROM durable.idempotency_keys) r
	JOIN durable.queues q USING (queue_name)
	WHERE (r.partition_key - q.partition_base + 32768) % 32768 >= q.partitions}),
	'0', 'each inbox entry and key is in one of its queue\'s partitions');
is($node->safe_psql('ns', q{SELECT string_agg(queue_name || ':' || message_id, ',' ORDER BY message_id)
	FROM durable.outbox}),
	'invoices:' . ((1 << 23) | 11) . ',invoices:' . ((2 << 23) | 12) . ',shipments:' . ((3 << 23) | 13),
	'each outbox message is its topic\'s queue\'s, under the id it had');

# the API finds them in the queue named as the old name
is($node->safe_psql('ns', q{SELECT string_agg(payload::text, ',' ORDER BY message_id)
	FROM durable_outbox_claim('invoices', 'p')}),
	'{"n": 1},{"n": 2}', 'the unpublished messages are claimed from their queue');
is($node->safe_psql('ns', q{SELECT durable_outbox_ack('invoices', array_agg(message_id), max(fence))
	FROM durable.outbox WHERE queue_name = 'invoices'}),
	'2', 'and acknowledged there');
is($node->safe_psql('ns', q{SELECT count(*) FROM durable_outbox_claim('shipments', 'p')}),
	'0', 'a published message stays published');
is($node->safe_psql('ns', q{SELECT durable_inbox_receive('webhooks', 'webhooks', 'evt-1', '{"paid": 1}')}),
	'f', 'a message received before the update is a duplicate in its queue');
is($node->safe_psql('ns', q{SELECT durable_inbox_receive('webhooks', 'webhooks', 'evt-2')}),
	'f', 'also one without a payload');
is($node->safe_psql('ns', q{SELECT status || ':' || response FROM durable_idempotent_begin('http', 'http', 'req-1', '{"amount": 1}')}),
	'completed:{"status": 201}', 'a finished request answers with its response in its queue');
is($node->safe_psql('ns', q{SELECT status || ':' || recovery_point FROM durable_idempotent_begin('payments', 'payments', 'req-2', '{"amount": 2}')}),
	'in_progress:charged', 'a request in progress is still held by its handler');
$node->safe_psql('ns', q{SELECT durable_idempotent_finish('payments', 'payments', 'req-2', 6, '{"ok": true}')});
is($node->safe_psql('ns', q{SELECT completed FROM durable.idempotency_keys WHERE key = 'req-2'}),
	't', 'which finishes it under the fence it held before the update');
is($node->safe_psql('ns', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() is empty after the update');

$node->stop;
done_testing();
