# Queue operators (docs/security.md, "Operators of some queues"): a member
# of durable_queue_operator sees in durable's views the rows of the open
# queues and of the restricted ones it holds a grant of, and acts on the
# tasks of those it may work on; nothing else, whatever it asks.
#
# Random rounds: queues open or restricted, the role's grant on each drawn
# from none, enqueue, work and all, and in each queue a ready task, a
# running one with a step and a dead letter.  An independent model (the
# draws) says which queues it must see and where it may act; every view it
# may read is compared with it, a leaky function of the role's own sees
# nothing more, and every operator call is made on every queue.  The seed
# is printed: DURABLE_SEED=<n> replays a run.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;

my $seed = $ENV{DURABLE_SEED} // (time() ^ $$);
srand($seed);
note("seed $seed (DURABLE_SEED=$seed replays it)");

my $node = DurableNode::new_node('queue_operators');
$node->safe_psql('postgres', q{
	CREATE ROLE qop LOGIN IN ROLE durable_queue_operator;
	CREATE ROLE tenant LOGIN IN ROLE durable_producer, durable_worker;
	CREATE ROLE both_ops LOGIN IN ROLE durable_queue_operator, durable_operator;
	-- the role's own function: whatever it is given, it tells
	CREATE FUNCTION public.leak(text, text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001
	AS $$ BEGIN RAISE NOTICE 'leak %: %', $1, $2; RETURN true; END $$;
	GRANT EXECUTE ON FUNCTION public.leak(text, text) TO PUBLIC;
});

# as a role: (ok, stdout, sqlstate of the error or '')
sub as_role
{
	my ($role, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY sqlstate\nSET ROLE $role;\n$sql");
	my ($state) = $err =~ /ERROR:\s+([0-9A-Z]{5})/;
	return ($ret == 0, $out, $state // '', $err);
}

sub set_of { return join(',', sort @_) }

my @kinds = ('open', 'none', 'enqueue', 'work', 'all');
my %all_queues;    # every queue of every round: its kind
for my $round (1 .. 4)
{
	my %kind;
	my %tasks;    # queue => {ready, running, dead}
	for my $i (1 .. 5)
	{
		my $q = "r${round}_q$i";
		$kind{$q} = $kinds[ int(rand(@kinds)) ];
		$all_queues{$q} = $kind{$q};
		$node->safe_psql('postgres', qq{
			SELECT durable_create_queue('$q', max_attempts => 1, lease => '1 hour');
		});
		if ($kind{$q} ne 'open')
		{
			$node->safe_psql('postgres', "SELECT durable_grant_queue('$q', 'tenant', 'all')");
			$node->safe_psql('postgres', "SELECT durable_grant_queue('$q', 'qop', '$kind{$q}')")
			  if $kind{$q} ne 'none';
		}
		my @ids = split /\n/, $node->safe_psql('postgres', qq{
			SELECT durable_enqueue('$q', jsonb_build_object('queue', '$q', 'n', n))
			FROM generate_series(1, 3) n ORDER BY 1});
		$tasks{$q} = {};
		# the first claimed is failed for good, the second keeps running with a step
		my ($dead, $dead_fence) = split /\|/, $node->safe_psql('postgres',
			"SELECT task_id, fence FROM durable_claim('$q', 'setup') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun");
		$node->safe_psql('postgres', "SELECT durable_fail($dead, $dead_fence, 'permanent')");
		my ($running, $fence) = split /\|/, $node->safe_psql('postgres',
			"SELECT task_id, fence FROM durable_claim('$q', 'setup') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun");
		$node->safe_psql('postgres',
			"SELECT durable_step($running, $fence, 'charge', 'idempotent', '{\"cents\": 5}')");
		my ($ready) = grep { $_ ne $dead && $_ ne $running } @ids;
		$tasks{$q} = { ready => $ready, running => $running, dead => $dead };
	}

	my @queues = sort keys %kind;
	my @readable = grep { $kind{$_} ne 'none' } @queues;
	my @workable = grep { $kind{$_} =~ /^(open|work|all)$/ } @queues;
	my %readable = map { $_ => 1 } @readable;
	my $in_round = "LIKE 'r${round}\\_%'";
	note("round $round: " . join(' ', map { "$_=$kind{$_}" } @queues));

	# every view that shows a queue's rows: the queues the model says
	my %views = (
		'durable.tasks' => [ "SELECT DISTINCT queue_name FROM durable.tasks WHERE queue_name $in_round", \@readable ],
		'durable.unfinished_tasks' => [ "SELECT DISTINCT queue_name FROM durable.unfinished_tasks WHERE queue_name $in_round", \@readable ],
		'durable.finished_tasks' => [ "SELECT DISTINCT queue_name FROM durable.finished_tasks WHERE queue_name $in_round", \@readable ],
		'durable.dead_letters' => [ "SELECT DISTINCT queue_name FROM durable.dead_letters WHERE queue_name $in_round", \@readable ],
		'durable.queue_gauges' => [ "SELECT queue_name FROM durable.queue_gauges WHERE queue_name $in_round", \@readable ],
		'durable.queue_settings' => [ "SELECT queue_name FROM durable.queue_settings WHERE queue_name $in_round", \@readable ],
		'durable.steps' => [ "SELECT DISTINCT t.queue_name FROM durable.steps s JOIN durable.tasks t USING (partition_key, task_id) WHERE t.queue_name $in_round", \@readable ],
	);
	my @every_id = map { values %{ $tasks{$_} } } @queues;
	my $ids = join(',', @every_id);
	for my $view (sort keys %views)
	{
		my ($ok, $out, $state, $err) = as_role('qop', $views{$view}[0]);
		ok($ok, "round $round: qop reads $view") or diag($err);
		is(set_of(split /\n/, $out), set_of(@{ $views{$view}[1] }),
			"round $round: $view shows qop the queues it may see");
	}
	# pages of history's ids (durable.finished_task_ids, dead_letter_ids):
	# its queue's dead letter where it may see the queue, nothing elsewhere
	for my $q (@queues)
	{
		my $keys = $node->safe_psql('postgres',
			"SELECT partition_keys FROM durable.queue_settings WHERE queue_name = '$q'");
		my ($ok, $out, $state, $err) = as_role('qop',
			"SELECT string_agg(id::text, ',') FROM durable.finished_task_ids('$q', '$keys', NULL, NULL, NULL, 100) id");
		ok($ok, "round $round: qop asks for the finished ids of $q") or diag($err);
		is($out, $readable{$q} ? $tasks{$q}{dead} : '',
			"round $round: the finished ids of $q ($kind{$q}) as the model says");
		($ok, $out) = as_role('qop',
			"SELECT count(*) FROM durable.finished_task_ids('$q', '$keys', '{completed}', NULL, NULL, 100)");
		is($out, '0', "round $round: and none completed");
		($ok, $out) = as_role('qop',
			"SELECT string_agg(id::text, ',') FROM durable.dead_letter_ids('$q', '$keys', NULL, NULL, 100) id");
		is($out, $readable{$q} ? $tasks{$q}{dead} : '',
			"round $round: the dead letters of $q ($kind{$q}) as the model says");
	}

	# rows that carry no queue: by their tasks' ids
	for my $view ('durable.steps', 'durable.events')
	{
		my ($ok, $out) = as_role('qop', "SELECT DISTINCT task_id FROM $view WHERE task_id IN ($ids)");
		my @expected = $view eq 'durable.steps'
		  ? map { $tasks{$_}{running} } @readable
		  : map { values %{ $tasks{$_} } } @readable;
		is(set_of(split /\n/, $out), set_of(@expected), "round $round: $view by task id, the same");
	}

	# a function of the reader's own sees no row of a queue out of scope
	my ($ok, $out, $state, $err) = as_role('qop',
		"SELECT count(*) FROM durable.tasks WHERE public.leak(queue_name, payload::text) AND queue_name $in_round");
	my %leaked = map { $_ => 1 } $err =~ /leak (\S+):/g;
	is(set_of(grep { !$readable{$_} } keys %leaked), '',
		"round $round: a leaky function in the query is shown no row out of scope");
	($ok, $out, $state, $err) = as_role('qop',
		"SELECT count(*) FROM durable.events e WHERE public.leak(e.task_id::text, e.kind) AND e.task_id IN ($ids)");
	my %scoped_ids = map { my $q = $_; map { $_ => 1 } values %{ $tasks{$q} } } @readable;
	is(set_of(grep { !$scoped_ids{$_} } ($err =~ /leak (\d+):/g)), '',
		"round $round: nor of durable.events");

	# an operator of every queue sees them all
	($ok, $out) = as_role('both_ops', "SELECT DISTINCT queue_name FROM durable.tasks WHERE queue_name $in_round");
	is(set_of(split /\n/, $out), set_of(@queues),
		"round $round: a member of durable_operator too sees every queue");

	# the calls: allowed where the model says, else 42501 (a read: not found)
	for my $q (@queues)
	{
		my $t = $tasks{$q};
		my $may = grep { $_ eq $q } @workable;
		my %calls = (
			package => "SELECT durable_recovery_package($t->{running}) IS NOT NULL",
			quarantine => "SELECT durable_quarantine($t->{ready}, 'model')",
			replay => "SELECT action FROM durable_replay_dead_letters(ARRAY[$t->{dead}]::bigint[])",
			pause => "SELECT durable_pause('$q'); SELECT durable_resume('$q')",
			expire => "SELECT durable_expire_lease($t->{running}, 'model')",
			replay_queue => "SELECT count(*) FROM durable_replay_dead_letters('$q', 10)",
		);
		for my $call (sort keys %calls)
		{
			my ($ok, $out, $state, $err) = as_role('qop', $calls{$call});
			if ($call eq 'package')
			{
				if ($readable{$q}) { ok($ok, "round $round: qop reads the package of a task of $q ($kind{$q})") or diag($err) }
				else { is($state, '42704', "round $round: a task of $q ($kind{$q}) is unknown to qop's package") }
			}
			elsif ($may)
			{
				ok($ok, "round $round: qop may $call in $q ($kind{$q})") or diag($err);
			}
			else
			{
				is($state, '42501', "round $round: qop may not $call in $q ($kind{$q})");
			}
		}
		# what was refused changed nothing
		my $states = $node->safe_psql('postgres',
			"SELECT string_agg(state::text, ',' ORDER BY task_id) FROM durable.tasks WHERE queue_name = '$q'");
		my $expected = $may ? undef : join(',', map { $_->[1] } sort { $a->[0] <=> $b->[0] }
			([ $t->{ready}, 'ready' ], [ $t->{running}, 'running' ], [ $t->{dead}, 'failed' ]));
		is($states, $expected, "round $round: the refused calls left $q as it was") unless $may;
	}

	# a task that does not exist: 42501 while some restricted queue is out
	# of qop's reach (or the answer would tell which ids exist there)
	my $some_out = grep { $_ !~ /^(open|work|all)$/ } values %all_queues;
	($ok, $out, $state) = as_role('qop', "SELECT durable_cancel(1, 'model')");
	is($state, $some_out ? '42501' : '42704', "round $round: a task that does not exist");
}

is($node->safe_psql('postgres', 'SELECT count(*) FROM durable_verify()'), '0', 'durable_verify() finds nothing');
done_testing();
