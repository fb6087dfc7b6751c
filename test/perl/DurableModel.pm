# The reference model of durable's contract, for test/t/006_model.pl.
#
# Written from docs/design.md (sections 2 to 6, and 15) and the README's
# description of the SQL API, not from the C code: task and step states,
# fences, step classes and receipts, the recovery table (with several steps
# in doubt), the retry budget, request keys, the outbox and the inbox; the
# versions a task is pinned to and the versions a worker runs, migrations,
# quarantines, paused partitions.
#
# The model holds what the contract makes certain.  Where the contract
# leaves a choice to the server (which of two claims wins, which expired
# lease a claim settles on its way), an expectation is a set: a field of a
# task or step may hold an array reference (any of these values), or a hash
# {min => x, max => y} (a number in that range, in seconds since the epoch
# for times).  The driver matches what the server shows against the sets and
# then adopts the server's concrete values, so that the next operation is
# judged from a concrete state again.
package DurableModel;

use strict;
use warnings;
use Storable qw(dclone);
use JSON::PP;

our $INF = 9**9**9;
# timestamps of the server and of the driver agree to about this much (both
# read the same clock; the window covers a statement's own run time)
our $EPS = 0.005;

my %RETRY_SAFE = (pure => 1, idempotent => 1);
sub retry_safe { return $RETRY_SAFE{ $_[0] } ? 1 : 0 }

# docs/design.md section 3, durable_recovery_action, with the queryable line, as the
# SQL function takes it (flags), and for a step of a class
sub recovery_action_flags
{
	my ($expired, $receipt, $safe, $attempts, $max, $queryable) = @_;
	return 'wait' unless $expired;
	if (defined $receipt)
	{
		return 'record_completion' if $receipt eq 'succeeded';
		return 'record_failure' if $receipt eq 'failed_permanent';
		# 'not_executed' makes that attempt retry safe
		$safe = 1 if $receipt eq 'not_executed';
	}
	return 'reconcile' if $queryable && !defined $receipt;
	return 'manual_review' unless $safe;
	return 'exhausted' if $attempts >= $max;
	return 'retry_same_activity';
}

sub recovery_action
{
	my ($expired, $receipt, $class, $attempts, $max) = @_;
	return recovery_action_flags($expired, $receipt, retry_safe($class), $attempts, $max,
		$class eq 'queryable');
}

# several steps in doubt: the most cautious wins
my %CAUTION = (
	manual_review => 5, reconcile => 4, record_failure => 3, exhausted => 3,
	retry_same_activity => 2, record_completion => 1, wait => 0);
# (record_failure and exhausted are as cautious as each other: either may
# be the task's action; a set then)
sub most_cautious
{
	my @actions = @_;
	my ($best) = sort { $CAUTION{$b} <=> $CAUTION{$a} || $a cmp $b } @actions;
	my %tied = map { $_ => 1 } grep { $CAUTION{$_} == $CAUTION{$best} } @actions;
	return keys %tied > 1 ? [ sort keys %tied ] : $best;
}

# docs/design.md section 3, durable_next_action; times in seconds, deadline undef
# for none
sub next_action
{
	my ($attempts, $max, $error_class, $elapsed, $deadline, $next_delay) = @_;
	return 'fail_permanent' if $error_class eq 'permanent';
	return 'manual_review' if $error_class eq 'unknown';
	return 'error' if $error_class ne 'transient';
	return 'deadline_exceeded'
	  if defined $deadline && ($elapsed > $deadline || $elapsed + ($next_delay // 0) > $deadline);
	return 'attempts_exhausted' if $attempts >= $max;
	return 'schedule_retry';
}

# docs/design.md section 3, durable_retry_delay, in whole seconds
sub retry_delay
{
	my ($activity, $attempt, $base, $cap) = @_;
	require Digest::SHA;
	$base //= 2;
	$cap //= 60;
	my $ceiling = $attempt - 1 > 1100 ? $cap : $base * 2**($attempt - 1);
	$ceiling = $cap if $ceiling > $cap;
	my $f = unpack('N', substr(Digest::SHA::sha256("$activity:$attempt"), 0, 4)) / 4294967295;
	my $d = int($ceiling * (0.5 + $f * 0.5));
	return $d < 1 ? 1 : $d;
}

sub in_doubt
{
	my ($s) = @_;
	return !ref($s->{state}) && ($s->{state} eq 'started' || $s->{state} eq 'unknown');
}

sub steps_in_doubt
{
	my ($t) = @_;
	return grep { in_doubt($t->{steps}{$_}) } sort keys %{ $t->{steps} };
}

# Whether the task can be handed out by a claim at time $now (a range
# [$lo, $hi] of the server's now()) of a worker that runs $runs (undef: a
# claim that does not say): 1 surely, 0 surely not, -1 it depends on the
# exact time.
sub claimable
{
	my ($m, $t, $lo, $hi, $runs) = @_;
	my $q = $m->{queues}{ $t->{queue} };
	return 0 if $q->{paused};
	return 0 if defined $t->{partition} && $q->{paused_parts}{ $t->{partition} };
	return 0 if $runs && defined $t->{versions} && !versions_run($t->{versions}, $runs);
	return 0 unless $t->{state} eq 'ready' || $t->{state} eq 'waiting';
	return 0 if steps_in_doubt($t);
	return 1 if $t->{state} eq 'ready';
	return 0 if $t->{run_at} == $INF;
	return 1 if $t->{run_at} <= $lo - $EPS;
	return 0 if $t->{run_at} > $hi + $EPS;
	return -1;
}

# lease state of a running task at now in [$lo, $hi]: 1 surely expired,
# 0 surely live, -1 either
sub expired
{
	my ($t, $lo, $hi) = @_;
	return 0 unless $t->{state} eq 'running';
	return 1 if $t->{lease_until} < $lo - $EPS;
	return 0 if $t->{lease_until} > $hi + $EPS;
	return -1;
}

# The decision for an expired (or questioned) task, and what it does to the
# task and each step: returns (action, expected task).  The expected task
# carries sets where the contract allows several outcomes.  $lo..$hi is when
# the recovery may have run; $queue gives the retry delay bounds.
sub recover
{
	my ($m, $t0, $lo, $hi) = @_;
	my $t = dclone($t0);
	my $q = $m->{queues}{ $t->{queue} };
	my @doubt = steps_in_doubt($t);
	my $failed_before = grep { !ref $t->{steps}{$_}{state} && $t->{steps}{$_}{state} eq 'failed' }
	  keys %{ $t->{steps} };
	my $action;
	if (!@doubt)
	{
		$action = recovery_action(1, undef, $t->{class}, $t->{attempt}, $t->{max_attempts});
		# a queryable task with no step has nothing a handler could look up
		# (README: durable_reconcile)
		$action = 'manual_review' if $action eq 'reconcile';
	}
	else
	{
		$action = most_cautious(judge_steps($t, @doubt));
	}
	# A step failed before: whether settling the task hands it out again or
	# fails it the contract does not say (settle_task), so the action it
	# records may be the failure where its steps in doubt would retry,
	# complete or exhaust it (docs/design.md section 3).  The first action stays the one settle_task applies.
	$action = [ ref $action ? @$action : $action, 'record_failure' ]
	  if $failed_before
	  && grep { $_ eq 'retry_same_activity' || $_ eq 'record_completion' || $_ eq 'exhausted' }
	  ref $action ? @$action : $action;
	$t->{fence} = { min => $t->{fence} + 1, max => $t->{fence} + 1 };
	$t->{holder} = undef;
	settle_task($m, $t, $action, $t->{lease_until}, $hi);
	return ($action, $t);
}

# Judge each of these steps in doubt by the recovery table with its own
# class, receipt and attempts, apply its own outcome, return the actions.
sub judge_steps
{
	my ($t, @names) = @_;
	my @each;
	for my $name (@names)
	{
		my $s = $t->{steps}{$name};
		my $a = recovery_action(1, $s->{receipt}, $s->{class}, $s->{attempt}, $t->{max_attempts});
		push @each, $a;
		if ($a eq 'record_completion') { $s->{state} = 'committed' }
		elsif ($a eq 'record_failure') { $s->{state} = 'failed' }
		elsif ($a eq 'retry_same_activity') { $s->{state} = 'planned'; $s->{receipt} = undef }
		elsif ($a eq 'manual_review' || $a eq 'reconcile') { $s->{state} = 'unknown' }
		elsif ($a eq 'exhausted') { $s->{state} = [qw(failed unknown started planned)] }
	}
	return @each;
}

# The task's state for the action of the most cautious of its steps; a retry
# waits the retry delay from a time in [$lo, $hi].
sub settle_task
{
	my ($m, $t, $action, $lo, $hi) = @_;
	my $q = $m->{queues}{ $t->{queue} };
	$action = $action->[0] if ref $action;    # equally cautious: the same state
	if ($action eq 'manual_review') { $t->{state} = 'needs_review' }
	elsif ($action eq 'reconcile') { $t->{state} = 'waiting'; $t->{run_at} = $INF }
	elsif ($action eq 'record_failure' || $action eq 'exhausted') { $t->{state} = 'failed' }
	elsif ($action eq 'record_completion') { $t->{state} = 'ready' }
	else
	{
		# the retry delay is 1 s in every queue of the model (base 1, cap 1);
		# a queue with a token bucket may defer it further
		$t->{state} = 'waiting';
		$t->{run_at} = { min => $lo + 1, max => $q->{capacity} ? $INF : $hi + 1 };
	}
	# A step failed before (a worker's failed_permanent receipt for its own
	# unknown step fails the step, and the task goes on running): the task
	# can never complete, and the contract does not say whether settling it
	# hands it out again or fails it.  Either.
	if (($t->{state} eq 'waiting' && !(ref $t->{run_at} eq '' && $t->{run_at} == $INF)) || $t->{state} eq 'ready')
	{
		$t->{state} = [ $t->{state}, 'failed' ]
		  if grep { !ref $t->{steps}{$_}{state} && $t->{steps}{$_}{state} eq 'failed' } keys %{ $t->{steps} };
	}
}

# A step's failed attempt (durable_fail with a step): the budget's decision
# for that step, and the worker gives the task up, so its other steps in
# doubt are judged as after a lost lease (README, durable_fail); the task
# takes the most cautious action.  $delay is the retry delay of the step.
sub fail_step
{
	my ($m, $t0, $name, $decision, $now, $delay) = @_;
	my $t = dclone($t0);
	my $s = $t->{steps}{$name};
	my %as = (schedule_retry => 'retry_same_activity', fail_permanent => 'record_failure',
		attempts_exhausted => 'exhausted', manual_review => 'manual_review');
	if ($decision eq 'schedule_retry') { $s->{state} = 'planned'; $s->{receipt} = undef }
	elsif ($decision eq 'manual_review') { $s->{state} = 'unknown' }
	else { $s->{state} = 'failed' }
	my @others = grep { $_ ne $name } steps_in_doubt($t0);
	my $action = most_cautious($as{$decision}, judge_steps($t, @others));
	$t->{holder} = undef;
	settle_task($m, $t, $action, $now, $now);
	if (ref $t->{run_at})
	{
		$t->{run_at}{min} = $now + $delay;
		$t->{run_at}{max} = $now + $delay unless $m->{queues}{ $t->{queue} }{capacity};
	}
	return ($action, $t);
}

# docs/design.md section 15: versions.  A task's versions are names to one version
# each ({workflow => '2', model => 'm-1'}; undef: not pinned); a worker runs
# names to a version or a list of them ({workflow => ['2', '3']}).

# the versions as one string, names sorted, for messages and comparisons
sub versions_str
{
	my ($v) = @_;
	return 'null' unless defined $v;
	return '{' . join(', ', map {
		my $x = $v->{$_};
		"$_: " . (ref $x ? '[' . join(',', @$x) . ']' : $x)
	} sort keys %$v) . '}';
}

# the versions as the JSON a call takes
sub versions_json
{
	my ($v) = @_;
	return JSON::PP->new->canonical->encode($v);
}

# what the server shows (jsonb text) as versions
sub versions_parse
{
	my ($text) = @_;
	return undef unless defined $text;
	return JSON::PP->new->decode($text);
}

sub runs_list { my ($x) = @_; return ref $x ? @$x : ($x) }

# a worker that runs $runs runs a task pinned to $pinned: for every name the
# task is pinned to, the worker names that version (alone or in its list)
sub versions_run
{
	my ($pinned, $runs) = @_;
	return 1 unless defined $pinned && defined $runs;
	for my $name (keys %$pinned)
	{
		return 0 unless exists $runs->{$name};
		return 0 unless grep { $_ eq $pinned->{$name} } runs_list($runs->{$name});
	}
	return 1;
}

# what a claim of a worker that runs $runs pins a task pinned to $pinned
# to: the names it lacks, each to the last version of the worker's list
sub versions_pin
{
	my ($pinned, $runs) = @_;
	return $pinned unless defined $runs;
	my %v = %{ $pinned // {} };
	for my $name (keys %$runs)
	{
		$v{$name} = (runs_list($runs->{$name}))[-1] unless exists $v{$name};
	}
	return \%v;
}

# whether $v (undef: none) holds every name and version of $sub ({}: any)
sub versions_contain
{
	my ($v, $sub) = @_;
	for my $name (keys %$sub)
	{
		return 0 unless $v && exists $v->{$name} && $v->{$name} eq $sub->{$name};
	}
	return 1;
}

# a migration's new versions: the old with the names of $to replaced
sub versions_merge
{
	my ($v, $to) = @_;
	return { %{ $v // {} }, %$to };
}

# A new, empty model.
sub new_model
{
	return { tasks => {}, queues => {}, keys => {}, enqueue_keys => {}, outbox => {},
		outbox_fence => 0, inbox => {}, alias => {}, naliases => 0, seen => [], recorded => {} };
}

sub add_queue
{
	my ($m, $name, %o) = @_;
	$m->{queues}{$name} = { paused => 0, lease => $o{lease}, max_attempts => $o{max_attempts},
		capacity => $o{capacity}, partitions => $o{partitions} // 1,
		version_timeout => $o{version_timeout}, paused_parts => {} };
}

# a readable name for a task id: T1, T2, ... in the order the model saw them
sub alias
{
	my ($m, $id) = @_;
	return 'T?' unless defined $id;
	$m->{alias}{$id} //= 'T' . ++$m->{naliases};
	return $m->{alias}{$id};
}

# Does the observed value match the expectation (scalar, set or range)?
sub matches
{
	my ($want, $got) = @_;
	if (ref $want eq 'ARRAY')
	{
		return scalar grep { matches($_, $got) } @$want;
	}
	if (ref $want eq 'HASH')
	{
		return 0 unless defined $got;
		return 0 if defined $want->{min} && $got < $want->{min} - $EPS;
		return 0 if defined $want->{max} && $got > $want->{max} + $EPS;
		return 1;
	}
	return !defined $got if !defined $want;
	return 0 unless defined $got;
	if ($want =~ /^-?[\d.]+(e[-+]?\d+)?$/i && $got =~ /^-?[\d.]+(e[-+]?\d+)?$/i)
	{
		return abs($want - $got) <= $EPS;
	}
	return $want eq $got;
}

sub show
{
	my ($v) = @_;
	return 'null' unless defined $v;
	return '{' . join('|', map { show($_) } @$v) . '}' if ref $v eq 'ARRAY';
	if (ref $v eq 'HASH')
	{
		return '[' . (defined $v->{min} ? show($v->{min}) : '') . ' .. '
		  . (defined $v->{max} ? show($v->{max}) : '') . ']';
	}
	return 'inf' if $v =~ /^inf/i || ($v =~ /^[\d.e+]+$/ && $v == $INF);
	return sprintf('%.3f', $v) if $v =~ /^\d{9,}\.\d+$/;
	return $v;
}

# Compare an expected task with an observed one ({state, fence, attempt,
# run_at, lease_until, versions, partition, stop_code, reason,
# steps => {name => {state, attempt, version}}});
# returns the list of differences.
sub diff_task
{
	my ($t, $o) = @_;
	my @d;
	for my $f (qw(state fence attempt))
	{
		push @d, "$f: server " . show($o->{$f}) . ", model " . show($t->{$f})
		  unless matches($t->{$f}, $o->{$f});
	}
	# pinned versions change only by a claim that pins a name the task
	# lacks, or by a migration: the model knows them exactly
	push @d, 'versions: server ' . versions_str($o->{versions}) . ', model ' . versions_str($t->{versions})
	  unless versions_str($t->{versions}) eq versions_str($o->{versions});
	push @d, "partition: server $o->{partition}, model $t->{partition}"
	  if defined $t->{partition} && $t->{partition} != $o->{partition};
	my $state_ok = matches($t->{state}, $o->{state});
	# a stop code the model knows (a quarantine's, a review for versions
	# no worker runs) holds while the task is in the state it came with
	if ($state_ok && defined $t->{stop_for} && $o->{state} eq $t->{stop_for})
	{
		push @d, 'stop_code: server ' . show($o->{stop_code}) . ", model $t->{stop_code}"
		  unless ($o->{stop_code} // '') eq $t->{stop_code};
		push @d, 'reason: server ' . show($o->{reason}) . ", model $t->{reason}"
		  if defined $t->{reason} && ($o->{reason} // '') ne $t->{reason};
	}
	# a due task that names rate limits may have been deferred by a claim
	# (docs/design.md section 16, item 9): later, by the server's clock
	if ($state_ok && $o->{state} eq 'waiting' && defined $t->{run_at}
		&& !(%{ $t->{limits} // {} } && $o->{run_at} >= $t->{run_at}))
	{
		push @d, 'run_at: server ' . show($o->{run_at}) . ', model ' . show($t->{run_at})
		  unless matches($t->{run_at}, $o->{run_at});
	}
	my %names = map { $_ => 1 } keys %{ $t->{steps} }, keys %{ $o->{steps} };
	for my $n (sort keys %names)
	{
		my ($s, $os) = ($t->{steps}{$n}, $o->{steps}{$n});
		if (!$s) { push @d, "step $n: server has it ($os->{state}), model has none"; next }
		if (!$os) { push @d, "step $n: model has it (" . show($s->{state}) . '), server has none'; next }
		push @d, "step $n state: server $os->{state}, model " . show($s->{state})
		  unless matches($s->{state}, $os->{state});
		push @d, "step $n attempt: server $os->{attempt}, model " . show($s->{attempt})
		  unless matches($s->{attempt}, $os->{attempt});
	}
	return @d;
}

# Take the server's concrete values for what the model left open.
sub adopt
{
	my ($t, $o) = @_;
	$t->{$_} = $o->{$_} for qw(state fence attempt);
	$t->{partition} //= $o->{partition};
	delete @$t{qw(stop_code stop_for reason)} if defined $t->{stop_for} && $t->{stop_for} ne $o->{state};
	$t->{run_at} = $o->{state} eq 'waiting' ? $o->{run_at} : undef;
	$t->{lease_until} = $o->{lease_until} if $o->{state} eq 'running';
	for my $n (keys %{ $o->{steps} })
	{
		my $s = $t->{steps}{$n} or next;
		$s->{$_} = $o->{steps}{$n}{$_} for qw(state attempt version);
	}
}

# The contract's invariant on what can be handed out: a task that a claim
# may take (READY, or WAITING for a time) has no step STARTED or UNKNOWN.
sub released_in_doubt
{
	my ($o) = @_;
	return () unless $o->{state} eq 'ready'
	  || ($o->{state} eq 'waiting' && $o->{run_at} != $INF)
	  || $o->{state} eq 'completed';
	return grep { $o->{steps}{$_}{state} eq 'started' || $o->{steps}{$_}{state} eq 'unknown' }
	  sort keys %{ $o->{steps} };
}

1;
