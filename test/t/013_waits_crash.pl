# Workflows that wait, through crashes: a worker killed with SIGKILL right
# after starting a wait (committed or not), the server shut down
# immediately while tasks sleep, await events and join children, an event
# emitted just before the server goes down, and a due schedule across a
# crash.  Expected: nothing lost, no wake-up twice, no occurrence twice,
# and durable_verify() reports nothing.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use IPC::Run;
use Test::More;
use DurableNode;

my $node = DurableNode::new_node('waits_crash',
	"durable.reconcile_interval = '100ms'", "restart_after_crash = on");

sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(q{
	SELECT durable_create_queue('flow', lease => '1 second');
	SELECT durable_create_queue('wf', lease => '1 minute');
	SELECT durable_create_queue('kids', lease => '1 minute');
});

# a task claimed and held by a session we can kill: its backend pid
sub claimed_session
{
	my ($payload) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $id = sql("SELECT durable_enqueue('flow', '$payload')");
	my $fence = $s->query_safe(
		"SELECT fence FROM durable_claim('flow', 'doomed') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun WHERE task_id = $id");
	chomp $fence;
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	chomp $pid;
	return ($s, $id, $fence, $pid);
}

# 1. killed right after the wait committed: the task waits, no lease to expire
my ($s1, $t1, $f1, $pid1) = claimed_session('{"case": "committed"}');
$s1->query_safe("SELECT durable_sleep($t1, $f1, 'nap', duration => '2 seconds')");
my $log_offset = -s $node->logfile;
kill 'KILL', $pid1;
eval { $s1->quit };
# the postmaster may not have seen the death yet: wait for its restart
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_offset);
ok($node->poll_query_until('postgres', 'SELECT true'), 'the server is back after the killed backend');
is(sql("SELECT state FROM durable.live_tasks WHERE task_id = $t1"), 'waiting',
	'a worker killed after its sleep committed leaves the task sleeping');

# 2. killed inside the transaction that would start the wait: nothing of it
# stays, the lease runs out and the recovery table hands the task out again
my ($s2, $t2, $f2, $pid2) = claimed_session('{"case": "uncommitted"}');
$s2->query_safe('BEGIN');
$s2->query_safe("SELECT * FROM durable_await($t2, $f2, 'hook', 'hook:2')");
$log_offset = -s $node->logfile;
kill 'KILL', $pid2;
eval { $s2->quit };
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_offset);
ok($node->poll_query_until('postgres', 'SELECT true'), 'the server is back');
is(sql("SELECT count(*) FROM durable.event_waits WHERE task_id = $t2"), '0',
	'an await that did not commit left no registration');
ok($node->poll_query_until('postgres',
	"SELECT state IN ('ready', 'waiting') AND waits IS NULL FROM durable.live_tasks WHERE task_id = $t2"),
	'its lease ran out and the task is to be claimed again, with no wait');

# 3. tasks that sleep, await and join when the server stops immediately
my $fence = sub { sql("SELECT fence FROM durable.live_tasks WHERE task_id = $_[0]") };
my $sleeper = sql(q{SELECT durable_enqueue('wf', '{"case": "sleeper"}')});
my $awaiter = sql(q{SELECT durable_enqueue('wf', '{"case": "awaiter"}')});
my $parent = sql(q{SELECT durable_enqueue('wf', '{"case": "parent"}')});
sql("SELECT count(*) FROM durable_claim('wf', 'w', batch => 10) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun");
sql("SELECT durable_sleep($sleeper, " . $fence->($sleeper) . ", 'nap', duration => '3 seconds')");
sql("SELECT * FROM durable_await($awaiter, " . $fence->($awaiter) . ", 'hook', 'hook:3')");
my $kid = sql("SELECT durable_spawn($parent, " . $fence->($parent) . ", 'kid', 'kids', '{\"kid\": 1}')");
sql("SELECT * FROM durable_join($parent, " . $fence->($parent) . ", 'kids')");
my $before = sql(q{SELECT string_agg(task_id || ':' || state || ':' || run_at, ',' ORDER BY task_id)
                 FROM durable.live_tasks WHERE queue_name = 'wf' AND state = 'waiting'});
$node->stop('immediate');
$node->start;
is(sql(q{SELECT string_agg(task_id || ':' || state || ':' || run_at, ',' ORDER BY task_id)
       FROM durable.live_tasks WHERE queue_name = 'wf' AND state = 'waiting'}),
	$before, 'after an immediate shutdown every wait is as it was');
is(sql("SELECT count(*) FROM durable.event_waits WHERE task_id = $awaiter"), '1',
	'the await is still registered');

# an event emitted and committed just before the server goes down
sql(q{SELECT durable_emit('wf', 'hook:3', '{"ok": true}')});
$node->stop('immediate');
$node->start;
ok(sql("SELECT run_at <= now() AND waits -> 'hook' ->> 'status' = 'received' FROM durable.live_tasks WHERE task_id = $awaiter") eq 't',
	'an emit committed before the crash has woken its await');
# one emitted in a transaction the crash ends: as if never emitted
my $s3 = $node->background_psql('postgres', on_error_stop => 0);
$s3->query_safe('BEGIN');
$s3->query_safe(q{SELECT durable_emit('wf', 'hook:4', '{"lost": true}')});
$node->stop('immediate');
eval { $s3->quit };
$node->start;
is(sql(q{SELECT count(*) FROM durable.emitted_events WHERE event = 'hook:4'}), '0',
	'an emit the crash interrupted is not there');
is(sql(q{SELECT durable_emit('wf', 'hook:4', '{"lost": false}')}), 't',
	'and the event can be emitted after the restart');

# the child finishes after the restart: the parent wakes once
my $kf = sql("SELECT fence FROM durable_claim('kids', 'k') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun WHERE task_id = $kid");
sql("SELECT durable_commit($kid, $kf, '{\"done\": true}')");
is(sql("SELECT run_at <= now() FROM durable.live_tasks WHERE task_id = $parent"), 't',
	'its last child finishing wakes the parent');

# every woken task is claimed and finished, once; the sleeper after its time
ok($node->poll_query_until('postgres', "SELECT now() > run_at FROM durable.live_tasks WHERE task_id = $sleeper"),
	'the sleeper\'s time comes');
my %status;
for my $round (1 .. 20)
{
	my $claimed = sql("SELECT string_agg(task_id || ':' || fence, ',') FROM durable_claim('wf', 'w2', batch => 10) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun");
	for my $c (split /,/, $claimed)
	{
		my ($id, $f) = split /:/, $c;
		my $status =
		    $id == $sleeper ? sql("SELECT durable_sleep($id, $f, 'nap', duration => '3 seconds')")
		  : $id == $awaiter ? sql("SELECT status FROM durable_await($id, $f, 'hook', 'hook:3')")
		  : $id == $parent ? sql("SELECT status FROM durable_join($id, $f, 'kids')")
		  : 'other';
		$status{$id} .= "$status ";
		sql("SELECT durable_commit($id, $f)");
	}
	last if sql(q{SELECT count(*) FROM durable.live_tasks WHERE queue_name = 'wf'}) eq '0';
	sleep 1;
}
is($status{$sleeper}, 'elapsed ', 'the sleeper woke once, its sleep elapsed');
is($status{$awaiter}, 'received ', 'the awaiter woke once, with the event');
is($status{$parent}, 'done ', 'the parent woke once, its children done');
is(sql(q{SELECT count(*) FROM durable.events WHERE kind = 'woken' AND task_id IN } . "($awaiter, $parent)"), '2',
	'one wake-up each');

# 4. a due schedule across a crash: its occurrence is enqueued once
sql(q{
	SELECT durable_create_queue('nightly');
	SELECT durable_schedule('export', '0 3 * * *', 'nightly') > now();
	UPDATE durable.schedules SET next_run = now() - interval '1 minute';
});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM durable.tasks WHERE queue_name = 'nightly'}),
	'the reconciler enqueued the occurrence');
$node->stop('immediate');
$node->start;
sql(q{SELECT count(*) FROM durable_reconcile()});
sleep 1;
is(sql(q{SELECT count(*) FROM durable.tasks WHERE queue_name = 'nightly'}), '1',
	'after the crash it is still one occurrence');
# set back, as if the crash had come before the schedule moved on
sql(q{UPDATE durable.schedules SET next_run = last_run});
sql(q{SELECT count(*) FROM durable_reconcile()});
is(sql(q{SELECT count(*) FROM durable.tasks WHERE queue_name = 'nightly'}), '1',
	'an occurrence enqueued again is the same task');

# 5. the reference worker's workflow that waits: charge, await the payment
# webhook, fan out two labels, join them, sleep, e-mail; the first worker is
# killed right after its first wait began
SKIP:
{
	my $bin = 'examples/durable_worker';
	skip "$bin is not built", 5 unless -x $bin;
	$node->safe_psql('postgres', 'CREATE DATABASE service');
	$node->safe_psql('service', slurp_file('examples/service.sql'));
	my @db = ('--db', $node->connstr('postgres'), '--service', $node->connstr('service'),
		'--lease', '2 seconds', '--quiet');
	sql(q{
		SELECT durable_create_queue('orders_wf', lease => '2 seconds');
		SELECT durable_create_queue('labels_wf', lease => '2 seconds');
		SELECT count(durable_enqueue('orders_wf', jsonb_build_object('steps', jsonb_build_array(
			jsonb_build_array('charge', 'idempotent'),
			jsonb_build_array('paid', 'await', 'payment:' || n, '1 hour'),
			jsonb_build_array('labels', 'spawn', 'labels_wf', '2'),
			jsonb_build_array('labels', 'join'),
			jsonb_build_array('reminder', 'sleep', '1 second'),
			jsonb_build_array('email', 'idempotent')))))
		FROM generate_series(1, 3) n;
	});
	my $out = '';
	IPC::Run::run([ $bin, @db, '--queue', 'orders_wf', '--name', 'doomed',
		'--crash-at', 'after_wait:await' ], '>', \$out, '2>', \my $err);
	like($out, qr/killed at after_wait/, 'the worker was killed right after its await began');
	# the others run up to their awaits; the webhooks come; workers go on
	run_log([ $bin, @db, '--queue', 'orders_wf', '--name', 'w1', '--idle-exit', '300' ]);
	sql(q{SELECT count(durable_emit('orders_wf', 'payment:' || n, jsonb_build_object('paid', n))) FROM generate_series(1, 3) n});
	for my $round (1 .. 30)
	{
		last if sql(q{SELECT count(*) FROM durable.live_tasks WHERE queue_name IN ('orders_wf', 'labels_wf')}) eq '0';
		run_log([ $bin, @db, '--queue', 'labels_wf', '--name', 'printer', '--idle-exit', '100' ]);
		run_log([ $bin, @db, '--queue', 'orders_wf', '--name', "w$round", '--idle-exit', '300' ]);
	}
	is(sql(q{SELECT string_agg(DISTINCT state::text, ',') FROM durable.tasks WHERE queue_name = 'orders_wf'}),
		'completed', 'every order completed');
	is(sql(q{SELECT count(*) FROM durable.tasks WHERE queue_name = 'labels_wf' AND state = 'completed'}),
		'6', 'two labels each, spawned once');
	is($node->safe_psql('service', 'SELECT count(*) - count(DISTINCT key) FROM effects'), '0',
		'no effect happened twice');
	is($node->safe_psql('service', 'SELECT count(*) FROM effects'), '12',
		'a charge, two labels and an e-mail per order');
}

is(sql('SELECT count(*) FROM durable_verify()'), '0', 'durable_verify() reports nothing');

$node->stop;
done_testing();
