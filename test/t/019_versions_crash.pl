# Versions and partition pauses through crashes (docs/design.md section 15).
#
# (a) A migration of a queue is one transaction: a long
#     durable_migrate('mig', ...) of many tasks is killed with SIGKILL while
#     it stands in the middle of its batch (held up by a worker's claim of
#     a task half-way through), and in another round the server is shut
#     down immediately at the same point, and in a third the backend is
#     killed as soon as the migration is seen running.  Afterwards either
#     every task of the batch moved or none did, durable_verify() reports
#     nothing, and once the migration is done a worker of the old version
#     gets nothing, the workers running the old code are fenced off, and
#     workers of the new version take every task and complete it once.
# (b) A partition's pause holds through a crash: worker loops claim and
#     commit continuously, the operator pauses one partition, the server
#     is shut down immediately; after the restart the pause still holds
#     (claiming everything takes nothing from that partition), the leases
#     held at the crash are recovered by the reconciler, and after
#     durable_resume() every task completes exactly once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;

my $node = DurableNode::new_node('versions_crash',
	"durable.reconcile_interval = '100ms'", "restart_after_crash = on");

sub sql { return $node->safe_psql('postgres', $_[0]); }

# the backend of a session is killed: wait for the postmaster's restart
sub kill_backend
{
	my ($pid) = @_;
	my $log_offset = -s $node->logfile;
	kill 'KILL', $pid;
	$node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_offset);
	return $node->poll_query_until('postgres', 'SELECT true');
}

# a background session and its backend's pid
sub session
{
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');
	chomp $pid;
	return ($s, $pid);
}

#
# (a) A migration killed mid-run.
#
my $N = 1200;		# tasks of the batch, the held one included
sql(qq{
	SELECT durable_create_queue('mig', lease => '1 minute', retry_base => 1, retry_cap => 1,
	                            max_attempts => 10);
	CREATE TABLE done (task_id bigint, fence bigint, worker text, partition_key int);
	SELECT count(durable_enqueue('mig', jsonb_build_object('n', n), workflow_version => '1'))
	FROM generate_series(1, $N / 2) n;
	-- the task half-way through the batch, claimed first by a worker (priority)
	SELECT durable_enqueue('mig', '{"n": "middle"}', workflow_version => '1', priority => 1);
	SELECT count(durable_enqueue('mig', jsonb_build_object('n', n), workflow_version => '1'))
	FROM generate_series($N / 2 + 2, $N) n;
});
is(sql(q{SELECT count(*) FROM durable.tasks WHERE queue_name = 'mig' AND versions = '{"workflow": "1"}'}),
	$N, "$N tasks pinned to workflow 1");

my $migrate = qq{SELECT count(*) FROM durable_migrate('mig', '{"workflow": "1"}', '{"workflow": "2"}',
	'ops', '{"change": "CHG-7"}', batch => $N)};
my $moved = sub {
	sql(q{SELECT count(*) FILTER (WHERE versions = '{"workflow": "2"}') || '/' ||
	             count(*) FILTER (WHERE versions = '{"workflow": "1"}')
	      FROM durable.tasks WHERE queue_name = 'mig'});
};
my $migrated_events = sub {
	sql(q{SELECT count(*) FROM durable.events e JOIN durable.tasks t USING (partition_key, task_id)
	      WHERE t.queue_name = 'mig' AND e.kind = 'migrated'});
};

# the migration stands half-way: it has moved the tasks below the middle
# one and waits for the row lock of a worker that is claiming that one
sub migration_half_way
{
	my ($holder, $holder_pid) = session();
	$holder->query_safe('BEGIN');
	is($holder->query_safe(q{SELECT payload ->> 'n' FROM durable_claim('mig', 'holder', versions => '{"workflow": "1"}') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun}),
		'middle', 'a worker of workflow 1 is claiming the middle task, not committed yet');
	my ($m, $m_pid) = session();
	$m->query_until(qr/migrating/, "BEGIN;\n\\echo migrating\n$migrate;\nCOMMIT;\n");
	ok($node->poll_query_until('postgres', qq{
		SELECT wait_event_type = 'Lock' AND $holder_pid = ANY (pg_blocking_pids(pid))
		FROM pg_stat_activity WHERE pid = $m_pid}),
		'the migration waits half-way through its batch for the middle task');
	return ($holder, $m, $m_pid);
}

# 1. SIGKILL of the migrating backend
my ($holder, $m, $m_pid) = migration_half_way();
ok(kill_backend($m_pid), 'the migrating backend was killed; the server is back');
eval { $holder->quit };
eval { $m->quit };
is($moved->(), "0/$N", 'round 1: none of the batch moved (the migration did not commit)');
is($migrated_events->(), '0', 'round 1: no migrated event');
is(sql('SELECT count(*) FROM durable_verify()'), '0', 'round 1: durable_verify() reports nothing');
is(sql(q{SELECT count(*) FROM durable.live_tasks WHERE queue_name = 'mig' AND state <> 'ready'}), '0',
	"round 1: the worker's uncommitted claim went with the crash");

# 2. an immediate shutdown at the same point
($holder, $m) = migration_half_way();
$node->stop('immediate');
eval { $holder->quit };
eval { $m->quit };
$node->start;
is($moved->(), "0/$N", 'round 2: after an immediate shutdown, none of the batch moved');
is($migrated_events->(), '0', 'round 2: no migrated event');
is(sql('SELECT count(*) FROM durable_verify()'), '0', 'round 2: durable_verify() reports nothing');

# 3. workers of workflow 1 hold some tasks; the migrating backend is killed
# as soon as it is seen running, wherever it stands: all or nothing
my $old = sql(q{SELECT string_agg(task_id || ':' || fence, ',')
                FROM durable_claim('mig', 'old', batch => 5, versions => '{"workflow": "1"}') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun});
my @old = split /,/, $old;
is(scalar(@old), 5, 'a worker of workflow 1 holds 5 tasks');
my ($m3, $m3_pid) = session();
$m3->query_until(qr/migrating/, "BEGIN;\n\\echo migrating\n$migrate;\nCOMMIT;\n");
$node->poll_query_until('postgres', qq{
	SELECT query LIKE '%durable_migrate%' OR query LIKE 'COMMIT%'
	FROM pg_stat_activity WHERE pid = $m3_pid});
ok(kill_backend($m3_pid), 'the backend of a running migration was killed; the server is back');
eval { $m3->quit };
my $after = $moved->();
ok($after eq "0/$N" || $after eq "$N/0", "round 3: all or none of the batch moved ($after)");
is($migrated_events->(), $after eq "0/$N" ? '0' : $N, 'round 3: a migrated event for each task moved');
is(sql('SELECT count(*) FROM durable_verify()'), '0', 'round 3: durable_verify() reports nothing');

# the migration done, committed, and the server down at once after it
sql($migrate) if $after eq "0/$N";
$node->stop('immediate');
$node->start;
is($moved->(), "$N/0", 'the committed migration moved every task of the batch, through a crash');
is(sql(q{SELECT count(*) FROM durable.events e JOIN durable.tasks t USING (partition_key, task_id)
         WHERE t.queue_name = 'mig' AND e.kind = 'migrated' AND e.actor = 'ops'
           AND e.detail -> 'evidence' ->> 'change' = 'CHG-7'}),
	$N, 'each task has one migrated event naming the operator and the evidence');
is(sql('SELECT count(*) FROM durable_verify()'), '0', 'durable_verify() reports nothing');

# the old worker runs the old code: its leases ended with the migration
my $stale = 0;
for my $c (split /,/, $old)
{
	my ($id, $f) = split /:/, $c;
	my ($rc, $out, $err) = $node->psql('postgres', "SELECT durable_commit($id, $f)");
	$stale++ if $err =~ /fencing token \d+ is stale/;
}
is($stale, 5, "the workers of workflow 1 are fenced off: every commit of theirs is stale");

# a worker of workflow 1 gets nothing; workers of 2 take and finish everything
is(sql(q{SELECT count(*) FROM durable_claim('mig', 'old', batch => 100, versions => '{"workflow": "1"}') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun}),
	'0', 'a worker of workflow 1 gets nothing');

# claim a batch, record each task's work and commit it, in one transaction
sub work
{
	my ($queue, $worker, $versions) = @_;
	my $v = defined $versions ? ", versions => '$versions'" : '';
	my @rows = split /\n/, sql(qq{
		SELECT task_id || '|' || fence || '|' || (task_id & 32767)
		FROM durable_claim('$queue', '$worker', batch => 500$v) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun});
	return () unless @rows;
	my @c = map { [ split /\|/ ] } @rows;
	my $ids = join(',', map { $_->[0] } @c);
	my $fences = join(',', map { $_->[1] } @c);
	sql(qq{
		BEGIN;
		INSERT INTO done SELECT t, f, '$worker', t & 32767
		FROM unnest(ARRAY[$ids]::bigint[], ARRAY[$fences]::bigint[]) u(t, f);
		SELECT durable_commit_batch(ARRAY[$ids]::bigint[], ARRAY[$fences]::bigint[]);
		COMMIT;
	});
	return @c;
}

my $claimed = 0;
for my $round (1 .. 20)
{
	my @c = (work('mig', 'new-a', '{"workflow": ["2"]}'), work('mig', 'new-b', '{"workflow": ["2", "3"]}'));
	$claimed += @c;
	last unless @c;
}
is($claimed, $N, 'workers of workflow 2 claimed every task');
is(sql(q{SELECT count(*) || ' ' || count(DISTINCT task_id) FROM done}), "$N $N",
	'each task was worked on once');
is(sql(q{SELECT count(*) FROM durable.tasks WHERE queue_name = 'mig' AND state = 'completed'
           AND (SELECT count(*) FROM durable.events e
                WHERE e.partition_key = tasks.partition_key AND e.task_id = tasks.task_id
                  AND e.kind = 'completed') = 1}),
	$N, 'every task completed, with one completed event');
is(sql('SELECT count(*) FROM durable_verify()'), '0', 'durable_verify() reports nothing');

#
# (b) A partition's pause through a crash.
#
my $T = 400;
sql(qq{
	SELECT durable_create_queue('pp', lease => '2 seconds', partitions => 4,
	                            retry_base => 1, retry_cap => 1, max_attempts => 20);
	SELECT count(durable_enqueue('pp', jsonb_build_object('n', n), idempotency_key => 'pp-' || n))
	FROM generate_series(1, $T) n;
	CREATE TABLE claims (task_id bigint, partition_key int, worker text,
	                     before_claim timestamptz, after_claim timestamptz);
	-- a worker: claim (one transaction), work a little, record the work and
	-- commit the task (another); for ever, until the server goes away
	CREATE PROCEDURE work_loop(w text) LANGUAGE plpgsql AS \$\$
	DECLARE
		c record;
		t0 timestamptz;
	BEGIN
		LOOP
			t0 := clock_timestamp();
			SELECT task_id, fence INTO c FROM durable_claim('pp', w) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
			IF c.task_id IS NOT NULL THEN
				INSERT INTO claims VALUES (c.task_id, c.task_id & 32767, w, t0, clock_timestamp());
			END IF;
			COMMIT;
			IF c.task_id IS NULL THEN
				PERFORM pg_sleep(0.05);
				CONTINUE;
			END IF;
			PERFORM pg_sleep(0.01);
			BEGIN
				INSERT INTO done VALUES (c.task_id, c.fence, w, c.task_id & 32767);
				PERFORM durable_commit(c.task_id, c.fence);
			EXCEPTION WHEN OTHERS THEN
				RAISE WARNING 'worker % could not commit task %: %', w, c.task_id, SQLERRM;
			END;
			COMMIT;
		END LOOP;
	END
	\$\$;
});
sql('TRUNCATE done');

# a worker that claims four tasks (each claim starts at the next partition)
# and dies with the server, holding them
my ($held_s) = session();
my @held = map { $held_s->query_safe(q{SELECT task_id FROM durable_claim('pp', 'held', lease => '6 seconds') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun}) =~ s/\s+//gr } 1 .. 4;
my $P = sql("SELECT $held[0] & 32767");
is(sql(qq{SELECT count(*) FROM durable.live_tasks WHERE task_id IN (@{[join ',', @held]}) AND state = 'running'}),
	'4', "a worker holds four tasks, one of them of partition $P");

my @loops;
for my $w (1 .. 3)
{
	my ($s) = session();
	$s->query_until(qr/working/, "\\echo working\nCALL work_loop('loop-$w');\n");
	push @loops, $s;
}
ok($node->poll_query_until('postgres', 'SELECT count(*) >= 30 FROM done'), 'the worker loops commit tasks');

# the operator pauses one partition while the loops run
sql("SELECT durable_pause('pp', partition => $P)");
my $paused_at = sql('SELECT clock_timestamp()');
my $done_at_pause = sql('SELECT count(*) FROM done');
ok($node->poll_query_until('postgres', "SELECT count(*) >= $done_at_pause + 30 FROM done"),
	'the loops go on with the other partitions');

$node->stop('immediate');
eval { $_->quit } for @loops, $held_s;
$node->start;

is(sql(q{SELECT paused_partitions FROM durable.queues WHERE queue_name = 'pp'}), "{$P}",
	'after an immediate shutdown the partition is still paused');
is(sql(qq{SELECT count(*) FROM claims WHERE partition_key = $P AND before_claim > '$paused_at'}), '0',
	'no claim of the loops begun after the pause took a task of the partition');
is(sql(qq{SELECT count(*) FROM durable.live_tasks WHERE task_id IN (@{[join ',', @held]}) AND state = 'running'}),
	'4', 'the held leases are still held after the restart');

# the reconciler recovers them: nobody claims meanwhile
ok($node->poll_query_until('postgres',
	q{SELECT count(*) = 0 FROM durable.live_tasks WHERE queue_name = 'pp' AND state = 'running'}),
	'every lease held at the crash ran out and was settled');
is(sql(qq{SELECT count(DISTINCT task_id) FROM durable.events
          WHERE task_id IN (@{[join ',', @held]}) AND kind = 'lease_expired' AND actor = 'durable reconciler'}),
	'4', "the held worker's leases were recovered by the reconciler");

# claim everything there is: nothing comes from the paused partition
my ($from_paused, $elsewhere) = (0, 0);
for my $round (1 .. 100)
{
	for my $c (work('pp', 'after-crash'))
	{
		$c->[2] == $P ? $from_paused++ : $elsewhere++;
	}
	last if sql(qq{SELECT count(*) FROM durable.live_tasks WHERE queue_name = 'pp' AND partition_key <> $P}) eq '0';
	select(undef, undef, undef, 0.2);
}
is($from_paused, 0, 'claiming everything took nothing from the paused partition');
is(sql(qq{SELECT count(*) FROM durable.live_tasks WHERE queue_name = 'pp' AND partition_key <> $P}), '0',
	'the other partitions are done');
my $left = sql(qq{SELECT count(*) FROM durable.live_tasks WHERE queue_name = 'pp' AND partition_key = $P});
cmp_ok($left, '>', 0, "the paused partition's tasks wait ($left)");

# resume: the rest is claimed and completed
sql("SELECT durable_resume('pp', partition => $P)");
for my $round (1 .. 100)
{
	work('pp', 'after-resume');
	last if sql(q{SELECT count(*) FROM durable.live_tasks WHERE queue_name = 'pp'}) eq '0';
	select(undef, undef, undef, 0.2);
}
is(sql(q{SELECT count(*) FROM durable.tasks WHERE queue_name = 'pp' AND state = 'completed'}), $T,
	'after the resume every task completed');
is(sql(q{SELECT count(*) || ' ' || count(DISTINCT task_id) FROM done}), "$T $T",
	'each task was worked on and committed once');
is(sql(q{SELECT count(*) FROM durable.tasks t WHERE queue_name = 'pp'
           AND (SELECT count(*) FROM durable.events e WHERE e.partition_key = t.partition_key
                AND e.task_id = t.task_id AND e.kind = 'completed') <> 1}), '0',
	'one completed event each');
is(sql('SELECT count(*) FROM durable_verify()'), '0', 'durable_verify() reports nothing');

$node->stop;
done_testing();
