# Workflows that wait, explored: random sequences of sleeps, awaits, emits,
# spawns, joins, replays, commits, cancels and claims by several workers,
# each answer and the state of every task checked against a model of
# docs/design.md section 12 written here, apart from the code.
#
# The model keeps each task's state, fence and named waits, the events
# emitted and when, and decides from the server's own clock (now() of each
# call, read in the same statement) what every call must answer: a sleep
# has elapsed once its time has come; an await receives the event if it
# was emitted before its deadline, and times out otherwise, for ever; a join
# is done once its children have finished; a spawn is done once per name;
# the same name with other arguments is 55U03, a stale fence 55U01, a wait
# with nothing held 55U01; a waiting task is handed out only once its wait
# may end; cancelling a parent cancels its unfinished children, except one
# with a step in doubt, which goes to review (and one in review stays).
#
# Flow control draws its own operations (docs/design.md section 16): a fair
# queue f, whose keys t1 (weight 2), t2, t3 and none enqueue, and whose
# every claim must take a task of the lowest pass among its ready tasks,
# each pass computed here from the contract (the key's last ready pass, or
# the queue's lowest when the key has none, or 0, plus 1 / weight; the
# server's passes are compared after every operation); debounce and
# throttle calls into queue m, whose answers (the key's task again, or a
# new one) and due times the model decides, and which the claims of m then
# respect as any due time; and tasks of queue r that name rate limits,
# whose claims the model decides from the contract's GCRA kept here (which
# tasks each claim takes, in claim order, and the time each task it
# defers is due), and whose units taken are checked against every window
# between two claims: never more than burst + rate * window / per.
#
# Spend budgets draw their own too (docs/design.md section 17): tasks of
# queue sb name budgets sb_a and sb_b; their steps reserve from them
# (refused with 55U05 exactly when one has less left than the reserve),
# and settle by a commit with what they spent or without a figure, a
# failure, a not_executed receipt, a receipt after going unknown, or a
# lost lease (recovery returns an idempotent step's reservation, keeps an
# unsafe one's); after every operation each budget's reserved and spent
# must be the model's, nothing is ever past its amount, and the
# reservations the server holds are the model's, so that a step retried
# never counts twice.
#
# Events belong to a queue: two applications, each with a queue restricted
# to its role (a, b), and the open queue m emit and await the same event
# names; an emit or an await into a queue whose grant the role lacks is
# 42501, and one queue's event never answers another's await.  Workers
# start steps (in doubt until committed): a wait that would park is then
# 55U04, as is a commit of the task.  After each operation every task's
# state and fence are compared, and durable_verify() must be empty.  The events are queue m's, which every await names.
#
# Environment: WAITS_MODEL_SEED (random by default), WAITS_MODEL_OPS (400),
# WAITS_MODEL_SEQUENCES (3); WAITS_MODEL_SERVER=host:port:user runs it
# against a server of one's own (tools/citus: a cluster's coordinator,
# whose reconcilers are off meanwhile) instead of a new one.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use List::Util qw(min max sum0);
use POSIX qw(floor ceil);
use Time::HiRes qw(sleep);
use DurableNode;

BEGIN
{
	if (!eval { require DBI; require DBD::Pg; 1 })
	{
		Test::More::plan(skip_all => 'DBD::Pg is not installed (Debian: libdbd-pg-perl)');
	}
}

my $SEED = length($ENV{WAITS_MODEL_SEED} // '') ? $ENV{WAITS_MODEL_SEED} : int(rand(2**31));
my $NOPS = $ENV{WAITS_MODEL_OPS} || 400;
my $NSEQ = $ENV{WAITS_MODEL_SEQUENCES} || 3;

# no reconciler: leases are long, and nothing but the calls moves a task
my ($node, $host, $port, $user) = (undef, undef, undef, '');
if ($ENV{WAITS_MODEL_SERVER})
{
	($host, $port, $user) = split /:/, $ENV{WAITS_MODEL_SERVER};
}
else
{
	$node = DurableNode::new_node('waits_model', 'durable.reconciler_enabled = off');
	($host, $port) = ($node->host, $node->port);
}
my $dbh = DBI->connect("dbi:Pg:dbname=postgres;host=$host;port=$port",
	$user, '', { AutoCommit => 1, RaiseError => 0, PrintError => 0, PrintWarn => 0 })
  or die 'cannot connect';
$dbh->do("SET client_min_messages = 'error'");

# one call: (row hash or undef, SQLSTATE or undef)
sub call
{
	my ($sql, @binds) = @_;
	my $rows = $dbh->selectall_arrayref($sql, { Slice => {} }, @binds);
	return (undef, $dbh->state) unless $rows;
	return ($rows->[0], undef);
}

# the same, as a role ('' for the superuser the test connects as)
sub call_as
{
	my ($role, $sql, @binds) = @_;
	$dbh->do("SET ROLE $role") if $role;
	my @r = call($sql, @binds);
	$dbh->do('RESET ROLE') if $role;
	return @r;
}

# each application's queue is restricted to its role; m and k are open
my %OWNER = (m => '', k => '', a => 'app_a', b => 'app_b');
sub may
{
	my ($role, $queue) = @_;
	return $role eq '' || $OWNER{$queue} eq '' || $OWNER{$queue} eq $role;
}

sub micros
{
	my ($ts) = @_;
	my ($r) = call('SELECT (extract(epoch FROM ?::timestamptz) * 1000000)::bigint AS us', $ts);
	return $r->{us};
}

my %EVENTS = map { $_ => 1 } qw(e1 e2 e3 e4);
my @PAYLOADS = ('{"v": 1}', '{"v": 2}');
my $INF = 9**18;

my (%T, %E, @trace, @problems, $M_rand, %outcomes);

# flow control: the weights of queue f's keys, the debounce and throttle
# keys of queue m (the task of each and its first call)
my %WEIGHT = (t1 => 2);
my (%DEBOUNCED, %THROTTLED);

# the rate limits of queue r's tasks (whole microseconds per unit), each
# bucket's state (tat, booked) and the units its claims took, when
my %LIMIT = (
	rl_fast => { rate => 4, per_us => 1_000_000, burst => 2 },
	rl_tenant => { rate => 1, per_us => 400_000, burst => 1 });
my (%BUCKET, %TAKEN);

# spend budgets: each one's amount, what is reserved and spent; queue sb's
# tasks (held or not, the budgets they name) and their steps' reservations
my %BUDGET_AMOUNT = (sb_a => 100, sb_b => 60);
my (%BUDGET, %SB);

my @RATE_USES = ({}, { rl_fast => 1 }, { rl_fast => 2 }, { 'rl_tenant:a' => 1 },
	{ 'rl_tenant:b' => 1 }, { rl_fast => 1, 'rl_tenant:a' => 1 });

sub r { return int($M_rand->() * $_[0]) }
sub pick { my @l = @_; return $l[ r(scalar @l) ] }

sub problem
{
	my ($msg) = @_;
	push @problems, "$msg\n  after: " . join("\n         ", @trace[ ($#trace > 12 ? $#trace - 12 : 0) .. $#trace ]);
}

# the time from which a waiting task may be handed out (INF: not yet)
sub run_at
{
	my ($t) = @_;
	return $t->{run_at} // 0 if $t->{state} eq 'ready';
	return $INF unless $t->{state} eq 'waiting';
	my $w = $t->{waits}{ $t->{parked} };
	return $w->{woken} if defined $w->{woken};
	return $w->{until} // $INF;
}

# a wait that ends the lease: fence + 1, WAITING
sub park
{
	my ($t, $name) = @_;
	$t->{state} = 'waiting';
	$t->{fence}++;
	$t->{parked} = $name;
	delete $t->{waits}{$name}{woken};
}

sub finished { return $_[0]{state} =~ /^(completed|failed|cancelled)$/ }

# a child finished: its parent wakes when its join's children all have
sub child_finished
{
	my ($t, $now) = @_;
	my $p = $T{ $t->{parent} // '' } or return;
	return unless $p->{state} eq 'waiting';
	my $j = $p->{waits}{ $p->{parked} };
	return unless $j->{kind} eq 'join' && !defined $j->{woken};
	return if grep { !finished($T{$_}) } children_of($p);
	$j->{woken} = $now;
}

# every child a task spawned (a join of the model names none: all of them)
sub children_of
{
	my ($p) = @_;
	return map { $p->{waits}{$_}{child} } grep { $p->{waits}{$_}{kind} eq 'spawn' } sort keys %{ $p->{waits} };
}

# a task cancelled; its unfinished children with it, but for one with a
# step in doubt, which goes to review (a cascade decides nothing about an
# effect nobody knows), and one in review, which stays there
sub cancel_model
{
	my ($t, $now) = @_;
	$t->{fence}++ if $t->{state} eq 'running';
	$t->{state} = 'cancelled';
	$t->{doubt} = {};
	for my $w (values %{ $t->{waits} })
	{
		next unless $w->{kind} eq 'spawn';
		my $c = $T{ $w->{child} };
		next if finished($c) || $c->{state} eq 'needs_review';
		if (%{ $c->{doubt} })
		{
			$c->{fence}++ if $c->{state} eq 'running';
			$c->{state} = 'needs_review';
			$outcomes{'child to review'}++;
			next;
		}
		cancel_model($c, $now);
	}
	child_finished($t, $now);
}

# a task held by a worker: its id and fence
sub held { return grep { $T{$_}{state} eq 'running' } sort keys %T }

# GCRA: whether units of limit $l taken at $now conform to the state
# $tat, and the state after them, or the first time they will conform
sub gcra
{
	my ($l, $tat, $now, $units) = @_;
	my $emission = $l->{per_us} / $l->{rate};
	my $start = max($tat, $now);
	my $slack = floor(($l->{burst} - min($units, $l->{burst})) * $emission);
	return (1, $start + ceil($units * $emission)) if $start - $now <= $slack;
	return (0, $start - $slack);
}

# a claim of r at $now for $wanted tasks: the tasks taken, and the time
# each one deferred is due; the buckets as the claim leaves them
sub rate_claim_model
{
	my ($now, $wanted) = @_;
	my (@taken, %deferred);
	my $again = 1;
	while ($again && @taken < $wanted)
	{
		my %took = map { $_ => 1 } @taken;
		my @ready = sort { $T{$a}{run_at} <=> $T{$b}{run_at} || $a <=> $b }
		  grep { $T{$_}{queue} eq 'r' && $T{$_}{state} eq 'ready' && $T{$_}{run_at} <= $now && !$took{$_} } keys %T;
		last unless @ready;
		splice(@ready, $wanted - @taken) if @ready > $wanted - @taken;
		my $ndeferred = 0;
		for my $id (@ready)
		{
			my $uses = $T{$id}{limits};
			my (%next, $until);
			for my $name (keys %$uses)
			{
				my $l = $LIMIT{ (split /:/, $name)[0] };
				my $b = $BUCKET{$name} //= { tat => $now, booked => $now };
				my ($ok, $t) = gcra($l, $b->{tat}, $now, $uses->{$name});
				$next{$name} = $ok ? $t : undef;
			}
			if (!grep { !defined $next{$_} } keys %next)
			{
				$BUCKET{$_}{tat} = $next{$_} for keys %next;
				push @{ $TAKEN{$_} }, [ $now, $uses->{$_} ] for keys %next;
				push @taken, $id;
				next;
			}
			# the limits without room book the task's units after those
			# deferred before it, and it is due when the last fits
			for my $name (grep { !defined $next{$_} } keys %next)
			{
				my ($l, $b) = ($LIMIT{ (split /:/, $name)[0] }, $BUCKET{$name});
				my $after = max($b->{tat}, $b->{booked});
				my (undef, $due) = gcra($l, $after, $now, $uses->{$name});
				(undef, $b->{booked}) = gcra($l, $after, $due, $uses->{$name});
				$until = max($until // $due, $due);
			}
			$T{$id}{run_at} = $until;
			$deferred{$id} = $until;
			$ndeferred++;
		}
		$again = $ndeferred > 0;
	}
	return (\@taken, \%deferred);
}

# no window between two claims that took units of a bucket holds more
# than burst + rate * window / per of them
sub check_windows
{
	for my $name (sort keys %TAKEN)
	{
		my $l = $LIMIT{ (split /:/, $name)[0] };
		my @takes = sort { $a->[0] <=> $b->[0] } @{ $TAKEN{$name} };
		for my $i (0 .. $#takes)
		{
			my $units = 0;
			for my $j ($i .. $#takes)
			{
				$units += $takes[$j][1];
				my $most = $l->{burst} + ($takes[$j][0] - $takes[$i][0]) * $l->{rate} / $l->{per_us};
				return problem("$units units of $name taken between $takes[$i][0] and $takes[$j][0], at most $most allowed")
				  if $units > $most;
			}
		}
	}
}

sub expect
{
	my ($what, $got, $want) = @_;
	problem("$what: got " . ($got // 'NULL') . ', want ' . ($want // 'NULL'))
	  unless ($got // 'NULL') eq ($want // 'NULL');
}

sub step
{
	my $kind = pick(qw(enqueue enqueue claim claim claim claim sleep sleep await await await
	  emit emit emit spawn spawn join join replay replay replay commit commit cancel cancel_parent stale pause
	  step step step_commit fair_enqueue fair_enqueue fair_claim fair_claim debounce debounce throttle
	  rate_enqueue rate_enqueue rate_claim rate_claim
	  budget_enqueue budget_enqueue budget_claim budget_claim budget_reserve budget_reserve
	  budget_reserve budget_settle budget_settle budget_settle budget_expire));
	my @held = held();
	my $tid = @held ? pick(@held) : undef;
	my $t = $tid ? $T{$tid} : undef;

	if ($kind eq 'enqueue')
	{
		my $q = pick('m', 'm', 'a', 'b');
		my ($row) = call_as($OWNER{$q}, q{SELECT durable_enqueue(?, '{}') AS id}, $q);
		$T{ $row->{id} } = { state => 'ready', fence => 0, waits => {}, queue => $q, doubt => {} };
		push @trace, "enqueue $q $row->{id}";
	}
	elsif ($kind eq 'claim')
	{
		my $q = pick('m', 'm', 'k', 'k', 'a', 'b');
		my ($row, $err) = call_as($OWNER{$q}, q{SELECT c.task_id, c.fence, (extract(epoch FROM now()) * 1000000)::bigint AS now
			FROM durable_claim(?, 'w') c CROSS JOIN LATERAL durable_begin(c.task_id, c.fence) begun RIGHT JOIN (SELECT) x ON true}, $q);
		return problem("claim failed: $err") if $err;
		my $now = $row->{now};
		my @may = grep { $T{$_}{queue} eq $q && run_at($T{$_}) <= $now } keys %T;
		push @trace, "claim $q -> " . ($row->{task_id} // 'nothing');
		if (!defined $row->{task_id})
		{
			# a task whose time had surely come was not handed out
			my @sure = grep { run_at($T{$_}) < $now - 50_000 } @may;
			problem("claim of $q returned nothing, but @sure could be claimed") if @sure;
			return;
		}
		my $c = $T{ $row->{task_id} } or return problem("claim handed out unknown task $row->{task_id}");
		problem("claim handed out $row->{task_id}, which the model holds $c->{state} until " . run_at($c))
		  unless run_at($c) <= $now + 50_000;
		$c->{state} = 'running';
		$c->{fence}++;
		$c->{claimed} = 1;
		delete $c->{run_at};
		expect("fence of $row->{task_id} after the claim", $row->{fence}, $c->{fence});
	}
	elsif ($kind eq 'fair_enqueue')
	{
		my $key = pick('t1', 't2', 't3', undef);
		my ($row, $err) = call(q{SELECT durable_enqueue('f', '{}', fairness_key => ?) AS id}, $key);
		return problem("enqueue into f failed: $err") if $err;
		my @ready = grep { $T{$_}{queue} eq 'f' && $T{$_}{state} eq 'ready' } sort keys %T;
		my @mine = grep { $T{$_}{fkey} eq ($key // '') } @ready;
		my $base = @mine ? max(map { $T{$_}{pass} } @mine) : @ready ? min(map { $T{$_}{pass} } @ready) : 0;
		$T{ $row->{id} } = { state => 'ready', fence => 0, waits => {}, queue => 'f', doubt => {},
			fkey => $key // '', pass => $base + 1 / ($WEIGHT{ $key // '' } // 1) };
		push @trace, 'enqueue f ' . ($key // '-') . " $row->{id} pass $T{ $row->{id} }{pass}";
	}
	elsif ($kind eq 'fair_claim')
	{
		# a claim of f and the commit of what it took, at once
		my ($row, $err) = call(q{SELECT c.task_id, c.fence FROM durable_claim('f', 'w') c CROSS JOIN LATERAL durable_begin(c.task_id, c.fence) begun RIGHT JOIN (SELECT) x ON true});
		return problem("claim of f failed: $err") if $err;
		my @ready = grep { $T{$_}{queue} eq 'f' && $T{$_}{state} eq 'ready' } sort keys %T;
		push @trace, 'claim f -> ' . ($row->{task_id} // 'nothing');
		if (!defined $row->{task_id})
		{
			problem("claim of f returned nothing, but @ready were ready") if @ready;
			return;
		}
		my $c = $T{ $row->{task_id} } or return problem("claim of f handed out unknown task $row->{task_id}");
		my $lowest = min(map { $T{$_}{pass} } @ready);
		problem("claim of f took $row->{task_id} (key '$c->{fkey}', pass $c->{pass}), where the lowest pass is $lowest")
		  unless $c->{state} eq 'ready' && $c->{pass} == $lowest;
		$outcomes{'fair claims'}++;
		$c->{state} = 'running';
		$c->{fence}++;
		expect("fence of $row->{task_id} after the claim", $row->{fence}, $c->{fence});
		($row, $err) = call(q{SELECT durable_commit(?, ?)}, $row->{task_id}, $c->{fence});
		return problem("commit of $c->{fence} failed: $err") if $err;
		$c->{state} = 'completed';
	}
	elsif ($kind eq 'rate_enqueue')
	{
		my $uses = pick(@RATE_USES);
		my $json = '{' . join(', ', map { qq{"$_": $uses->{$_}} } sort keys %$uses) . '}';
		my ($row, $err) = call(q{SELECT durable_enqueue('r', '{}', rate_limits => ?::jsonb) AS id,
			(extract(epoch FROM now()) * 1000000)::bigint AS now}, $json);
		return problem("enqueue into r failed: $err") if $err;
		$T{ $row->{id} } = { state => 'ready', fence => 0, waits => {}, queue => 'r', doubt => {},
			limits => $uses, run_at => $row->{now} };
		push @trace, "enqueue r $json $row->{id}";
	}
	elsif ($kind eq 'rate_claim')
	{
		# a claim of r and the commit of what it took, at once
		my $wanted = 1 + r(3);
		my $rows = $dbh->selectall_arrayref(q{SELECT c.task_id, c.fence,
			(extract(epoch FROM now()) * 1000000)::bigint AS now
			FROM durable_claim('r', 'w', batch => ?) c CROSS JOIN LATERAL durable_begin(c.task_id, c.fence) begun RIGHT JOIN (SELECT) x ON true}, { Slice => {} }, $wanted);
		return problem('claim of r failed: ' . $dbh->state) unless $rows;
		my @got = sort map { $_->{task_id} } grep { defined $_->{task_id} } @$rows;
		my ($taken, $deferred) = rate_claim_model($rows->[0]{now}, $wanted);
		push @trace, "claim r $wanted at $rows->[0]{now} -> @got";
		expect("tasks the claim of r at $rows->[0]{now} took", "@got", join(' ', sort @$taken));
		my $due = $dbh->selectall_arrayref(q{SELECT task_id, (extract(epoch FROM run_at) * 1000000)::bigint AS us,
			rate_limited_by FROM durable.live_tasks WHERE queue_name = 'r' AND state = 'ready'}, { Slice => {} });
		for my $d (@$due)
		{
			next unless exists $deferred->{ $d->{task_id} };
			expect("the time task $d->{task_id} is due after the claim deferred it", $d->{us},
				$deferred->{ $d->{task_id} });
			problem("task $d->{task_id} deferred by no limit") unless defined $d->{rate_limited_by};
		}
		$outcomes{'rate deferrals'} += keys %$deferred;
		for my $r (grep { defined $_->{task_id} } @$rows)
		{
			my $c = $T{ $r->{task_id} } or return problem("claim of r handed out unknown task $r->{task_id}");
			$outcomes{'rate-limited takes'}++ if %{ $c->{limits} };
			$c->{state} = 'running';
			$c->{fence}++;
			expect("fence of $r->{task_id} after the claim", $r->{fence}, $c->{fence});
			my (undef, $err) = call(q{SELECT durable_commit(?, ?)}, $r->{task_id}, $c->{fence});
			return problem("commit of $r->{task_id} failed: $err") if $err;
			$c->{state} = 'completed';
		}
		check_windows();
	}
	elsif ($kind eq 'budget_enqueue')
	{
		my $names = pick([], ['sb_a'], ['sb_b'], [ 'sb_a', 'sb_b' ], [ 'sb_b', 'sb_a', 'sb_b' ]);
		my ($row, $err) = call(q{SELECT durable_enqueue('sb', '{}', budgets => ?::text[]) AS id},
			'{' . join(',', @$names) . '}');
		return problem("enqueue into sb failed: $err") if $err;
		my %uniq = map { $_ => 1 } @$names;
		$SB{ $row->{id} } = { state => 'ready', budgets => [ sort keys %uniq ], steps => {}, n => 0 };
		push @trace, "enqueue sb @$names $row->{id}";
	}
	elsif ($kind eq 'budget_claim')
	{
		my ($row, $err) = call(q{SELECT c.task_id, c.fence FROM durable_claim('sb', 'w') c CROSS JOIN LATERAL durable_begin(c.task_id, c.fence) begun
			RIGHT JOIN (SELECT) x ON true});
		return problem("claim of sb failed: $err") if $err;
		push @trace, 'claim sb -> ' . ($row->{task_id} // 'nothing');
		return unless defined $row->{task_id};
		my $c = $SB{ $row->{task_id} } or return problem("claim of sb handed out unknown task $row->{task_id}");
		problem("claim of sb handed out $row->{task_id}, which the model has $c->{state}")
		  unless $c->{state} eq 'ready' || $c->{state} eq 'retrying';
		$c->{state} = 'running';
		$c->{fence} = $row->{fence};
	}
	elsif ($kind eq 'budget_reserve')
	{
		my @run = grep { $SB{$_}{state} eq 'running' } sort keys %SB or return;
		my $id = pick(@run);
		my $c = $SB{$id};
		# a step planned and refused before is started again, or a new one
		my @planned = grep { $c->{steps}{$_}{state} eq 'planned' } sort keys %{ $c->{steps} };
		my $name = @planned && r(2) ? pick(@planned) : 's' . ++$c->{n};
		my $new = !exists $c->{steps}{$name};
		my $class = $new ? pick('idempotent', 'unsafe') : $c->{steps}{$name}{class};
		my $reserve = pick(0, 10, 25, 40, 70);
		if ($new)
		{
			my (undef, $err) = call(q{SELECT (durable_step(?, ?, ?, ?)).state}, $id, $c->{fence}, $name, $class);
			return problem("step $name of $id failed: $err") if $err;
			$c->{steps}{$name} = { state => 'planned', class => $class };
		}
		my $st = $c->{steps}{$name};
		my ($row, $err) = call(q{SELECT durable_step_start(?, ?, ?, ?, reserve => ?) AS v},
			$id, $c->{fence}, $name, step_version($id, $name), $reserve);
		my @short = grep { $BUDGET{$_}{amount} - $BUDGET{$_}{reserved} - $BUDGET{$_}{spent} < $reserve }
		  @{ $c->{budgets} };
		push @trace, "reserve $id $name $reserve from @{ $c->{budgets} } -> " . ($err // "version $row->{v}");
		if (@short)
		{
			expect("a reserve of $reserve from @{ $c->{budgets} } (@short short)", $err, '55U05');
			$outcomes{'budget refusals'}++;
			return;
		}
		return problem("reserve of $reserve for $name of $id failed: $err") if $err;
		$BUDGET{$_}{reserved} += $reserve for @{ $c->{budgets} };
		@$st{qw(state reserved)} = ('started', $reserve);
		$outcomes{'budget reserves'}++;
	}
	elsif ($kind eq 'budget_settle')
	{
		my @doubt = map { my $id = $_; map { [ $id, $_ ] }
			  grep { $SB{$id}{steps}{$_}{state} =~ /^(started|unknown)$/ } sort keys %{ $SB{$id}{steps} } }
		  grep { $SB{$_}{state} eq 'running' } sort keys %SB or return;
		my ($id, $name) = @{ pick(@doubt) };
		my ($c, $st) = ($SB{$id}, $SB{$id}{steps}{$name});
		my $how = $st->{state} eq 'unknown' ? 'succeeded' : pick('spent', 'spent', 'whole', 'fail', 'unknown', 'not_executed');
		# a failure gives the task up: only with no other step in doubt, whose
		# judging this model leaves to budget_expire
		my $in_doubt = grep { $_->{state} =~ /^(started|unknown)$/ } values %{ $c->{steps} };
		$how = 'spent' if $how eq 'fail' && $in_doubt > 1;
		my $version = step_version($id, $name);
		my $spent = $how eq 'spent' ? r($st->{reserved} + 1) : $how =~ /^(whole|succeeded)$/ ? $st->{reserved} : 0;
		my ($row, $err);
		if ($how eq 'spent' || $how eq 'whole')
		{
			($row, $err) = call(q{SELECT durable_commit(?, ?, '{}', step => ?, expected_version => ?,
				spent => ?::numeric)::text AS ok}, $id, $c->{fence}, $name, $version,
				$how eq 'spent' ? $spent : undef);
			$st->{state} = 'committed';
		}
		elsif ($how eq 'fail')
		{
			($row, $err) = call(q{SELECT durable_fail(?, ?, 'transient', step => ?) AS ok}, $id, $c->{fence}, $name);
			# the worker gives the task up: retried later, or failed
			$st->{state} = 'planned';
			$c->{state} = 'retrying';
		}
		elsif ($how eq 'unknown')
		{
			($row, $err) = call(q{SELECT durable_step_unknown(?, ?, ?, ?) AS v}, $id, $c->{fence}, $name, $version);
			$st->{state} = 'unknown';
		}
		else
		{
			($row, $err) = call(q{SELECT durable_record_receipt(?, ?, ?, ?) AS ok}, $id, $c->{fence}, $name, $how);
			$st->{state} = $how eq 'succeeded' ? 'committed' : 'planned';
		}
		push @trace, "settle $id $name ($st->{reserved} reserved) by $how" . ($how eq 'spent' ? " $spent" : '')
		  . ' -> ' . ($err // $row->{ok} // $row->{v});
		return problem("settling $name of $id by $how failed: $err") if $err;
		return if $how eq 'unknown';
		$BUDGET{$_}{reserved} -= $st->{reserved}, $BUDGET{$_}{spent} += $spent for @{ $c->{budgets} };
		$st->{reserved} = 0;
		$outcomes{"budget settled by $how"}++;
	}
	elsif ($kind eq 'budget_expire')
	{
		my @run = grep { my $c = $SB{$_}; $c->{state} eq 'running'
			  && !grep { $_->{state} eq 'unknown' } values %{ $c->{steps} } } sort keys %SB or return;
		my $id = pick(@run);
		my ($row, $err) = call(q{SELECT durable_expire_lease(?, 'model') AS action}, $id);
		push @trace, "expire $id -> " . ($err // $row->{action});
		return problem("expiry of $id failed: $err") if $err;
		settle_lost($SB{$id});
		$outcomes{'budget leases lost'}++;
	}
	elsif ($kind eq 'debounce')
	{
		my ($key, $delay, $max_wait) = (pick('d1', 'd2'), pick(0, 0.05, 0.3, 3600), pick(undef, 0.2, 3600));
		my ($row, $err) = call(q{SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now,
			durable_debounce('m', ?, '{}', make_interval(secs => ?),
			  CASE WHEN ?::float8 IS NOT NULL THEN make_interval(secs => ?) END) AS id},
			$key, $delay, $max_wait, $max_wait);
		return problem("debounce failed: $err") if $err;
		my ($now, $d) = ($row->{now}, $DEBOUNCED{$key});
		my $t = $d && $T{ $d->{id} };
		push @trace, "debounce $key $delay " . ($max_wait // '-') . " -> $row->{id}";
		if ($t && $t->{state} eq 'ready' && !$t->{claimed})
		{
			expect("debounce of $key while its task waits for its claim", $row->{id}, $d->{id});
			$t->{run_at} = max($t->{run_at}, $now + $delay * 1e6);
			$t->{run_at} = min($t->{run_at}, $d->{first} + $max_wait * 1e6) if defined $max_wait;
			$outcomes{'debounces delayed'}++;
			return;
		}
		problem("debounce of $key gave its claimed task $row->{id} again") if $d && $row->{id} == $d->{id};
		my $run_at = $now + $delay * 1e6;
		$run_at = min($run_at, $now + $max_wait * 1e6) if defined $max_wait;
		$T{ $row->{id} } = { state => 'ready', fence => 0, waits => {}, queue => 'm', doubt => {}, run_at => $run_at };
		$DEBOUNCED{$key} = { id => $row->{id}, first => $now };
		$outcomes{'debounces made'}++;
	}
	elsif ($kind eq 'throttle')
	{
		my ($key, $per) = (pick('h1', 'h2'), pick(0.1, 3600));
		my ($row, $err) = call(q{SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now,
			durable_throttle('m', ?, '{}', make_interval(secs => ?)) AS id}, $key, $per);
		return problem("throttle failed: $err") if $err;
		my ($now, $h) = ($row->{now}, $THROTTLED{$key});
		push @trace, "throttle $key $per -> $row->{id}";
		if ($h && $now < $h->{first} + $per * 1e6)
		{
			expect("throttle of $key within its period", $row->{id}, $h->{id});
			$outcomes{'throttles within'}++;
			return;
		}
		problem("throttle of $key after its period gave $row->{id} again") if $h && $row->{id} == $h->{id};
		$T{ $row->{id} } = { state => 'ready', fence => 0, waits => {}, queue => 'm', doubt => {} };
		$THROTTLED{$key} = { id => $row->{id}, first => $now };
		$outcomes{'throttles made'}++;
	}
	elsif ($kind eq 'sleep' || $kind eq 'await' || $kind eq 'join' || $kind eq 'spawn' || $kind eq 'replay')
	{
		return unless $t;
		my $name;
		my %w;
		if ($kind eq 'replay')
		{
			my @names = sort keys %{ $t->{waits} } or return;
			$name = pick(@names);
			%w = %{ $t->{waits}{$name} };
			$kind = $w{kind};
		}
		else
		{
			$name = pick(qw(w1 w2 w3 w4 w5));
			%w = (kind => $kind);
			%w = (%w, secs => pick(0.05, 0.2, 0.5, 3600)) if $kind eq 'sleep';
			%w = (%w, event => pick(sort keys %EVENTS), timeout => pick(undef, 0.2, 0.6, 3600),
				queue => pick(undef, undef, 'm', 'a', 'b')) if $kind eq 'await';
			%w = (%w, payload => pick(@PAYLOADS)) if $kind eq 'spawn';
			%w = (%w, names => undef) if $kind eq 'join';
		}
		my $old = $t->{waits}{$name};
		my $role = $OWNER{ $t->{queue} };
		# an await is of its task's own queue's event unless it names
		# another, which needs that queue's work grant
		my $equeue = $kind eq 'await' ? $w{queue} // $t->{queue} : undef;
		my $denied = $kind eq 'await' && defined $w{queue} && $w{queue} ne $t->{queue} && !may($role, $w{queue});
		my $same = $old && $old->{kind} eq $w{kind} && join(',', map { $_ // '' } @{$old}{qw(secs event timeout payload)})
		  eq join(',', map { $_ // '' } @w{qw(secs event timeout payload)})
		  && ($old->{equeue} // '') eq ($equeue // '');
		my ($sql, @b);
		if ($kind eq 'sleep')
		{
			($sql, @b) = (q{SELECT durable_sleep(?, ?, ?, duration => ?::interval) AS status}, $w{secs} . ' seconds');
		}
		elsif ($kind eq 'await')
		{
			($sql, @b) = (q{SELECT status, payload::text FROM durable_await(?, ?, ?, ?, ?::interval, ?)},
				$w{event}, defined $w{timeout} ? "$w{timeout} seconds" : undef, $w{queue});
		}
		elsif ($kind eq 'join')
		{
			($sql, @b) = (q{SELECT status, children::text FROM durable_join(?, ?, ?)});
		}
		else
		{
			($sql, @b) = (q{SELECT durable_spawn(?, ?, ?, 'k', ?::jsonb) AS child}, $w{payload});
		}
		$sql =~ s/^SELECT /SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now, /;
		my ($row, $err) = call_as($role, $sql, $tid, $t->{fence}, $name, @b);
		push @trace, "$kind $tid/$t->{fence} $name " . join(' ', map { $_ // 'NULL' } @b) . ' -> '
		  . ($err // join(' ', map { "$_=" . ($row->{$_} // 'NULL') } sort grep { $_ ne 'now' } keys %$row));
		if ($denied)
		{
			expect("$kind $name of queue $w{queue} as " . ($role || 'superuser'), $err, '42501');
			$outcomes{"$kind denied"}++;
			return;
		}
		if ($old && !$same)
		{
			expect("$kind $name with other arguments", $err, '55U03');
			return;
		}
		# a wait that would end the lease while a step is in doubt is
		# refused, and records nothing; one that ends at once is not (below)
		my $refused = %{ $t->{doubt} } && $kind ne 'spawn' && ($err // '') eq '55U04';
		return problem("$kind $name failed: $err") if $err && !$refused;
		my $now = $row->{now};
		if ($kind eq 'spawn')
		{
			if ($old)
			{
				expect("replayed spawn $name", $row->{child}, $old->{child});
				return;
			}
			$T{ $row->{child} } = { state => 'ready', fence => 0, waits => {}, queue => 'k', parent => $tid,
				doubt => {} };
			$t->{waits}{$name} = { %w, child => $row->{child}, status => 'spawned' };
			return;
		}
		my $status;
		if ($old && $old->{status} !~ /^(sleeping|waiting)$/)
		{
			$status = $old->{status};
		}
		elsif ($kind eq 'sleep')
		{
			my $until = $old ? $old->{until} : $now + $w{secs} * 1_000_000;
			$status = $now >= $until ? 'elapsed' : 'sleeping';
			$t->{waits}{$name} = { %w, until => $until, status => $status };
		}
		elsif ($kind eq 'await')
		{
			my $until = $old ? $old->{until}
			  : defined $w{timeout} ? $now + $w{timeout} * 1_000_000 : undef;
			my $e = $E{"$equeue/$w{event}"};
			if ($old && defined $old->{woken})
			{
				$status = 'received';
			}
			elsif (!$old && $e)
			{
				$status = 'received';
			}
			elsif (defined $until && $now >= $until)
			{
				$status = 'timed_out';
			}
			else
			{
				$status = 'waiting';
			}
			$t->{waits}{$name} = { %w, equeue => $equeue, until => $until, status => $status,
				$status eq 'received' ? (got => $e->{payload}) : () };
			expect("payload of $name", $row->{payload}, $e->{payload}) if $status eq 'received';
		}
		else
		{
			my @kids = children_of($t);
			$status = (grep { !finished($T{$_}) } @kids) ? 'waiting' : 'done';
			$t->{waits}{$name} = { %w, status => $status };
			if ($status eq 'done')
			{
				my $n = () = ($row->{children} // '') =~ /"task_id"/g;
				expect("children reported by $name", $n, scalar @kids);
			}
		}
		# a status the server may decide differently within a few
		# milliseconds of a deadline: take the server's
		my $w = $t->{waits}{$name};
		my $edge = defined $w->{until} && abs($now - $w->{until}) < 20_000;
		if ($edge && $refused)
		{
			$status = 'waiting';
		}
		elsif ($edge && ($row->{status} // '') ne $status)
		{
			$status = $row->{status};
			$w->{status} = $status;
		}
		my $parks = $status eq 'sleeping' || $status eq 'waiting';
		return problem("$kind $name of $tid was refused (55U04), but it ends at once ($status)")
		  if $refused && !$parks;
		if (%{ $t->{doubt} } && $parks)
		{
			# it would have parked: refused, and the wait not recorded
			expect("$kind $name of $tid with steps in doubt", $err // $row->{status}, '55U04');
			if ($old) { $t->{waits}{$name} = $old } else { delete $t->{waits}{$name} }
			$outcomes{"$kind refused in doubt"}++;
			return;
		}
		expect("$kind $name of $tid", $row->{status}, $status);
		$outcomes{"$kind $status"}++;
		park($t, $name) if $status eq 'sleeping' || $status eq 'waiting';
	}
	elsif ($kind eq 'emit')
	{
		my $ev = pick(sort keys %EVENTS);
		my $p = pick(@PAYLOADS);
		my $q = pick('m', 'a', 'b');
		my $role = pick('', 'app_a', 'app_b');
		my ($row, $err) = call_as($role, q{SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now,
			durable_emit(?, ?, ?::jsonb)::text AS first}, $q, $ev, $p);
		push @trace, "emit $q/$ev $p as " . ($role || 'superuser') . ' -> ' . ($err // $row->{first});
		# emitting into another application's queue: refused, nothing told
		if (!may($role, $q))
		{
			expect("emit into $q as $role", $err, '42501');
			$outcomes{'emit denied'}++;
			return;
		}
		my $key = "$q/$ev";
		if ($E{$key})
		{
			expect("emit $key again", $err // $row->{first}, $E{$key}{payload} eq $p ? 'false' : '55U03');
			return;
		}
		return problem("emit $key failed: $err") if $err;
		expect("first emit of $key", $row->{first}, 'true');
		$E{$key} = { payload => $p, at => $row->{now} };
		for my $w (map { $_->{waits}{ $_->{parked} // '' } // () } grep { $_->{state} =~ /waiting|running/ } values %T)
		{
			next unless $w->{kind} eq 'await' && $w->{event} eq $ev && $w->{equeue} eq $q
			  && $w->{status} eq 'waiting';
			next if defined $w->{until} && $w->{until} <= $row->{now};
			$w->{woken} = $row->{now};
			$w->{status} = 'received';
			$w->{got} = $p;    # what it received; its arguments stay apart
		}
	}
	elsif ($kind eq 'step')
	{
		# a worker starts a step: its outcome is in doubt until committed
		return unless $t;
		my $role = $OWNER{ $t->{queue} };
		# unique in the task: a name taken again would be a replay of a
		# step already started or committed, not a new one
		my $name = 's' . ++$t->{nsteps} . 'x' . r(1000);
		my $class = pick('idempotent', 'unsafe');
		my ($row, $err) = call_as($role, q{SELECT (durable_step(?, ?, ?, ?, '{}')).state AS planned}, $tid, $t->{fence}, $name, $class);
		return problem("step $name of $tid failed: $err") if $err;
		($row, $err) = call_as($role, q{SELECT durable_step_start(?, ?, ?, 1) AS version}, $tid, $t->{fence}, $name);
		push @trace, "step $tid/$t->{fence} $name $class -> " . ($err // "started, version $row->{version}");
		return problem("start of $name of $tid failed: $err") if $err;
		$t->{doubt}{$name} = $row->{version};
	}
	elsif ($kind eq 'step_commit')
	{
		return unless $t && %{ $t->{doubt} };
		my $name = pick(sort keys %{ $t->{doubt} });
		my ($row, $err) = call_as($OWNER{ $t->{queue} },
			q{SELECT durable_commit(?, ?, '{"ok": true}', step => ?, expected_version => ?)::text AS v},
			$tid, $t->{fence}, $name, $t->{doubt}{$name});
		push @trace, "commit step $tid/$t->{fence} $name -> " . ($err // 'ok');
		return problem("commit of step $name of $tid failed: $err") if $err;
		delete $t->{doubt}{$name};
	}
	elsif ($kind eq 'commit')
	{
		return unless $t;
		my ($row, $err) = call_as($OWNER{ $t->{queue} },
			q{SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now, durable_commit(?, ?)}, $tid, $t->{fence});
		push @trace, "commit $tid/$t->{fence} -> " . ($err // 'ok');
		if (%{ $t->{doubt} })
		{
			expect("commit of $tid with steps in doubt", $err, '55U04');
			return;
		}
		return problem("commit of $tid failed: $err") if $err;
		$t->{state} = 'completed';
		child_finished($t, $row->{now});
	}
	elsif ($kind eq 'cancel' || $kind eq 'cancel_parent')
	{
		my @live = grep { !finished($T{$_}) } sort keys %T or return;
		# mostly any unfinished task; sometimes the parent of a child whose
		# step is in doubt, or of one in review
		my @parents = grep { !finished($T{$_}) } map { $T{$_}{parent} // () }
		  grep { %{ $T{$_}{doubt} } || $T{$_}{state} eq 'needs_review' } sort keys %T;
		@live = @parents if $kind eq 'cancel_parent' && @parents;
		my $id = pick(@live);
		my ($row, $err) = call(q{SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now, durable_cancel(?, 'model')}, $id);
		push @trace, "cancel $id -> " . ($err // 'ok');
		# review is left through durable_resolve only
		if ($T{$id}{state} eq 'needs_review')
		{
			expect("cancel of $id in review", $err, '55U04');
			return;
		}
		return problem("cancel of $id failed: $err") if $err;
		cancel_model($T{$id}, $row->{now});
	}
	elsif ($kind eq 'stale')
	{
		# a fence that is not current: every wait call refuses it
		my @any = sort keys %T or return;
		my $id = pick(@any);
		my $c = $T{$id};
		my $f = $c->{fence} + pick(1, 2);
		my ($row, $err) = call(q{SELECT durable_sleep(?, ?, 'x', duration => '1 second') AS s}, $id, $f);
		push @trace, "sleep $id/$f (stale) -> " . ($err // $row->{s});
		expect("a wait under fence $f of $id ($c->{state} under $c->{fence})", $err, '55U01');
	}
	else
	{
		sleep 0.1 + r(4) / 10;
		push @trace, 'pause';
	}
}

# a step's version as the server has it (the model keeps no versions)
sub step_version
{
	my ($id, $name) = @_;
	my ($row) = call(q{SELECT version FROM durable.steps WHERE task_id = ? AND step = ?}, $id, $name);
	return $row ? $row->{version} : 1;
}

# a task of sb whose holder is gone: each step in doubt as recovery judges
# it, an idempotent one planned again (or failed, out of attempts) with its
# reservation returned, an unsafe one kept in doubt (the task in review)
sub settle_lost
{
	my ($c) = @_;
	my $review = 0;
	for my $st (grep { $_->{state} eq 'started' } values %{ $c->{steps} })
	{
		if ($st->{class} eq 'unsafe')
		{
			$st->{state} = 'unknown';
			$review = 1;
			next;
		}
		$BUDGET{$_}{reserved} -= $st->{reserved} for @{ $c->{budgets} };
		@$st{qw(state reserved)} = ('planned', 0);
	}
	$c->{state} = $review ? 'review' : 'retrying';
}

# every budget as the server has it, against the model: never past its
# amount, and the reservations held are the model's
sub compare_budgets
{
	my $rows = $dbh->selectall_arrayref(q{SELECT name, reserved::float8, spent::float8, remaining::float8
		FROM durable.budgets}, { Slice => {} });
	for my $b (@$rows)
	{
		my $m = $BUDGET{ $b->{name} } or next;
		problem("budget $b->{name}: reserved $b->{reserved}, spent $b->{spent}; the model says "
			  . "$m->{reserved} and $m->{spent}")
		  unless $b->{reserved} == $m->{reserved} && $b->{spent} == $m->{spent};
		problem("budget $b->{name} is past its amount: $b->{remaining} remain") if $b->{remaining} < 0;
	}
	my $held = $dbh->selectall_arrayref(q{SELECT task_id || '/' || step, amount::float8
		FROM durable.step_reservations ORDER BY 1});
	my @want = sort map { my $id = $_; map { "$id/$_ $SB{$id}{steps}{$_}{reserved}" }
		  grep { $SB{$id}{steps}{$_}{state} =~ /^(started|unknown)$/ && @{ $SB{$id}{budgets} } }
		  keys %{ $SB{$id}{steps} } } keys %SB;
	expect('the reservations held', join(', ', map { "@$_" } @$held), join(', ', @want));
}

# every task as the server has it, against the model
sub compare
{
	my $rows = $dbh->selectall_arrayref(q{SELECT task_id, state::text, fence, fair_pass FROM durable.live_tasks
		WHERE queue_name IN ('m', 'k', 'a', 'b', 'f', 'r')
		UNION ALL SELECT task_id, state::text, fence, NULL FROM durable.task_history
		WHERE queue_name IN ('m', 'k', 'a', 'b', 'f', 'r')}, { Slice => {} });
	my %db = map { $_->{task_id} => $_ } @$rows;
	for my $id (sort keys %T)
	{
		my $d = $db{$id} or return problem("task $id is gone");
		my $t = $T{$id};
		my $want = $t->{state} eq 'ready' ? 'ready' : $t->{state};
		# a ready task and a waiting one are both claimable work
		my $got = $d->{state};
		problem("task $id is $got under fence $d->{fence}, the model says $want under $t->{fence}")
		  unless ($got eq $want || ($want eq 'ready' && $got eq 'waiting')) && $d->{fence} == $t->{fence};
		problem("task $id of f has the pass " . ($d->{fair_pass} // 'NULL') . ", the model says $t->{pass}")
		  if $t->{queue} eq 'f' && $t->{state} eq 'ready' && ($d->{fair_pass} // -1) != $t->{pass};
	}
	my $bad = $dbh->selectall_arrayref('SELECT task_id, problem FROM durable_verify()');
	problem('durable_verify(): ' . join('; ', map { "@$_" } @$bad)) if @$bad;
}

$dbh->do(q{SELECT durable_create_queue('m', lease => '1 hour')});
$dbh->do(q{SELECT durable_create_queue('k', lease => '1 hour')});
$dbh->do(q{SELECT durable_create_queue('f', lease => '1 hour', partitions => 1)});
$dbh->do(q{SELECT durable_set_fairness('f', ?, ?)}, undef, $_, $WEIGHT{$_}) for sort keys %WEIGHT;
$dbh->do(q{SELECT durable_create_queue('r', lease => '1 hour', partitions => 1)});
$dbh->do(q{SELECT durable_create_queue('sb', lease => '1 hour', partitions => 1)});
$dbh->do(q{SELECT durable_set_rate_limit(?, ?, make_interval(secs => ? / 1e6), ?)}, undef,
	$_, $LIMIT{$_}{rate}, $LIMIT{$_}{per_us}, $LIMIT{$_}{burst}) for sort keys %LIMIT;
for my $app ('a', 'b')
{
	$dbh->do(qq{CREATE ROLE app_$app IN ROLE durable_worker, durable_producer});
	$dbh->do(qq{SELECT durable_create_queue('$app', lease => '1 hour')});
	$dbh->do(qq{SELECT durable_grant_queue('$app', 'app_$app', 'all')});
}
for my $seq (1 .. $NSEQ)
{
	my $seed = $SEED + $seq - 1;
	# a small generator of our own, so that a seed gives the same sequence anywhere
	my $x = $seed % 2147483647 || 1;
	$M_rand = sub { $x = ($x * 48271) % 2147483647; return $x / 2147483647 };
	%T = ();
	%E = ();
	%outcomes = ();
	%DEBOUNCED = ();
	%THROTTLED = ();
	%BUCKET = ();
	%TAKEN = ();
	%SB = ();
	%BUDGET = map { $_ => { amount => $BUDGET_AMOUNT{$_}, reserved => 0, spent => 0 } } keys %BUDGET_AMOUNT;
	$dbh->do(q{SELECT durable_drop_budget(budget_name) FROM durable.spend_budgets});
	$dbh->do(q{SELECT durable_create_budget(?, ?)}, undef, $_, $BUDGET_AMOUNT{$_}) for sort keys %BUDGET_AMOUNT;
	@trace = ();
	@problems = ();
	$dbh->do(q{TRUNCATE durable.live_tasks, durable.task_history, durable.event_log,
		durable.live_steps, durable.step_history, durable.event_waits, durable.emitted_events,
		durable.flow_keys, durable.rate_limit_buckets, durable.step_reservations,
		durable.spend_settlements});
	for my $i (1 .. $NOPS)
	{
		step();
		compare() unless @problems;
		compare_budgets() unless @problems;
		last if @problems;
	}
	my %states;
	$states{ $_->{state} }++ for values %T;
	my $waited = grep { %{ $_->{waits} } } values %T;
	ok(!@problems, "sequence $seq (seed $seed): $NOPS operations, "
		  . join(', ', map { "$states{$_} $_" } sort keys %states) . ", $waited tasks with waits; "
		  . join(', ', map { "$outcomes{$_} $_" } sort keys %outcomes))
	  or diag(join("\n", @problems));
}

$node->stop if $node;
done_testing();
