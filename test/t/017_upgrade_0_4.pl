# ALTER EXTENSION durable UPDATE from 0.4.0 with data as the 0.4.0 library
# wrote it (test/t/data/durable-0.4.0.sql): waits, events, a child and its
# parent, a schedule, history, request keys, inbox and outbox.  Afterwards
# durable_verify() is empty and every wait goes on where it stood: the
# sleep elapses, the await registered before the update is woken by an emit
# into its task's queue, an event emitted before the update is received by
# an await after it, the parent's join sees its child finish, the overdue
# schedule enqueues its latest occurrence, the expired lease is settled,
# and history retires.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('upgrade04');
$node->init;
# the reconciler works elsewhere: this database is ticked by hand
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.database = 'postgres'\nfsync = off\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE old');
$node->safe_psql('old', q{
	CREATE EXTENSION durable VERSION '0.4.0';
	-- the installation of the dump, not this one: its keys and ids go on
	DELETE FROM durable.installation;});
my ($rc, $out, $err) = $node->psql('old', undef,
	extra_params => [ '-v', 'ON_ERROR_STOP=1', '-f', 'test/t/data/durable-0.4.0.sql' ]);
is($rc, 0, 'the 0.4.0 data loads') or diag($err);

sub sql { return $node->safe_psql('old', $_[0]); }

is(sql("SELECT state || ':' || count(*) FROM durable.tasks GROUP BY state ORDER BY state"),
	"ready:2\nrunning:1\nwaiting:3\ncompleted:2\nfailed:1", 'the tasks of 0.4.0');

# a task enqueued with a workflow version before 0.6.0 is pinned to it
sql(q{UPDATE durable.live_tasks SET workflow_version = '7' WHERE payload = '{"case": "ready"}'});

sql('ALTER EXTENSION durable UPDATE');
is(sql("SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
	sql("SELECT default_version FROM pg_available_extensions WHERE name = 'durable'"),
	'updated to the default version');
is(sql('SELECT count(*) FROM durable_verify()'), '0', 'durable_verify() is empty after the update');
is(sql(q{SELECT string_agg(coalesce(versions::text, 'none'), ' ' ORDER BY versions::text)
	FROM durable.live_tasks WHERE payload = '{"case": "ready"}' OR workflow_version IS NULL}),
	'{"workflow": "7"} none none none none none', 'the workflow version of 0.4.0 is the pinned version of 0.6.0');

# the tick: the expired lease is settled (its idempotent step planned
# again), the overdue schedule enqueues its latest occurrence once
is(sql(q{SELECT string_agg(action, ',' ORDER BY action) FROM durable_reconcile()
	WHERE action IN ('retry_same_activity', 'scheduled')}),
	'retry_same_activity,scheduled', 'the tick settles the lease and runs the schedule');
is(sql(q{SELECT s.state FROM durable.tasks t JOIN durable.steps s USING (partition_key, task_id)
	WHERE t.payload = '{"case": "running"}'}), 'planned', 'the step in doubt is planned again');
is(sql(q{SELECT count(*) FROM durable.tasks WHERE payload = '{"case": "scheduled"}'}), '1',
	'one occurrence of the overdue schedule');
is(sql('SELECT failing_parts FROM durable.status'), '0', 'no part of the tick fails');

# an await registered before the update: woken by an emit into its queue
my $await = sql(q{SELECT task_id FROM durable.tasks WHERE payload = '{"case": "await"}'});
is(sql(q{SELECT durable_emit('side', 'e1', '{"from": "another queue"}')}), 't',
	'the same name in another queue is another event');
my $woken = "SELECT (waits->'hook'->>'status') || ' ' || (run_at <= now())
	FROM durable.tasks WHERE task_id = $await";
is(sql($woken), 'waiting false', 'which does not wake the await');
is(sql(q{SELECT durable_emit('old', 'e1', '{"hook": 1}')}), 't', 'the emit into its queue');
is(sql($woken), 'received true', 'wakes it');

# the sleeper, the woken await and a new await of an event emitted before
# the update, each replayed by a worker of queue old
my %by_case;
for my $row (split /\n/, sql(q{SELECT c.task_id || ' ' || c.fence || ' ' || (c.payload->>'case')
	FROM durable_claim('old', 'worker', lease => '1 hour', batch => 10) c}))
{
	my ($t, $f, $case) = split / /, $row;
	$by_case{$case} = [ $t, $f ];
}
ok($by_case{sleep} && $by_case{await} && $by_case{ready}, 'the waiting tasks come back');
my ($t, $f) = @{ $by_case{sleep} };
is(sql("SELECT durable_sleep($t, $f, 'nap', interval '1 second')"), 'elapsed', 'the sleep elapsed');
($t, $f) = @{ $by_case{await} };
is(sql("SELECT status || ' ' || payload FROM durable_await($t, $f, 'hook', 'e1', interval '100 years')"),
	'received {"hook": 1}', 'the await registered before the update receives its event');
($t, $f) = @{ $by_case{ready} };
is(sql("SELECT status || ' ' || payload FROM durable_await($t, $f, 'early', 'e2')"),
	'received {"early": true}', 'an event emitted before the update is received after it');

# the parent's join: its child (queue side) finishes, the parent wakes
my $child = sql(q{SELECT c.task_id || ' ' || c.fence FROM durable_claim('side', 'worker') c
	WHERE c.payload = '{"case": "child"}'});
my ($ct, $cf) = split / /, $child;
sql("SELECT durable_commit($ct, $cf, result => '{\"child\": \"done\"}')");
my ($pt, $pf) = split / /, sql(q{SELECT c.task_id || ' ' || c.fence
	FROM durable_claim('old', 'worker', batch => 10) c WHERE c.payload = '{"case": "parent"}'});
ok($pt, 'the parent is woken by its child');
is(sql("SELECT status || ' ' || (children->0->>'state') FROM durable_join($pt, $pf, 'kids')"),
	'done completed', 'its join is done');

# request keys, inbox and outbox of 0.4.0 answer as before, in the queues
# their scope, consumer and topic became
is(sql(q{SELECT status || ' ' || response FROM durable_idempotent_begin('http', 'http', 'req-1', '{"a": 1}')}),
	'completed {"r": 1}', 'a request key of 0.4.0 replays its response');
is(sql(q{SELECT durable_inbox_receive('consumer', 'consumer', 'msg-1', '{"m": 1}')}), 'f',
	'an inbox message of 0.4.0 is a duplicate');
is(sql(q{SELECT count(*) FROM durable_outbox_claim('topic', 'pub', 10)}), '1', 'its outbox message is published');

# history retires: everything finished goes, nothing else
sql(q{SELECT durable_commit(task_id, fence) FROM durable.tasks WHERE state = 'running'});
$node->safe_psql('old', q{SET durable.retention = 0; SELECT count(*) FROM durable_reconcile()});
# (a task finished today may sit in today's day of history, which goes
# whole once the day is past retention; those of 0.4.0 are in the default
# partition, and go now)
is(sql(q{SELECT count(*) FROM durable.tasks WHERE state IN ('completed', 'failed', 'cancelled')
	AND (finished_at < date_trunc('day', now(), 'UTC') OR payload->>'case' IN ('done', 'failed', 'received'))}),
	'0', 'history retires the finished tasks of 0.4.0, and all of the days before today');
is(sql('SELECT count(*) FROM durable_verify()'), '0', 'durable_verify() is empty at the end');

$node->stop;
done_testing();
