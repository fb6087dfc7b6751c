# The stop-loss runbook (docs/design.md section 15, README "The stop-loss
# runbook"), played end to end against a workload whose payments
# dependency starts failing for one partition of the queue.
#
# The workload: a queue of orders in four partitions, three worker loops
# (server-side procedures that commit as they go) each charging an order
# with an unsafe step against a payments provider simulated in the
# database (schema payments: a ledger of the charges it made, and an
# outage table the test flips).  During the outage the provider, for the
# orders of one region (here: one partition), either refuses with a 500
# before charging, or charges and never answers, or never answers without
# charging; a worker that gets no answer cannot know which.  Two more
# workers hang there: one in the middle of its charge, one before it.
#
# The operator, with calls only:
#   1. finds the failing partition and pauses it (the rest keeps running);
#   2. snapshots the recovery package of every unfinished task of it;
#   3. fences off the old leases (a quarantine ends one at once, a tick
#      settles the other once it has run out);
#   4. reconciles each step in doubt by the provider's record of the
#      operation: found -> mark_committed with the effect id as evidence,
#      not found -> mark_not_executed;
#   5. quarantines what cannot go on before the fix, with a reason;
#   6. after the fix, replays the dead letters in small batches by reason;
#   7. resumes the partition.
# Expected at the end: every order completed exactly once, each charged
# exactly once by the provider (no duplicate side effect), no claim took
# from the partition while it was paused, the late writes of the fenced-off
# workers were refused, the events name who quarantined, resolved and
# replayed, and durable_verify() reports nothing.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;

my $node = DurableNode::new_node('runbook', "durable.reconcile_interval = '200ms'");

sub sql { return $node->safe_psql('postgres', $_[0]); }

# the queue, and the partition whose provider region will fail
sql(q{
	SELECT durable_create_queue('payments', lease => '5 seconds', partitions => 4,
	                            max_attempts => 1);
});
my $P = sql(q{SELECT partition_base + 1 FROM durable.queues WHERE queue_name = 'payments'});

# The payments provider.  charge() makes a charge and returns its effect id.
# It honours no idempotency key (the step is unsafe): a second call with the
# same key charges again, which is the loss the runbook must not cause.
# In an outage of a region it refuses (500, nothing charged), or charges and
# its answer is lost, or its answer is lost before it charged, by the key.
sql(q{
	CREATE SCHEMA payments;
	CREATE TABLE payments.ledger (
		effect_id text PRIMARY KEY,
		idempotency_key text NOT NULL,
		amount int NOT NULL,
		region int NOT NULL,
		charged_at timestamptz NOT NULL DEFAULT clock_timestamp());
	CREATE SEQUENCE payments.charge_seq;
	CREATE TABLE payments.outage (region int PRIMARY KEY);
	CREATE FUNCTION payments.charge(key text, amount int, region int) RETURNS text
	LANGUAGE plpgsql AS $$
	DECLARE
		eff text;
	BEGIN
		IF EXISTS (SELECT FROM payments.outage o WHERE o.region = charge.region)
		   AND abs(hashtext(key)) % 3 <> 1 THEN
			IF abs(hashtext(key)) % 3 = 0 THEN
				RAISE EXCEPTION 'payments: 500 Internal Server Error';
			END IF;
			RETURN NULL;			-- no answer, nothing charged
		END IF;
		INSERT INTO payments.ledger VALUES ('ch_' || nextval('payments.charge_seq'), key, amount, region)
		RETURNING effect_id INTO eff;
		IF EXISTS (SELECT FROM payments.outage o WHERE o.region = charge.region) THEN
			RETURN NULL;			-- charged, and the answer is lost
		END IF;
		RETURN eff;
	END
	$$;
});

# The workers.  A loop claims an order (one transaction), plans and starts
# the charge (committed before the call), calls the provider (its ledger
# commits apart from durable), then records what it learnt: a charge with
# its receipt and effect id, and the order completed with the worker's own
# record (done) in the same transaction; a 500 as not executed and a retry;
# no answer as a failure of unknown outcome (the task goes to review).  A
# charge already committed is not made again.  Every claim is logged with
# the time before and after it.
sql(q{
	CREATE TABLE control (stop boolean NOT NULL);
	INSERT INTO control VALUES (false);
	CREATE TABLE done (task_id bigint, fence bigint, worker text);
	CREATE TABLE claims (task_id bigint, partition_key int, worker text,
	                     before_claim timestamptz, after_claim timestamptz);
	CREATE PROCEDURE pay_loop(w text) LANGUAGE plpgsql AS $$
	DECLARE
		c record;
		s record;
		t0 timestamptz;
		v int;
		eff text;
		outcome text;
		request jsonb;
		ok boolean;
	BEGIN
		LOOP
			EXIT WHEN (SELECT stop FROM control);
			t0 := clock_timestamp();
			SELECT task_id, fence, payload INTO c FROM durable_claim('payments', w) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
			IF c.task_id IS NOT NULL THEN
				INSERT INTO claims VALUES (c.task_id, c.task_id & 32767, w, t0, clock_timestamp());
			END IF;
			COMMIT;
			IF c.task_id IS NULL THEN
				PERFORM pg_sleep(0.05);
				CONTINUE;
			END IF;
			PERFORM pg_sleep(0.02);		-- the work before the charge
			request := jsonb_build_object('amount', c.payload -> 'amount');
			ok := true;
			BEGIN
				SELECT * INTO s FROM durable_step(c.task_id, c.fence, 'charge', 'unsafe', request);
				IF s.state = 'planned' THEN
					PERFORM durable_step_start(c.task_id, c.fence, 'charge', s.version);
				ELSIF s.state <> 'committed' THEN
					RAISE EXCEPTION 'step charge of task % is %', c.task_id, s.state;
				END IF;
			EXCEPTION WHEN OTHERS THEN
				RAISE WARNING 'worker %, task %: %', w, c.task_id, SQLERRM;
				ok := false;
			END;
			COMMIT;
			CONTINUE WHEN NOT ok;
			outcome := 'already charged';
			IF s.state = 'planned' THEN
				BEGIN
					eff := payments.charge(s.idempotency_key, (c.payload ->> 'amount')::int, (c.task_id & 32767)::int);
					outcome := CASE WHEN eff IS NULL THEN 'no answer' ELSE 'charged' END;
				EXCEPTION WHEN OTHERS THEN
					outcome := 'refused';
				END;
				COMMIT;
			END IF;
			BEGIN
				IF outcome = 'charged' THEN
					PERFORM durable_record_receipt(c.task_id, c.fence, 'charge', 'succeeded', eff,
					                               jsonb_build_object('effect_id', eff));
					SELECT version INTO v FROM durable_step(c.task_id, c.fence, 'charge', 'unsafe', request);
					PERFORM durable_commit(c.task_id, c.fence, jsonb_build_object('effect_id', eff),
					                       step => 'charge', expected_version => v);
				ELSIF outcome = 'refused' THEN
					PERFORM durable_record_receipt(c.task_id, c.fence, 'charge', 'not_executed',
					                               evidence => '{"status": 500}');
					PERFORM durable_fail(c.task_id, c.fence, 'transient', '{"status": 500}');
				ELSIF outcome = 'no answer' THEN
					PERFORM durable_fail(c.task_id, c.fence, 'unknown', '{"error": "timeout"}', step => 'charge');
				END IF;
				IF outcome IN ('charged', 'already charged') THEN
					INSERT INTO done VALUES (c.task_id, c.fence, w);
					PERFORM durable_commit(c.task_id, c.fence, jsonb_build_object('order', c.payload -> 'order'));
				END IF;
			EXCEPTION WHEN OTHERS THEN
				RAISE WARNING 'worker %, task %: %', w, c.task_id, SQLERRM;
			END;
			COMMIT;
		END LOOP;
	END
	$$;
});

my $ORDERS = 240;
sql(qq{
	SELECT count(durable_enqueue('payments', jsonb_build_object('order', n, 'amount', 100 + n),
	                             idempotency_key => 'order-' || n))
	FROM generate_series(1, $ORDERS) n;
});
cmp_ok(sql(qq{SELECT count(*) FROM durable.tasks WHERE queue_name = 'payments' AND partition_key = $P}),
	'>', 0, "orders in every partition, $P among them");

# the workload runs, healthy at first
my @loops;
for my $w (1 .. 3)
{
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	$s->query_until(qr/working/, "\\echo working\nCALL pay_loop('worker-$w');\n");
	push @loops, $s;
}
ok($node->poll_query_until('postgres', 'SELECT count(*) >= 20 FROM done'), 'the workers charge orders');

# the provider fails for the region of partition $P
sql("INSERT INTO payments.outage VALUES ($P)");

# two more workers of that partition hang at the provider: hung-1 in the
# middle of its charge (started, called, no answer yet), hung-2 before it
my $hung = $node->background_psql('postgres', on_error_stop => 0);
my %hung;
for my $try (1 .. 100)
{
	my ($id, $fence) = split /\|/, $hung->query_safe(q{SELECT task_id || '|' || fence FROM durable_claim('payments', 'hung') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun});
	next unless $id;
	if (($id & 32767) == $P && !$hung{1}) { $hung{1} = [ $id, $fence ]; }
	elsif (($id & 32767) == $P) { $hung{2} = [ $id, $fence ]; }
	else { $hung->query_safe("SELECT durable_release($id, $fence, 'not this one')"); }
	last if $hung{2};
}
ok($hung{1} && $hung{2}, "two workers hold orders of partition $P");
my ($h1, $hf1) = @{ $hung{1} };
my ($h2, $hf2) = @{ $hung{2} };
$hung->query_safe("SELECT durable_heartbeat($h1, $hf1, lease => '3 seconds')");
$hung->query_safe("SELECT durable_heartbeat($h2, $hf2, lease => '1 minute')");
my $h1_key = $hung->query_safe(qq{SELECT idempotency_key FROM durable_step($h1, $hf1, 'charge', 'unsafe',
	(SELECT jsonb_build_object('amount', payload -> 'amount') FROM durable.tasks WHERE task_id = $h1))});
$hung->query_safe("SELECT durable_step_start($h1, $hf1, 'charge', 1)");
$hung->query(qq{SELECT payments.charge('$h1_key', (SELECT (payload ->> 'amount')::int FROM durable.tasks
	WHERE task_id = $h1), $P)});

# the incident develops: orders of the partition end in review, charged or
# not, and refused ones fail (one attempt each)
ok($node->poll_query_until('postgres', q{
	SELECT count(*) FILTER (WHERE l.idempotency_key IS NOT NULL) > 0
	       AND count(*) FILTER (WHERE l.idempotency_key IS NULL) > 0
	       AND EXISTS (SELECT FROM durable.tasks WHERE queue_name = 'payments' AND state = 'failed')
	FROM durable.tasks t JOIN durable.steps s USING (partition_key, task_id)
	LEFT JOIN payments.ledger l ON l.idempotency_key = s.idempotency_key
	WHERE t.queue_name = 'payments' AND t.state = 'needs_review'}),
	'orders of the failing region are in review, some charged, some not, and refused ones failed');

#
# 1. Find the failing partition and pause it, not the queue.
#
is(sql(q{SELECT string_agg(DISTINCT partition_key::text, ',') FROM durable.tasks
         WHERE queue_name = 'payments' AND state IN ('waiting', 'needs_review', 'failed')}),
	$P, "the orders in trouble are all of partition $P");
sql("SELECT durable_pause('payments', partition => $P)");
my $paused_at = sql('SELECT clock_timestamp()');
is(sql(q{SELECT paused || ' ' || paused_partitions::text FROM durable.queue_stats WHERE queue_name = 'payments'}),
	"false {$P}", 'the partition is paused, the queue is not');

# new orders keep coming, into every partition; those of the paused one wait
sql(q{
	SELECT count(durable_enqueue('payments', jsonb_build_object('order', n, 'amount', 100 + n),
	                             idempotency_key => 'order-' || n))
	FROM generate_series(1001, 1040) n;
});
$ORDERS += 40;
ok($node->poll_query_until('postgres', qq{
	SELECT count(*) = 0 FROM durable.live_tasks WHERE queue_name = 'payments' AND partition_key <> $P}),
	'the other partitions keep running: all their orders, new ones too, are done');
ok($node->poll_query_until('postgres', qq{
	SELECT count(*) = 0 FROM durable.live_tasks
	WHERE queue_name = 'payments' AND partition_key = $P AND state = 'running'
	  AND task_id NOT IN ($h1, $h2)}),
	'in the paused partition only the hung workers still hold orders');
cmp_ok(sql(qq{SELECT count(*) FROM durable.live_tasks WHERE queue_name = 'payments'
              AND partition_key = $P AND state = 'ready' AND created_at > '$paused_at'}), '>', 0,
	'new orders of the paused partition wait');

#
# 2. Snapshot: the recovery package of every unfinished task of the
#    partition, kept before anything is decided.
#
sql(qq{
	CREATE TABLE incident_4711 AS
	SELECT task_id, state, durable_recovery_package(task_id) AS package
	FROM durable.tasks WHERE queue_name = 'payments' AND partition_key = $P
	  AND state NOT IN ('completed', 'failed', 'cancelled');
});
is(sql(q{SELECT count(*) FROM incident_4711}),
	sql(qq{SELECT count(*) FROM durable.live_tasks WHERE queue_name = 'payments' AND partition_key = $P}),
	'the snapshot has every unfinished task of the partition');
my $in_doubt = sql(qq{SELECT count(*) FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id)
                      WHERE t.queue_name = 'payments' AND t.partition_key = $P AND s.state IN ('started', 'unknown')});
cmp_ok($in_doubt, '>=', 3, "steps in doubt in the partition ($in_doubt)");
is(sql(qq{SELECT count(*) FROM incident_4711 i
          JOIN durable.steps s ON s.task_id = i.task_id AND s.state IN ('started', 'unknown')
          WHERE i.package -> 'unknown_side_effects' -> 0 ->> 'step' = 'charge'
            AND i.package -> 'unknown_side_effects' -> 0 ->> 'idempotency_key' = s.idempotency_key
            AND jsonb_array_length(i.package -> 'unknown_side_effects') = 1}),
	$in_doubt, 'each package names its step in doubt and the key its operation is known by');
is(sql(qq{SELECT count(*) FROM incident_4711 WHERE task_id = $h1
          AND package -> 'unknown_side_effects' -> 0 ->> 'idempotency_key' = '$h1_key'}), '1',
	"the hung worker's charge is among them");
is(sql(q{SELECT count(*) FROM incident_4711 WHERE state = 'needs_review'
           AND package -> 'recommended_action' ->> 'action' <> 'resolve'}), '0',
	'each task in review is to be resolved');
# the charges already confirmed name their effect ids
is(sql(qq{SELECT count(*) FROM durable.tasks t, durable_recovery_package(t.task_id) p,
                 jsonb_array_elements(p -> 'confirmed_side_effects') e
          JOIN payments.ledger l ON l.effect_id = e ->> 'effect_id'
          WHERE t.queue_name = 'payments' AND t.state = 'completed'}),
	sql(q{SELECT count(*) FROM durable.tasks WHERE queue_name = 'payments' AND state = 'completed'}),
	"every completed order's package names the effect id the provider recorded");

#
# 3. Fence off the old leases.  hung-2 holds an order with no step in
#    doubt: a quarantine ends its lease at once.  hung-1's charge is in
#    doubt, so nothing may take its lease but its running out: once it has,
#    a tick settles it (the reconciler's, or the operator's own).
#
my $reason = "INC-4711: payments 500 in region $P";
sql("SELECT durable_quarantine($h2, '$reason')");
ok($node->poll_query_until('postgres', qq{
	SELECT state <> 'running' OR lease_until < now() FROM durable.live_tasks WHERE task_id = $h1}),
	"hung-1's lease has run out");
sql('SELECT count(*) FROM durable_reconcile()');
is(sql("SELECT state || ' ' || (fence > $hf1) FROM durable.tasks WHERE task_id = $h1"), 'needs_review true',
	"hung-1's order is in review under a new fence");
# the hung workers wake up: every write of theirs is refused
my ($rc, $out, $err) = $node->psql('postgres',
	"SELECT durable_record_receipt($h1, $hf1, 'charge', 'succeeded', 'ch_late', '{}')");
like($err, qr/fencing token \d+ is stale/, "hung-1's late receipt is refused (55U01)");
($rc, $out, $err) = $node->psql('postgres', "SELECT * FROM durable_step($h2, $hf2, 'charge', 'unsafe')");
like($err, qr/fencing token \d+ is stale/, "hung-2's late step is refused (55U01)");
eval { $hung->quit };

#
# 4. Reconcile by effect id: ask the provider about each step in doubt (by
#    its idempotency key, from the snapshot) and record what it says.
#
my %marks;
for my $row (split /\n/, sql(q{
	SELECT i.task_id || '|' || (u ->> 'step') || '|' || coalesce(l.effect_id, '')
	FROM incident_4711 i, jsonb_array_elements(i.package -> 'unknown_side_effects') u
	LEFT JOIN payments.ledger l ON l.idempotency_key = u ->> 'idempotency_key'
	ORDER BY i.task_id}))
{
	my ($task, $step, $effect) = split /\|/, $row, -1;
	if ($effect ne '')
	{
		sql(qq{SELECT durable_resolve($task, 'mark_committed', 'alice',
			'{"effect_id": "$effect", "source": "payments ledger", "incident": "INC-4711"}', step => '$step')});
		$marks{committed}++;
	}
	else
	{
		sql(qq{SELECT durable_resolve($task, 'mark_not_executed', 'alice',
			'{"searched": "payments ledger by idempotency key", "found": null, "incident": "INC-4711"}', step => '$step')});
		$marks{not_executed}++;
	}
}
ok($marks{committed} && $marks{not_executed},
	'steps in doubt resolved: ' . ($marks{committed} // 0) . ' charged, ' . ($marks{not_executed} // 0) . ' not');
is(($marks{committed} // 0) + ($marks{not_executed} // 0), $in_doubt, 'every step in doubt was decided');
is(sql(qq{SELECT count(*) FROM durable.tasks WHERE queue_name = 'payments' AND partition_key = $P
          AND state IN ('needs_review', 'running')}), '0', 'nothing of the partition is in review or running');
is(sql(qq{SELECT count(*) FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id)
          JOIN payments.ledger l ON l.idempotency_key = s.idempotency_key
          WHERE t.queue_name = 'payments' AND t.partition_key = $P AND t.state <> 'completed'
            AND s.state <> 'committed'}), '0', 'every charge the provider made is committed');

#
# 5. Quarantine what cannot go on before the fix, with the incident's
#    reason: every ready or waiting order of the partition.
#
my $quarantined = sql(qq{
	SELECT count(durable_quarantine(task_id, '$reason')) FROM durable.tasks
	WHERE queue_name = 'payments' AND partition_key = $P AND state IN ('ready', 'waiting')});
cmp_ok($quarantined, '>', 0, "$quarantined orders quarantined");
is(sql(qq{SELECT count(*) FROM durable.live_tasks WHERE queue_name = 'payments'}), '0',
	'nothing unfinished is left: the partition is in the dead letters');
is(sql(qq{SELECT count(*) FROM durable.dead_letters WHERE queue_name = 'payments' AND reason = '$reason'}),
	$quarantined + 1, 'the dead letters of the incident: the quarantined orders, hung-2 with them');
is(sql(q{SELECT count(*) FROM durable.dead_letters WHERE queue_name = 'payments'
         AND reason NOT IN ('attempts_exhausted') AND reason NOT LIKE 'INC-4711:%'}), '0',
	'the others are orders whose 500 used up their attempt');
is(sql(q{SELECT bool_and(replayable) FROM durable.dead_letters WHERE queue_name = 'payments'}), 't',
	'every dead letter can be replayed');

#
# 6. The provider is fixed.  Replay in small batches, by reason.
#
sql('DELETE FROM payments.outage');
my (@batches, %replayed);
for my $why ($reason, 'attempts_exhausted')
{
	for my $round (1 .. 100)
	{
		my $n = sql(qq{SELECT count(*) FROM durable_replay_dead_letters('payments', 5,
			partition => $P, reason => '$why')});
		last if $n == 0;
		push @batches, $n;
		$replayed{$why} += $n;
	}
}
is($replayed{$reason}, $quarantined + 1, 'the quarantined orders were replayed by their reason');
cmp_ok($replayed{attempts_exhausted} // 0, '>', 0, 'and the failed ones by theirs');
is(sql(q{SELECT count(*) FROM durable.dead_letters WHERE queue_name = 'payments'}), '0',
	'every dead letter was replayed');
ok(!grep({ $_ > 5 } @batches), 'in batches of 5 at most (' . join(' ', @batches) . ')');
is(sql(qq{SELECT count(*) FROM durable.live_tasks WHERE queue_name = 'payments' AND partition_key = $P
          AND state <> 'ready'}), '0', 'the replayed orders wait in the paused partition');

#
# 7. Resume the partition: the workers finish it.
#
my $resuming_at = sql('SELECT clock_timestamp()');
sql("SELECT durable_resume('payments', partition => $P)");
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM durable.live_tasks WHERE queue_name = 'payments'}),
	'after the resume the workers finish every order');
sql('UPDATE control SET stop = true');
$_->quit for @loops;

#
# The outcome.
#
is(sql(q{SELECT count(*) FROM durable.tasks WHERE queue_name = 'payments' AND state = 'completed'}),
	$ORDERS, "all $ORDERS orders completed");
is(sql(q{SELECT count(*) FROM durable.tasks t WHERE queue_name = 'payments'
           AND (SELECT count(*) FROM durable.events e WHERE e.partition_key = t.partition_key
                AND e.task_id = t.task_id AND e.kind = 'completed') <> 1}), '0',
	'each exactly once (one completed event each)');
is(sql(q{SELECT count(*) || ' ' || count(DISTINCT task_id) FROM done}), "$ORDERS $ORDERS",
	"each order's completion recorded once by the workers");
is(sql(q{SELECT count(*) - count(DISTINCT idempotency_key) FROM payments.ledger}), '0',
	'duplicate side effects: 0 (no charge was made twice)');
is(sql(q{SELECT count(*) FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id)
         JOIN payments.ledger l ON l.idempotency_key = s.idempotency_key
         WHERE t.queue_name = 'payments' AND s.step = 'charge' AND s.state = 'committed'}),
	$ORDERS, 'each order charged exactly once, its charge committed');
is(sql(qq{SELECT count(*) FROM claims WHERE partition_key = $P
          AND before_claim > '$paused_at' AND after_claim < '$resuming_at'}), '0',
	'no claim made while the partition was paused took from it');
cmp_ok(sql(qq{SELECT count(*) FROM claims WHERE partition_key = $P AND before_claim > '$resuming_at'}),
	'>', 0, 'after the resume the workers took from it');

# the timeline names who did what
is(sql(q{SELECT count(*) FROM durable.events WHERE kind = 'quarantined' AND actor = current_user
           AND detail ->> 'reason' LIKE 'INC-4711:%'}), $quarantined + 1,
	'each quarantine is an event naming the operator and the reason');
is(sql(q{SELECT count(*) FROM durable.events WHERE kind = 'resolved' AND actor = 'alice'
           AND detail -> 'evidence' ->> 'incident' = 'INC-4711'}), $in_doubt,
	'each decision is an event naming the operator and the evidence');
is(sql(q{SELECT count(*) FROM durable.events WHERE kind = 'replayed' AND actor = current_user}),
	sql(q{SELECT sum(n) FROM unnest(ARRAY[} . join(',', @batches) . q{]) n}),
	'each replay is an event naming the operator');
is(sql(q{SELECT string_agg(kind || ' ' || partition_key || ' ' || (role = current_user), ', ' ORDER BY at)
	FROM durable.queue_log WHERE queue_name = 'payments'}),
	"paused $P true, resumed $P true", 'the pause and the resume are in durable.queue_log, naming the operator');
is(sql('SELECT count(*) FROM durable_verify()'), '0', 'durable_verify() reports nothing');

# A recovery package reads its task in one snapshot: a task that moves on
# while the package is made (here: quarantined by another session while
# the package waits for a lock after reading the task) is described as the
# package read it, its action too.  The action used to be read in a
# snapshot of its own, which found the task no longer running (55U04: the
# package failed when a lease ran out while it was made).
sql(q{SELECT durable_create_queue('packaged', lease => '1 hour')});
my $moving = sql(q{SELECT durable_enqueue('packaged', '{}')});
sql(q{SELECT fence FROM durable_claim('packaged', 'w') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun});
my $locker = $node->background_psql('postgres', on_error_stop => 0);
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE durable.workers IN ACCESS EXCLUSIVE MODE');
my $reader = $node->background_psql('postgres', on_error_stop => 0);
$reader->query_until(qr/reading/, qq{\\echo reading
SELECT 'package: ' || (p -> 'task' ->> 'state') || ' ' || (p -> 'recommended_action' ->> 'action')
FROM durable_recovery_package($moving) p;
});
ok($node->poll_query_until('postgres', q{
	SELECT EXISTS (SELECT FROM pg_locks WHERE relation = 'durable.workers'::regclass AND NOT granted)}),
	'the package waits for the lock after reading its task');
$locker->query_safe("SELECT durable_quarantine($moving, 'moved on while the package was made')");
$locker->query_safe('COMMIT');
my $package = $reader->query('SELECT 1');
like($package, qr/package: running wait/,
	'the package says what it read: the task running, its action to wait');
unlike($reader->{stderr}, qr/ERROR/, 'the package did not fail as the task moved on');
is(sql("SELECT state FROM durable.tasks WHERE task_id = $moving"), 'failed', 'the task did move on');
$locker->quit;
$reader->quit;

$node->stop;
done_testing();
