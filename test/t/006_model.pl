# The model-based contract test: random sequences of API calls from several
# concurrent sessions against a real server, each answer and each state the
# server shows checked against the reference model of the contract
# (test/perl/DurableModel.pm, written from docs/design.md and the README).
#
# After every operation: the answer is one the model allows (a stale fence
# is always 55U01, a decision is the one the tables give, a claim hands out
# only what may be handed out), the tasks and steps the server shows are
# what the model allows (changes nobody asked for are only the recovery of
# an expired lease, judged by the recovery table, and the review of a ready
# task whose versions no worker runs), no task that can be claimed has a
# step STARTED or UNKNOWN, durable_verify() is empty, and no SQLSTATE is
# outside the table of docs/errors.md.  Where the contract leaves a choice to the
# server the model takes its answer if it is allowed.  Every claim begins
# the tasks it takes (durable_begin), as workers do: what a lease that runs
# out before its task began costs is sql/begin.sql's and 033_crash_loop's.
#
# Versions (docs/design.md section 15): workers claim saying what they run (from
# the versions deployed, which deploy operations change) or not; a claim
# never hands out a task pinned to versions its worker does not run, and
# pins only the names a task lacks; pinned versions change otherwise only by
# a migration (of a task or a queue, dry runs too), which like a quarantine
# is refused (55U04) while a step is in doubt; a quarantined task is FAILED
# with stop code 'quarantined' and its reason, replayed by that reason.  A
# review for versions no worker runs is judged against the claims the model
# knows durable.workers_seen recorded (at most once a second a backend).
#
# Locks another transaction holds (issue 37): a holder, a tenant of its
# own queue (qh, which the model does not follow), opens a transaction that
# holds one of durable's locks -- qh's retry tokens after a durable_fail,
# the key of the next occurrence of qh's schedule, a task's row, qh's
# settings -- and keeps it open over the operations that follow, until a
# later draw rolls it back.  Right after taking it, durable_reconcile()
# must return (the tick never waits on such a lock) and every expired
# lease of the model's queues that no transaction holds must be settled;
# and a durable_reconcile() that waits for the statement timeout is a
# violation, as a claim's is.
#
# Seeded: each sequence has a seed; a failure prints it and the shortest
# sequence found that still shows the failure (prefixes and operations
# dropped while it still fails the same way).  Environment:
#   MODEL_SEED            seed of the first sequence (random by default)
#   MODEL_SECONDS         time for new sequences (default 60)
#   MODEL_SESSIONS        worker sessions (default 3)
#   MODEL_OPS             operations per sequence (default 300)
#   MODEL_SEQUENCES       stop after this many sequences
#   MODEL_SHRINK_SECONDS  time to shrink each new kind of failure (default 90)
#   MODEL_REPLAY          run these operations (as a failure prints them) once
# tools/model runs it for longer.  The same seed gives the same operations;
# what they act on is chosen from the model as they run, so a server that
# answers the same way (the reconciler's timing aside) repeats the run.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use Storable qw(dclone);
use DurableNode;
use DurableModel;

BEGIN
{
	if (!eval { require DBI; require DBD::Pg; 1 })
	{
		Test::More::plan(skip_all => 'DBD::Pg is not installed (Debian: libdbd-pg-perl)');
	}
}

my $INF = $DurableModel::INF;
my $EPS = $DurableModel::EPS;
my $SECONDS = $ENV{MODEL_SECONDS} || 60;
my $NSESS = $ENV{MODEL_SESSIONS} || 3;
my $NOPS = $ENV{MODEL_OPS} || 300;
my $MAXSEQ = $ENV{MODEL_SEQUENCES} || 0;
my $SHRINK_SECONDS = length($ENV{MODEL_SHRINK_SECONDS} // "") ? $ENV{MODEL_SHRINK_SECONDS} : 90;
my $SEED = length($ENV{MODEL_SEED} // "") ? $ENV{MODEL_SEED} : int(rand(2**31));

# the SQLSTATE table of docs/errors.md: every error must carry one of these codes
my %DOCUMENTED_CODES;
{
	my $errors = slurp_file('docs/errors.md');
	$DOCUMENTED_CODES{$1} = 1 while $errors =~ /^\| `([0-9A-Z]{5})` \|/mg;
}
# what the driver itself causes: its statement timeout, its kills, restarts
my %DRIVER_CODES = map { $_ => 1 } qw(57014 57P01 57P02 57P03 08000 08003 08006 S8006 25P02);

my $node = DurableNode::new_node('model',
	"durable.reconcile_interval = '1s'", 'restart_after_crash = on',
	'max_connections = 40', "log_min_messages = 'warning'");
my ($HOST, $PORT) = ($node->host, $node->port);

# which API is installed: the request-key functions carry a fence since
# issue 11; a resolve decision may name its step
my $KEY_FENCE = $node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_proc WHERE proname = 'durable_idempotent_begin'
	   AND 'fence' = ANY (proargnames)}) > 0;
my $RESOLVE_STEP = $node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_proc WHERE proname = 'durable_resolve'
	   AND 'step' = ANY (proargnames)}) > 0;
# queues restricted to roles (durable_grant_queue): q2 is granted to one
# application's role; another worker role must get 42501 for anything on it
# outbox messages, inbox entries and request keys belong to a queue since
# issue 37: the model's live in one queue of their own
my $MSG_QUEUE = $node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_proc WHERE proname = 'durable_outbox_emit'
	   AND 'queue' = ANY (proargnames)}) > 0;
my $MQ = $MSG_QUEUE ? "'model_messages', " : '';
my $MQN = $MSG_QUEUE ? "queue => 'model_messages', " : '';
my $GRANTS = $node->safe_psql('postgres',
	"SELECT count(*) FROM pg_proc WHERE proname = 'durable_grant_queue'") > 0;
if ($GRANTS)
{
	$node->safe_psql('postgres', q{
		CREATE SCHEMA model_hostile;
		CREATE ROLE model_app; CREATE ROLE model_foreign;
		GRANT durable_worker, durable_producer TO model_app, model_foreign;});
}
note('request keys with fences: ' . ($KEY_FENCE ? 'yes' : 'no (skipped)')
	  . '; resolve names its step: ' . ($RESOLVE_STEP ? 'yes' : 'no')
	  . '; queue grants: ' . ($GRANTS ? 'yes' : 'no (skipped)'));

sub connect_db
{
	for (1 .. 300)
	{
		my $dbh = DBI->connect("dbi:Pg:dbname=postgres;host=$HOST;port=$PORT", '', '',
			{ AutoCommit => 1, RaiseError => 0, PrintError => 0, PrintWarn => 0,
			  pg_server_prepare => 0 });
		if ($dbh)
		{
			$dbh->do("SET statement_timeout = '3s'");
			$dbh->do("SET client_min_messages = 'error'");
			return $dbh;
		}
		sleep 0.1;
	}
	die 'cannot connect to the server';
}

my @S;       # worker sessions
my %HOLD;    # the holder's connection, and what its open transaction holds
my $TICK;    # the connection that runs the tick while the holder holds
my $OBS;     # the observer's connection
my $M;       # the model
my $PREV_OBS;    # when the last observation that read the tasks began
my $RECONCILER_OFF = 0;    # while a failure is shrunk without the reconciler
my %stats = (sequences => 0, ops => 0, skipped => 0, implicit => 0, claims => 0,
	handed_out => 0, empty_claims_with_work => 0, timeouts => 0, kills => 0,
	crashes => 0, restarts => 0, stale_rejected => 0, decisions => 0);
my %kinds_run;

sub reconnect_all
{
	$OBS = connect_db();
	%HOLD = ();
	$TICK = undef;
	for my $s (@S)
	{
		$s->{dbh} = connect_db();
		$s->{pid} = $s->{dbh}->{pg_pid};
		$s->{txn} = undef;
	}
}

sub session_lost
{
	my ($s) = @_;
	if ($s->{dbh})
	{
		local $SIG{__WARN__} = sub { };
		$s->{dbh}->rollback if $s->{txn};
		$s->{dbh}->disconnect;
	}
	$s->{dbh} = connect_db();
	$s->{pid} = $s->{dbh}->{pg_pid};
	$s->{txn} = undef;
}

# Run one statement; returns {rows, err, msg, t0, t1}.
sub run_sql
{
	my ($dbh, $sql, @binds) = @_;
	my $t0 = time;
	my $rows = $dbh->selectall_arrayref($sql, { Slice => {} }, @binds);
	my $t1 = time;
	return { rows => $rows, t0 => $t0, t1 => $t1 } if $rows;
	my $state = $dbh->state // '';
	$state = '08006' if $state eq '' || !$dbh->ping;
	return { err => $state, msg => $dbh->errstr // '', t0 => $t0, t1 => $t1 };
}

my @failures;     # of this sequence
my $TRACE;        # descriptions of the operations of this sequence
sub violation
{
	my ($kind, $sig, $msg) = @_;
	# one bug in recovery shows as a wrong answer of durable_reconcile, a
	# wrong state after the reconciler or a claim settled a lease, or a task
	# released with a step in doubt, depending on who settled it first:
	# these are one family, for shrinking and for the report
	my $family = $kind eq 'doubt' || $msg =~ /the tables give|step\(s\) .* in doubt|handed out .* steps in doubt/
	  ? 'steps in doubt: a decision the tables do not give, or a task released with a step in doubt'
	  : "$kind: $sig";
	push @failures, { sig => $family, detail => "$kind: $sig", msg => $msg };
	# one operation may break several rules; the family of the whole is
	# the recovery one if any of them is
	my ($rec) = grep { $_->{sig} =~ /^steps in doubt/ } @failures;
	$failures[0]{sig} = $rec->{sig} if $rec && @failures > 1;
	return 0;
}

#
# Reset: an empty extension state and the model's queues.
#
my @QUEUES = (
	[ 'q1', lease => '1 second', max_attempts => 3, capacity => undef ],
	[ 'q2', lease => '1 second', max_attempts => 2, capacity => 2 ],
	# versions as a contract (docs/design.md section 15): partitions paused one at
	# a time, a task no worker runs goes to review after version_timeout
	[ 'q3', lease => '1 second', max_attempts => 3, capacity => undef, partitions => 3,
	  version_timeout => 2 ]);
# The versions workers may run, and those deployed at a sequence's start
# (deploy operations change what workers say they run)
my @WORKFLOWS = qw(1 2 3);
my @MODELS = qw(m-1 m-2);
# why an operator quarantines (not a stop code: a replay by reason tells
# them apart)
my @QUARANTINE_REASONS = ('payments API returns 500', 'bad deploy');
# the rate limits of q2's tasks, and the units claims took of each limit
# and key: [claim time, units]
my %RATE_LIMITS = (model_rate => { rate => 2, per => 3, burst => 2 },
	model_tenant => { rate => 1, per => 2, burst => 1 });
my %RATE_TAKES;
# how long a version review (the reconciler's tick) may take between its
# look at the workers seen and its commit: a claim that committed that long
# before the last observation counts as seen by it
my $TICK_MARGIN = 0.5;
# a backend records a worker's claims in a queue at most once a second: the
# model follows which claims were surely recorded (durable.workers_seen)
my $RECORD_INTERVAL = 1;

sub reset_state
{
	hold_release();
	for my $s (@S)
	{
		if ($s->{txn}) { $s->{dbh}->rollback; $s->{txn} = undef }
		$s->{handles} = [];
		$s->{outbox} = [];
		$s->{keys} = [];
		session_lost($s) unless $s->{dbh}->ping;
	}
	$OBS = connect_db() unless $OBS && $OBS->ping;
	my $done;
	for (1 .. 20)
	{
		$done = $OBS->do('TRUNCATE durable.live_tasks, durable.live_steps, durable.task_history, durable.step_history, '
			  . 'durable.task_keys, durable.event_log, durable.outbox, '
			  . 'durable.inbox, durable.idempotency_keys, durable.workers_seen, durable.flow_keys, durable.queues CASCADE') and last;
		$OBS = connect_db() unless $OBS->ping;
		sleep 0.2;
	}
	die 'reset failed: ' . $OBS->errstr unless $done;
	# the settings operations of the last sequence are undone
	$OBS->do('ALTER DATABASE postgres RESET ALL');
	$OBS->do('ALTER SYSTEM RESET durable.reconcile_batch');
	$OBS->do('ALTER SYSTEM RESET durable.reconcile_interval');
	$OBS->do('ALTER SYSTEM SET durable.reconciler_enabled = ' . ($RECONCILER_OFF ? 'off' : 'on'));
	$OBS->do('SELECT pg_reload_conf()');
	$M = DurableModel::new_model();
	for my $q (@QUEUES)
	{
		my ($name, %o) = @$q;
		$OBS->do("SELECT durable_create_queue('$name', lease => '$o{lease}', max_attempts => $o{max_attempts},
		          retry_base => 1, retry_cap => 1"
			  . ($o{capacity} ? ", retry_capacity => $o{capacity}, retry_refill_rate => 1" : '')
			  . ($o{partitions} ? ", partitions => $o{partitions}" : '')
			  . ($o{version_timeout} ? ", version_timeout => '$o{version_timeout} seconds'" : '') . ')')
		  or die 'create queue: ' . $OBS->errstr;
		DurableModel::add_queue($M, $name, %o);
		($M->{queues}{$name}{partition_base}) = $OBS->selectrow_array(
			'SELECT partition_base FROM durable.queues WHERE queue_name = ?', undef, $name);
	}
	# the queue of the outbox, inbox and request keys, outside the model's queues
	$OBS->do("SELECT durable_create_queue('model_messages')") or die 'create queue: ' . $OBS->errstr
	  if $MSG_QUEUE;
	$M->{deployed} = { workflow => [qw(1 2)], model => ['m-1'] };
	# the backends remember the claims they recorded in the last sequence,
	# whose rows are gone now, and skip recording the same for a second
	$M->{seen_reset} = time;
	$PREV_OBS = time;
	$OBS->do("SELECT durable_grant_queue('q2', 'model_app', 'all')") or die 'grant: ' . $OBS->errstr
	  if $GRANTS;
	# the rate limits q2's tasks name (docs/design.md section 16): the units
	# every claim took, by limit and key, are checked against every window
	$OBS->do('TRUNCATE durable.rate_limit_buckets') or die 'truncate buckets: ' . $OBS->errstr;
	$OBS->do("SELECT durable_set_rate_limit(?, ?, make_interval(secs => ?), ?)", undef,
		$_, @{ $RATE_LIMITS{$_} }{qw(rate per burst)}) or die 'rate limit: ' . $OBS->errstr
	  for sort keys %RATE_LIMITS;
	%RATE_TAKES = ();
	# the holder's queue, with a retry budget and a schedule of its own
	$OBS->do("SELECT durable_create_queue('qh', lease => '1 second', max_attempts => 1000000,
	          retry_base => 1, retry_cap => 1, retry_capacity => 1, retry_refill_rate => 1)")
	  or die 'create queue qh: ' . $OBS->errstr;
	$OBS->do("SELECT durable_schedule('qh-minutely', '* * * * *', 'qh', '{}')")
	  or die 'schedule: ' . $OBS->errstr;
}

#
# The holder: a transaction of another tenant that holds one of durable's
# locks, and the tick that must not wait for it.
#
sub hold_release
{
	return unless $HOLD{open};
	local $SIG{__WARN__} = sub { };
	$HOLD{dbh}->rollback if $HOLD{dbh};
	my $held = $HOLD{open};
	$HOLD{open} = undef;
	return $held;
}

my @HOLDS = ('qh retry tokens after durable_fail', 'the key of qh-minutely\'s occurrence',
	'a task row of qh', 'qh\'s row (durable_alter_queue)');

sub hold_op
{
	my ($op) = @_;
	my @r = @{ $op->{r} };
	if ($HOLD{open})
	{
		my $held = hold_release();
		my $desc = "holder ROLLBACK (it held $held)";
		observe($desc);
		return $desc;
	}
	$HOLD{dbh} = connect_db() unless $HOLD{dbh} && $HOLD{dbh}->ping;
	$TICK = connect_db() unless $TICK && $TICK->ping;
	my $h = $HOLD{dbh};
	my $what = pick(\@HOLDS, $r[0]);
	# a lease of qh that expires (committed): the tick settles it, and its
	# retry owes qh's token
	$h->do(q{SELECT durable_enqueue('qh', '{}')});
	$h->do(q{SELECT count(*) FROM durable_claim('qh', 'crashed', lease => '1 millisecond') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun});
	$OBS->do(q{UPDATE durable.schedules SET next_run = now() - interval '1 second'
	           WHERE schedule_name = 'qh-minutely'}) if $what =~ /key/;
	sleep 0.01;
	my @stmts = $what =~ /tokens/ ? (q{SELECT durable_enqueue('qh', '{}')},
		q{SELECT durable_fail(c.task_id, c.fence, 'transient') FROM durable_claim('qh', 'holder', lease => '1 hour') c CROSS JOIN LATERAL durable_begin(c.task_id, c.fence) begun})
	  : $what =~ /key/ ? (q{SELECT durable_enqueue('qh', '{}', idempotency_key => 'schedule:qh-minutely:'
		  || extract(epoch FROM date_trunc('minute', now()))::bigint)})
	  : $what =~ /task row/ ? (q{SELECT durable_enqueue('qh', '{}')}, q{SELECT durable_heartbeat(c.task_id, c.fence)
		  FROM durable_claim('qh', 'holder', lease => '1 hour') c CROSS JOIN LATERAL durable_begin(c.task_id, c.fence) begun})
	  : (q{SELECT durable_alter_queue('qh', retry_refill_rate => 1)});
	$h->begin_work;
	my $ok = 1;
	$ok &&= $h->do('SET LOCAL ROLE model_app') if $GRANTS && $what !~ /alter_queue/;
	$ok &&= $h->do($_) for @stmts;
	my $desc = "holder BEGIN, holds $what";
	if (!$ok)
	{
		# e.g. the key taken already this minute: it holds nothing
		$desc .= ' -> ' . ($h->state // '') . ' (holds nothing)';
		$h->rollback;
		observe($desc);
		return $desc;
	}
	$HOLD{open} = $what;
	# the tick must not wait, and must settle the other queues' expired
	# leases that nobody holds
	my $res = run_sql($TICK, q{SELECT (extract(epoch FROM now()) * 1000000)::bigint AS us,
		count(c.task_id) AS n FROM (SELECT 1) x LEFT JOIN LATERAL durable_reconcile() c ON true GROUP BY 1});
	if ($res->{err})
	{
		violation('hold', 'the tick waited for a lock another transaction holds',
			"$desc; durable_reconcile() -> $res->{err} $res->{msg}") if $res->{err} eq '57014';
		$TICK = connect_db() unless $TICK->ping;
		$desc .= "; durable_reconcile() -> $res->{err}";
		observe($desc);
		return $desc;
	}
	$desc .= "; durable_reconcile() settled $res->{rows}[0]{n}";
	$stats{holds}++;
	# what the tick skipped for it, shown in durable.status
	my ($blocked) = $OBS->selectrow_array(q{SELECT string_agg(part, ', ' ORDER BY part)
		FROM durable.tick_failures WHERE sqlstate = '55P03'
		AND last_failed_at >= 'epoch'::timestamptz + ?::float8 * interval '1 microsecond'},
		undef, $res->{rows}[0]{us});
	if ($blocked) { $stats{holds_blocking}++; $desc .= " (blocked: $blocked)" }
	$OBS->begin_work;
	my $left = $OBS->selectcol_arrayref(q{SELECT task_id FROM durable.live_tasks
		WHERE queue_name <> 'qh' AND state = 'running'
		AND lease_until < 'epoch'::timestamptz + ?::float8 * interval '1 microsecond'
		FOR NO KEY UPDATE SKIP LOCKED}, undef, $res->{rows}[0]{us});
	$OBS->rollback;
	$OBS = connect_db() unless $OBS->ping;
	my $busy = busy_tasks();
	my @left = grep { !$busy->{$_} } @{ $left // [] };
	violation('hold', 'an expired lease of another queue stayed unsettled',
		"$desc; still running with an expired lease that no transaction holds: "
		  . join(', ', map { T($_) } @left)) if @left;
	observe($desc);
	return $desc;
}

#
# Helpers to read the model
#
sub pick { my ($list, $r) = @_; return @$list ? $list->[ $r % @$list ] : undef }

# the model's view of a task for a session: its transaction's copy if it
# has one open on that task
sub task_for
{
	my ($s, $tid) = @_;
	return $s->{txn}{copy} if $s && $s->{txn} && $s->{txn}{tid} == $tid && $s->{txn}{copy};
	return $M->{tasks}{$tid};
}

# tasks held by an open transaction that wrote them: nobody else touches them
sub locked_tasks
{
	my %l;
	for my $s (@S) { $l{ $s->{txn}{tid} } = $s->{id} if $s->{txn} && $s->{txn}{wrote} }
	return \%l;
}

sub busy_tasks
{
	my %l;
	for my $s (@S) { $l{ $s->{txn}{tid} } = 1 if $s->{txn} }
	return \%l;
}

sub T { return DurableModel::alias($M, $_[0]) }

# No window between two claims that took units of a rate limit's key holds
# more than burst + rate * window / per of them (docs/design.md section
# 16, item 8); a claim's time is its transaction's start, as the server's.
sub check_rate_windows
{
	my ($desc) = @_;
	for my $name (sort keys %RATE_TAKES)
	{
		my $l = $RATE_LIMITS{ (split /:/, $name)[0] };
		my @takes = sort { $a->[0] <=> $b->[0] } @{ $RATE_TAKES{$name} };
		for my $i (0 .. $#takes)
		{
			my $units = 0;
			for my $j ($i .. $#takes)
			{
				$units += $takes[$j][1];
				my $most = $l->{burst} + ($takes[$j][0] - $takes[$i][0]) * $l->{rate} / $l->{per};
				next if $units <= $most + 1e-6;
				violation('rate', 'a rate limit exceeded',
					"$units units of $name were taken between claims at $takes[$i][0] and $takes[$j][0],"
					  . " at most $most allowed, after [$desc]");
				return;
			}
		}
	}
}

#
# Versions (docs/design.md section 15): what workers run, and the reviews of tasks
# none of them runs.
#
sub VS { return DurableModel::versions_str($_[0]) }
sub terminal { return $_[0]{state} =~ /^(completed|failed|cancelled)$/ }

# what a worker says it runs: mostly what is deployed, one version or a
# list (its last is what it starts new work under), sometimes with a model;
# now and then a worker not yet upgraded
sub draw_runs
{
	my ($r) = @_;
	my @wf = @{ $M->{deployed}{workflow} };
	my @m = @{ $M->{deployed}{model} };
	my %runs;
	my $x = $r % 100;
	if ($x < 5) { $runs{workflow} = pick(\@WORKFLOWS, $r >> 7) }
	elsif ($x < 45) { $runs{workflow} = pick(\@wf, $r >> 7) }
	elsif ($x < 75) { $runs{workflow} = [@wf] }
	else { $runs{workflow} = [ @wf[ ($r >> 7) % @wf .. $#wf ] ] }
	my $y = ($r >> 12) % 100;
	if ($y < 30) { $runs{model} = pick(\@m, $r >> 14) }
	elsif ($y < 45) { $runs{model} = [@m] }
	return \%runs;
}

# versions an operator migrates to: what is deployed
sub draw_to
{
	my ($r) = @_;
	my $x = $r % 100;
	my %to;
	$to{workflow} = $M->{deployed}{workflow}[-1] if $x < 55;
	$to{workflow} = pick($M->{deployed}{workflow}, $r >> 7) if $x >= 55 && $x < 85;
	$to{model} = pick($M->{deployed}{model}, $r >> 9) if $x >= 70;
	return \%to;
}

# a worker's name says what it runs: one row of durable.workers_seen each
sub worker_name
{
	my ($s, $runs) = @_;
	return "w$s->{id}" unless $runs;
	return "w$s->{id}-" . join('-', map {
		my $x = $runs->{$_};
		$_ . (ref $x ? '[' . join(',', @$x) . ']' : $x)
	} sort keys %$runs);
}

# the task a migration leaves (docs/design.md section 15): new versions; a running
# task back to READY (its worker runs the old code: fence + 1, the attempt
# given back); one in review because no worker ran its versions READY; a
# ready or waiting one as it was, fenced; one in review for another reason
# stays there.  $t0: before the migration's now()
sub migrated_task
{
	my ($b, $new, $t0) = @_;
	return with($b, sub {
		my $x = $_[0];
		my $f = $b->{fence};
		$x->{versions} = $new;
		if ($b->{state} eq 'running')
		{
			$x->{state} = 'ready';
			$x->{fence} = $f + 1;
			$x->{attempt} = $b->{attempt} - 1;
			$x->{holder} = undef;
			$x->{due_since} = $t0;
		}
		elsif ($b->{state} eq 'needs_review' && ($b->{stop_code} // '') eq 'version_unavailable')
		{
			$x->{state} = 'ready';
			$x->{fence} = $f + 1;
			$x->{due_since} = $t0;
			delete @$x{qw(stop_code stop_for reason)};
		}
		elsif ($b->{state} eq 'needs_review') { $x->{fence} = [ $f, $f + 1 ] }
		else { $x->{fence} = $f + 1 }
	});
}

# the tasks a migration or a quarantine may find: the task, or the task
# its expired lease was settled to first
sub bases_of
{
	my ($t, $hi) = @_;
	my @b = ($t);
	if ($t->{state} eq 'running' && DurableModel::expired($t, $t->{lease_until}, $hi) != 0)
	{
		my ($action, $rt) = DurableModel::recover($M, $t, $t->{lease_until}, $hi);
		for my $st (ref $rt->{state} ? @{ $rt->{state} } : ($rt->{state}))
		{
			push @b, with($rt, sub {
				$_[0]{state} = $st;
				$_[0]{fence} = $t->{fence} + 1;
			});
		}
	}
	return @b;
}

# a task sent to review for versions no worker runs
sub reviewed_task
{
	my ($b) = @_;
	return with($b, sub {
		$_[0]{state} = 'needs_review';
		$_[0]{stop_code} = 'version_unavailable';
		$_[0]{stop_for} = 'needs_review';
		delete $_[0]{reason};
	});
}

# May a review for versions (the reconciler's tick, or durable_reconcile)
# have sent task $b to NEEDS_REVIEW, at a now() no later than $now, having
# seen every claim that committed before $since - $margin?  A complaint, or
# undef.  Only what is certain counts: a worker's claim is in
# durable.workers_seen a second after it at the latest.
sub review_complaint
{
	my ($b, $now, $since, $margin) = @_;
	my $q = $M->{queues}{ $b->{queue} };
	my $vt = $q->{version_timeout};
	return "queue $b->{queue} has no version_timeout" unless $vt;
	return 'it is pinned to no versions' unless defined $b->{versions};
	return "it was $b->{state}" unless $b->{state} eq 'ready'
	  || ($b->{state} eq 'waiting' && !ref $b->{run_at} && $b->{run_at} != $INF && $b->{run_at} <= $now + $EPS);
	return "queue $b->{queue} is paused" if $q->{paused} && $q->{paused_at} < $since - $margin;
	my $p = $b->{partition};
	return "its partition $p is paused"
	  if defined $p && $q->{paused_parts}{$p} && $q->{paused_parts}{$p} < $since - $margin;
	return 'it is due since ' . DurableModel::show($b->{due_since}) . ", less than $vt s before now() "
	  . DurableModel::show($now)
	  if ($b->{due_since} // 0) > $now - $vt + $EPS;
	for my $e (@{ $M->{seen} })
	{
		next unless $e->{queue} eq $b->{queue} && $e->{t1} < $since - $margin;
		next unless $e->{rec} > $now - $vt + $EPS;
		next unless DurableModel::versions_run($b->{versions}, $e->{runs});
		return "worker $e->{worker} claimed at " . DurableModel::show($e->{now}) . ' saying it runs '
		  . ($e->{runs} ? VS($e->{runs}) : 'anything (no versions)') . ", within version_timeout $vt s of now() "
		  . DurableModel::show($now) . ' (pinned to ' . VS($b->{versions}) . ')';
	}
	return undef;
}

#
# Observation: what the server shows, compared with the model.
#
sub read_tasks
{
	my ($dbh, $tid) = @_;
	my $where = "WHERE t.queue_name <> 'qh'" . (defined $tid ? " AND t.task_id = $tid" : '');
	# one statement, one snapshot: tasks and steps as one commit left them
	my $r = run_sql($dbh, qq{
		SELECT extract(epoch FROM now())::float8 AS now, t.task_id, t.state::text, t.fence, t.attempt,
		       extract(epoch FROM t.run_at)::float8 AS run_at,
		       extract(epoch FROM t.lease_until)::float8 AS lease_until, t.queue_name,
		       t.versions::text AS versions, t.partition_key, t.stop_code,
		       t.last_error ->> 'reason' AS reason,
		       s.step, s.state::text AS step_state, s.version AS step_version,
		       s.attempt AS step_attempt, s.receipt
		FROM durable.tasks t LEFT JOIN durable.steps s USING (partition_key, task_id) $where});
	return undef if $r->{err};
	my %o;
	my $now;
	for my $row (@{ $r->{rows} })
	{
		$now = $row->{now};
		my $o = $o{ $row->{task_id} } //= {
			task_id => $row->{task_id}, state => $row->{state}, fence => $row->{fence},
			attempt => $row->{attempt}, lease_until => $row->{lease_until}, queue_name => $row->{queue_name},
			run_at => defined $row->{run_at} && $row->{run_at} =~ /inf/i ? $INF : $row->{run_at},
			versions => DurableModel::versions_parse($row->{versions}), partition => $row->{partition_key},
			stop_code => $row->{stop_code}, reason => $row->{reason}, steps => {} };
		$o->{steps}{ $row->{step} } = { state => $row->{step_state}, version => $row->{step_version},
			attempt => $row->{step_attempt}, receipt => $row->{receipt} }
		  if defined $row->{step};
	}
	return (\%o, $now // $r->{t1});
}

my %pending;    # task id => [candidate tasks] after the last operation
my @require_changed;    # task ids whose fence must have moved (a 55U01 by recovery)

sub observe
{
	my ($opdesc) = @_;
	# everything the observer reads comes from one snapshot
	$OBS->begin_work;
	$OBS->do('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
	my $ok = observe_in($opdesc);
	$OBS->commit if $OBS->ping;
	$OBS = connect_db() unless $OBS->ping;
	return $ok;
}

sub observe_in
{
	my ($opdesc) = @_;
	my $read_at = time;
	my ($obs, $now) = read_tasks($OBS);
	return 1 unless $obs;    # the server is away; the next operation finds out
	# the tasks as the last observation saw them were before then: a
	# review that changed one came after
	my $locked = locked_tasks();
	my %ids = map { $_ => 1 } keys %{ $M->{tasks} }, keys %$obs, keys %pending;
	my $ok = 1;
	for my $tid (sort { $a <=> $b } keys %ids)
	{
		my $o = $obs->{$tid};
		my $t = $M->{tasks}{$tid};
		if (!$o)
		{
			next if !$t && $pending{$tid};    # an enqueue that did not commit
			$ok = violation('observe', 'task vanished', T($tid) . ' is gone from durable.tasks');
			next;
		}
		my @cands = $pending{$tid} ? @{ $pending{$tid} } : ($t ? ($t) : ());
		if (!@cands)
		{
			$ok = violation('observe', 'task appeared', T($tid) . " appeared ($o->{state}) without an enqueue");
			next;
		}
		my ($match, @why);
		for my $c (@cands)
		{
			my @d = DurableModel::diff_task($c, $o);
			if (!@d) { $match = $c; last }
			push @why, join('; ', @d);
		}
		# nobody asked, but an expired lease may have been settled by the
		# reconciler or a claim: then it must be what the recovery table says
		if (!$match)
		{
			for my $c (@cands)
			{
				next unless $c->{state} eq 'running'
				  && DurableModel::expired($c, $c->{lease_until}, $now) != 0;
				my ($action, $r) = DurableModel::recover($M, $c, $c->{lease_until}, $now);
				my @d = DurableModel::diff_task($r, $o);
				if (!@d)
				{
					$match = $r;
					$stats{implicit}++;
					$stats{decisions}++;
					if ($locked->{$tid})
					{
						$ok = violation('observe', 'recovered while a writer holds it',
							T($tid) . ' was settled (' . DurableModel::show($action) . ") while session s$locked->{$tid} "
							  . 'has an open transaction that wrote under its fence');
					}
					last;
				}
				push @why, 'if its expired lease was settled (' . DurableModel::show($action) . '): ' . join('; ', @d);
			}
		}
		# nor did anybody ask for a review of a task no worker runs the
		# versions of (docs/design.md section 15): the reconciler's tick may send a
		# ready task there, but not while a worker that runs them claims
		if (!$match && $o->{state} eq 'needs_review' && ($o->{stop_code} // '') eq 'version_unavailable')
		{
			for my $b (map { bases_of($_, $now) } @cands)
			{
				my $r = reviewed_task($b);
				my @d = DurableModel::diff_task($r, $o);
				if (@d)
				{
					push @why, 'if it was sent to review for its versions: ' . join('; ', @d);
					next;
				}
				$match = $r;
				$stats{version_reviews}++;
				# (the observer's now() is taken a moment before its snapshot)
				if (my $why = review_complaint($b, $now + 0.05, $PREV_OBS, $TICK_MARGIN))
				{
					$ok = violation('versions', 'sent to review for versions no worker runs, which the contract forbids',
						T($tid) . " went to review for versions no worker runs after [$opdesc], but $why");
				}
				elsif ($locked->{$tid})
				{
					$ok = violation('observe', 'reviewed while a writer holds it',
						T($tid) . " went to review for its versions while session s$locked->{$tid} has an open transaction that wrote it");
				}
				last;
			}
		}
		if (!$match)
		{
			# several steps in doubt before: the family of issue 11's first item
			my $several = grep { DurableModel::steps_in_doubt($_) >= 2 } @cands, ($t ? ($t) : ());
			$ok = violation($several ? 'doubt' : 'observe', 'state not allowed',
				T($tid) . " after [$opdesc]: " . join(' / or / ', @why));
			next;
		}
		my $n = dclone($match);
		DurableModel::adopt($n, $o);
		$M->{tasks}{$tid} = $n;
		if (my @d = DurableModel::released_in_doubt($o))
		{
			$ok = violation('invariant', "$o->{state} with a step in doubt",
				T($tid) . " is $o->{state} while step(s) " . join(', ', map { "$_ $o->{steps}{$_}{state}" } @d)
				  . ' are in doubt');
		}
	}
	for my $tid (@require_changed)
	{
		my $t = $M->{tasks}{$tid};
		next unless $t;
		if ($t->{state} eq 'running' && $t->{fence} == $t->{_fence_before})
		{
			$ok = violation('fence', 'current fence refused',
				T($tid) . " refused a write with 55U01 under its current fence $t->{fence}, and nobody took over");
		}
	}
	@require_changed = ();
	%pending = ();
	$PREV_OBS = $read_at;
	# the outbox: nothing published without an ack, fences move forward
	my $ob = run_sql($OBS, q{
		SELECT message_id, fence, published_at IS NOT NULL AS published,
		       extract(epoch FROM lease_until)::float8 AS lease_until
		FROM durable.outbox});
	if (!$ob->{err})
	{
		for my $row (@{ $ob->{rows} })
		{
			my $m = $M->{outbox}{ $row->{message_id} } or next;
			if ($row->{published} && !$m->{published})
			{
				$ok = violation('outbox', 'published without ack', "message $row->{message_id} is published, nobody acknowledged it");
			}
			elsif (!$row->{published} && $m->{published})
			{
				$ok = violation('outbox', 'ack lost', "message $row->{message_id} was acknowledged but is not published");
			}
			if ($row->{fence} != $m->{fence})
			{
				# a lease that ran out may be revoked by the reconciler
				if ($row->{fence} < $m->{fence} || $m->{published}
					|| !defined $m->{lease_until} || $m->{lease_until} > $ob->{t1} + $EPS)
				{
					$ok = violation('outbox', 'fence moved',
						"message $row->{message_id}: fence $m->{fence} became $row->{fence}");
				}
				$m->{fence} = $row->{fence};
				$m->{lease_until} = $row->{lease_until};
			}
		}
	}
	my $v = run_sql($OBS, 'SELECT task_id, problem FROM durable_verify()');
	if (!$v->{err} && @{ $v->{rows} })
	{
		$ok = violation('verify', 'durable_verify() reports',
			join('; ', map { T($_->{task_id}) . ": $_->{problem}" } @{ $v->{rows} }));
	}
	return $ok;
}

# a transaction's own view of its task (its uncommitted writes included)
sub observe_txn
{
	my ($s, $opdesc) = @_;
	my $tx = $s->{txn};
	my ($obs, $now) = read_tasks($s->{dbh}, $tx->{tid});
	return 1 unless $obs;
	my $o = $obs->{ $tx->{tid} } or return violation('observe', 'task vanished', 'in a transaction');
	my @cands = @{ $tx->{pending} // [ $tx->{copy} ] };
	my @why;
	for my $c (@cands)
	{
		my @d = DurableModel::diff_task($c, $o);
		if (!@d)
		{
			my $n = dclone($c);
			DurableModel::adopt($n, $o);
			$tx->{copy} = $n;
			$tx->{pending} = undef;
			return 1;
		}
		push @why, join('; ', @d);
	}
	$tx->{pending} = undef;
	return violation('observe', 'state not allowed (in its transaction)',
		T($tx->{tid}) . " after [$opdesc], seen by its own transaction: " . join(' / or / ', @why));
}

#
# Expectations.  An operation yields alternatives, each
#   { err => SQLSTATE or undef, desc, check => sub(result) -> complaint or undef,
#     apply => sub(result) -> { task id => [candidate tasks] } }
# The server's answer must match one; its candidates are then checked
# against what the server shows.
#
sub ok_alt { my (%a) = @_; return { err => undef, %a } }
sub err_alt { my ($code, $desc, %a) = @_; return { err => $code, desc => $desc, %a } }

# a fenced write on task $t with $fence; $ok gives the alternatives when the
# fence holds; $w is the [lo, hi] window of the server's now()
our $OP_T1;    # when the operation's statement returned
sub fenced
{
	my ($t, $fence, $w, $ok) = @_;
	if (!$t || $t->{state} ne 'running' || $t->{fence} != $fence)
	{
		return (err_alt('55U01', 'stale fence', stale => 1));
	}
	my @alts = $ok->();
	# the lease ran out: someone may have taken the task over first
	if ($t->{lease_until} < $OP_T1 + $EPS)
	{
		push @alts, err_alt('55U01', 'taken over after its lease ran out', taken => $t->{id});
	}
	return @alts;
}

# the same task with changes, as a candidate
sub with
{
	my ($t, $f) = @_;
	my $c = dclone($t);
	$f->($c);
	return $c;
}

#
# The operations.  Each is {kind, s (session index), r (random numbers)}:
# what it acts on is chosen when it runs, from the model, so that a
# sequence with operations dropped still runs.
#
my @KINDS = (
	[ enqueue => 9 ], [ claim => 8 ], [ heartbeat => 3 ], [ step_plan => 12 ],
	[ step_start => 12 ], [ step_commit => 4 ], [ step_unknown => 3 ], [ step_receipt => 4 ],
	[ step_fail => 4 ], [ fail => 3 ], [ commit => 3 ], [ reconcile => 4 ],
	[ claim_reconcile => 3 ], [ handler_receipt => 4 ], [ resolve => 4 ], [ cancel => 1 ],
	[ replay => 2 ], [ pause => 0.5 ], [ resume => 1 ], [ outbox_emit => 2 ],
	[ outbox_claim => 2 ], [ outbox_ack => 2 ], [ key_begin => 3 ], [ key_advance => 2 ],
	[ key_finish => 2 ], [ inbox => 1 ], [ decide => 2 ], [ bad_input => 1 ], [ foreign => 1.5 ], [ sleep => 4 ],
	[ begin => 2 ], [ terminate => 0.4 ], [ sigkill => 0.15 ], [ restart => 0.1 ],
	[ settings => 1.5 ], [ alter_queue => 0.7 ], [ reconciler_settings => 0.3 ],
	[ database_settings => 0.2 ], [ deploy => 2 ], [ migrate => 2 ], [ migrate_queue => 1 ],
	[ quarantine => 1.5 ], [ hold => 1.5 ], [ debounce => 1.5 ]);

# Settings a session, a role or a database owner may choose, none of which
# may change what durable computes (docs/design.md section 7).  extra_float_digits
# stays positive: the driver reads epochs as floats.
my @DATESTYLES = ('ISO, MDY', 'SQL, DMY', 'SQL, MDY', 'Postgres, DMY', 'German', 'ISO, DMY');
my @TIMEZONES = ('UTC', 'Europe/Lisbon', 'Asia/Kolkata', 'Asia/Shanghai', 'Europe/Dublin',
	'America/St_Johns', 'XYZ-3', 'Pacific/Chatham');
my @INTERVALSTYLES = qw(postgres sql_standard iso_8601 postgres_verbose);
my @SEARCH_PATHS = ('"$user", public', 'model_hostile, public', 'public, pg_catalog');
my $WSUM = 0;
$WSUM += $_->[1] for @KINDS;

sub gen_op
{
	my $x = rand($WSUM);
	my $kind;
	for my $k (@KINDS) { $kind = $k->[0]; last if ($x -= $k->[1]) < 0 }
	return { kind => $kind, s => int(rand($NSESS)), r => [ map { int(rand(2**31)) } 1 .. 6 ] };
}

sub op_string
{
	my ($op) = @_;
	return "{kind => '$op->{kind}', s => $op->{s}, r => [" . join(',', @{ $op->{r} }) . ']}';
}

my @CLASSES = qw(pure idempotent queryable unsafe queryable);    # look-ups are rarer than they should be otherwise
my @STEPS = qw(a b c d);

# the handle a session acts with: mostly its newest, sometimes an older one
# (a stale fence, or a current one for a task it still holds), sometimes a
# fence nobody was given
sub handle_for
{
	my ($s, $r, $kind) = @_;
	my @h = grep { $_->{kind} eq $kind } @{ $s->{handles} };
	return undef unless @h;
	my $x = $r % 100;
	return { %{ $h[0] } } if $x < 80 || @h == 1 && $x < 95;
	return { %{ $h[ 1 + $r % (@h - 1) ] } } if $x < 95;
	my $t = $M->{tasks}{ $h[0]{tid} };
	return { %{ $h[0] }, fence => ($t ? $t->{fence} : $h[0]{fence}) + 1, forged => 1 };
}

sub choose_step
{
	my ($t, $r, @prefer) = @_;
	my %p = map { $_ => 1 } @prefer;
	my @names = sort keys %{ $t->{steps} };
	my @good = grep { $p{ $t->{steps}{$_}{state} } } @names;
	my $x = $r % 100;
	return pick(\@good, $r >> 7) if @good && $x < 80;
	return pick([ grep { !$t->{steps}{$_} } @STEPS ], $r >> 7) // 'a' if $x >= 95;
	return pick(\@names, $r >> 7) // pick(\@STEPS, $r >> 7);
}

sub interval { my ($sec) = @_; return sprintf('%.3f seconds', $sec) }

# A receipt for an UNKNOWN step settles it through the recovery table
# (README, durable_record_receipt): 'not_executed' makes the attempt retry
# safe, and then the step's attempts meet the budget.
sub settle_unknown
{
	my ($t, $name, $receipt) = @_;
	my $st = $t->{steps}{$name};
	my $act = DurableModel::recovery_action(1, $receipt, $st->{class}, $st->{attempt}, $t->{max_attempts});
	my $c = with($t, sub {
		my $x = $_[0]{steps}{$name};
		$x->{receipt} = $receipt;
		$x->{state} = { record_completion => 'committed', record_failure => 'failed',
			retry_same_activity => 'planned', exhausted => [qw(failed unknown planned)] }->{$act};
	});
	return ($c, $act);
}

# window of the server's now() for a statement: the transaction's start
sub window
{
	my ($s, $res) = @_;
	return $s->{txn}{w} if $s && $s->{txn};
	return [ $res->{t0}, $res->{t1} ];
}

my %RETURN = (now => 1);

# Run one operation: resolve it, run it, judge the answer, observe.
# Returns its description; failures land in @failures.
sub execute
{
	my ($op) = @_;
	my $s = $S[ $op->{s} % @S ];
	my @r = @{ $op->{r} };
	my $kind = $op->{kind};
	my $tx = $s->{txn};
	delete $op->{_seen};
	if ($kind eq 'hold')
	{
		$op->{_kind} = $HOLD{open} ? 'hold_release' : 'hold';
		return hold_op($op);
	}

	# a session inside a transaction: its task's operations, or the end
	my %in_txn = map { $_ => 1 } qw(heartbeat step_plan step_start step_commit step_unknown
	  step_receipt step_fail fail commit);
	if ($tx && !$in_txn{$kind})
	{
		my $x = $r[5] % 10;
		$kind = $x < 5 ? 'txn_commit' : $x < 8 ? 'txn_rollback' : 'terminate';
	}
	# a worker without a task it holds mostly claims one first; a task
	# without steps mostly plans one
	if (!$tx && $in_txn{$kind})
	{
		my ($h) = grep { $_->{kind} eq 'worker' } @{ $s->{handles} };
		my $t = $h ? $M->{tasks}{ $h->{tid} } : undef;
		if (!$t || $t->{state} ne 'running' || $t->{fence} != $h->{fence})
		{
			$kind = 'claim' if $r[5] % 100 < 70;
		}
		elsif ($kind =~ /^step_(start|commit|unknown|receipt|fail)$/ && !%{ $t->{steps} } && $r[5] % 100 < 70)
		{
			$kind = 'step_plan';
		}
	}
	# a reconcile handler with nothing to look up asks for work first
	if ($kind eq 'handler_receipt')
	{
		my ($h) = grep { $_->{kind} eq 'handler' } @{ $s->{handles} };
		my $t = $h ? $M->{tasks}{ $h->{tid} } : undef;
		$kind = 'claim_reconcile'
		  if (!$t || $t->{state} ne 'running' || $t->{fence} != $h->{fence}) && $r[5] % 100 < 70;
	}
	$op->{_kind} = $kind;

	my ($sql, @binds, @alts, $desc, $after);
	my $sid = "s$s->{id}";

	if ($kind eq 'sleep')
	{
		my $d = 0.05 + ($r[0] % 750) / 1000;
		sleep $d;
		$desc = sprintf('sleep %.2f s', $d);
		observe($desc);
		return $desc;
	}
	if ($kind eq 'begin')
	{
		return undef if $tx;
		my $h = handle_for($s, $r[0], 'worker') or return undef;
		my $t = $M->{tasks}{ $h->{tid} } or return undef;
		return undef if busy_tasks()->{ $h->{tid} };
		my $t0 = time;
		$s->{dbh}->begin_work;
		$s->{dbh}->do('SELECT 1');
		$s->{txn} = { tid => $h->{tid}, handle => $h, wrote => 0, w => [ $t0, time ],
			copy => dclone($t), base => "$t->{state}/$t->{fence}" };
		$desc = "$sid BEGIN (for " . T($h->{tid}) . " fence $h->{fence})";
		return $desc;
	}
	if ($kind eq 'txn_commit' || $kind eq 'txn_rollback')
	{
		my $tid = $tx->{tid};
		if ($kind eq 'txn_commit')
		{
			my $ok = $s->{dbh}->commit;
			$desc = "$sid COMMIT";
			if ($ok)
			{
				$pending{$tid} = [ $tx->{copy} ] if $tx->{wrote};
			}
			else
			{
				my $st = $s->{dbh}->state;
				session_lost($s) unless $s->{dbh}->ping;
				violation('commit', 'COMMIT failed', "$sid COMMIT failed: $st") unless $DRIVER_CODES{$st};
			}
		}
		else
		{
			$s->{dbh}->rollback;
			$desc = "$sid ROLLBACK";
		}
		$s->{txn} = undef;
		observe($desc);
		return $desc;
	}
	if ($kind eq 'terminate')
	{
		# the client goes away in the middle of its transaction (or not)
		run_sql($OBS, 'SELECT pg_terminate_backend(?)', $s->{pid});
		$stats{kills}++;
		session_lost($s);
		$desc = "$sid killed (its backend terminated" . ($tx ? ', transaction open)' : ')');
		observe($desc);
		return $desc;
	}
	if ($kind eq 'reconciler_settings' || $kind eq 'database_settings')
	{
		# an operator reloads the reconciler's settings, or a database owner
		# sets hostile defaults for the database and the reconciler starts
		# again under them: nothing the model allows changes
		if ($kind eq 'reconciler_settings')
		{
			my $batch = pick([ 1, 3, 1000 ], $r[0]);
			my $interval = pick([ '50ms', '1s', '3s' ], $r[1]);
			my $enabled = $r[2] % 4 && !$RECONCILER_OFF ? 'on' : 'off';
			$OBS->do("ALTER SYSTEM SET durable.reconcile_batch = $batch");
			$OBS->do("ALTER SYSTEM SET durable.reconcile_interval = '$interval'");
			$OBS->do("ALTER SYSTEM SET durable.reconciler_enabled = $enabled");
			$OBS->do('SELECT pg_reload_conf()');
			$desc = "reconciler batch $batch, interval $interval, enabled $enabled";
		}
		else
		{
			my $ds = pick(\@DATESTYLES, $r[0]);
			my $tz = pick(\@TIMEZONES, $r[1]);
			my $is = pick(\@INTERVALSTYLES, $r[2]);
			$OBS->do("ALTER DATABASE postgres SET DateStyle = '$ds'");
			$OBS->do("ALTER DATABASE postgres SET TimeZone = '$tz'");
			$OBS->do("ALTER DATABASE postgres SET IntervalStyle = '$is'");
			$OBS->do(q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			           WHERE backend_type = 'durable reconciler'});
			$desc = "database settings DateStyle '$ds', TimeZone '$tz', IntervalStyle '$is'; reconciler restarted";
		}
		$stats{settings}++;
		observe($desc);
		return $desc;
	}
	if ($kind eq 'sigkill' || $kind eq 'restart')
	{
		if ($kind eq 'sigkill')
		{
			kill 'KILL', $s->{pid};
			$stats{crashes}++;
			$desc = "$sid backend SIGKILL (the server restarts every backend)";
			sleep 0.3;
		}
		else
		{
			$node->stop('immediate');
			$node->start;
			$stats{restarts}++;
			$desc = 'server shut down immediately and started';
		}
		$_->{dbh}->{InactiveDestroy} = 1 for @S;
		reconnect_all();
		observe($desc);
		return $desc;
	}

	# the worker's own task operations
	if ($in_txn{$kind})
	{
		my $h = $tx ? $tx->{handle} : handle_for($s, $r[0], 'worker');
		return undef unless $h;
		my $tid = $h->{tid};
		return undef if !$tx && busy_tasks()->{$tid};
		my $t = task_for($s, $tid);
		return undef unless $t;
		my $f = $h->{fence};
		my $ft = T($tid) . " fence $f" . ($h->{forged} ? ' (forged)' : '');
		if ($tx && $tx->{base} ne "$M->{tasks}{$tid}{state}/$M->{tasks}{$tid}{fence}" && !$tx->{wrote})
		{
			# taken over between BEGIN and now: its copy is stale
			$t = $M->{tasks}{$tid};
		}
		my $q = $M->{queues}{ $t->{queue} };
		my $wlater;    # set once the window is known
		if ($kind eq 'heartbeat')
		{
			my $lease = (3 + $r[1] % 12) / 10;
			$sql = 'SELECT extract(epoch FROM now())::float8 AS now,
			        extract(epoch FROM durable_heartbeat(?, ?, progress => ?, lease => ?::interval))::float8 AS v';
			@binds = ($tid, $f, 'p' . ($r[2] % 3), interval($lease));
			$desc = "$sid heartbeat $ft lease $lease s";
			@alts = sub {
				my ($w) = @_;
				return fenced($t, $f, $w, sub {
					ok_alt(desc => 'lease extended',
						check => sub {
							my ($res) = @_;
							my $v = $res->{rows}[0]{v};
							return "lease_until " . DurableModel::show($v) . " is not now() + $lease s"
							  unless abs($v - $res->{rows}[0]{now} - $lease) < 0.002;
							return undef;
						},
						apply => sub {
							my ($res) = @_;
							return { $tid => [ with($t, sub { $_[0]{lease_until} = $res->{rows}[0]{v} }) ] };
						})
				});
			};
		}
		elsif ($kind eq 'step_plan')
		{
			my $name = choose_step($t, $r[1], 'none');
			$name = pick([ grep { !$t->{steps}{$_} } @STEPS ], $r[2]) // $name if $r[1] % 100 < 70;
			my $st = $t->{steps}{$name};
			my $class = $st ? $st->{class} : pick(\@CLASSES, $r[3]);
			my $other = $st && $r[4] % 100 < 8;
			my $request = '{"step": "' . $name . '"' . ($other ? ', "other": true' : '') . '}';
			$sql = 'SELECT extract(epoch FROM now())::float8 AS now, state, version, attempt, idempotency_key
			        FROM durable_step(?, ?, ?, ?, ?::jsonb)';
			@binds = ($tid, $f, $name, $class, $request);
			$desc = "$sid step $ft '$name' $class" . ($other ? ' (another request)' : '');
			@alts = sub {
				my ($w) = @_;
				return fenced($t, $f, $w, sub {
					return err_alt('55U03', 'another request under the step key') if $other;
					if ($st)
					{
						return ok_alt(desc => "replay: returns the step ($st->{state})",
							check => sub {
								my ($res) = @_;
								my $row = $res->{rows}[0];
								return 'no row' unless $row;
								return "state $row->{state}, model $st->{state}" unless $row->{state} eq $st->{state};
								return "key changed from $st->{key} to $row->{idempotency_key}"
								  if $st->{key} && $row->{idempotency_key} ne $st->{key};
								return undef;
							},
							apply => sub { return {} });
					}
					return ok_alt(desc => 'planned',
						check => sub {
							my ($res) = @_;
							my $row = $res->{rows}[0];
							return 'no row' unless $row;
							return "state $row->{state}" unless $row->{state} eq 'planned';
							my $k = $row->{idempotency_key};
							my $seen = $M->{step_keys}{$k};
							return "key $k already belongs to $seen" if $seen && $seen ne "$tid/$name";
							return undef;
						},
						apply => sub {
							my ($res) = @_;
							my $row = $res->{rows}[0];
							$M->{step_keys}{ $row->{idempotency_key} } = "$tid/$name";
							return { $tid => [ with($t, sub {
								$_[0]{steps}{$name} = { class => $class, state => 'planned', attempt => 0,
									version => $row->{version}, receipt => undef,
									key => $row->{idempotency_key} };
							}) ] };
						});
				});
			};
		}
		elsif ($kind =~ /^step_(start|commit|unknown)$/)
		{
			my $what = $1;
			my %from = (start => ['planned'], commit => [ 'started', 'unknown' ], unknown => ['started']);
			my $name = choose_step($t, $r[1], @{ $from{$what} });
			my $st = $t->{steps}{$name};
			my $v = $st ? $st->{version} - ($r[2] % 100 < 8 ? 1 : 0) : 1;
			if ($what eq 'start')
			{
				$sql = 'SELECT extract(epoch FROM now())::float8 AS now, durable_step_start(?, ?, ?, ?) AS v';
				@binds = ($tid, $f, $name, $v);
			}
			elsif ($what eq 'commit')
			{
				$sql = 'SELECT extract(epoch FROM now())::float8 AS now,
				        durable_commit(?, ?, ?::jsonb, step => ?, expected_version => ?) AS v';
				@binds = ($tid, $f, '{"done": "' . $name . '"}', $name, $v);
			}
			else
			{
				$sql = 'SELECT extract(epoch FROM now())::float8 AS now, durable_step_unknown(?, ?, ?, ?, ?) AS v';
				@binds = ($tid, $f, $name, $v, 'timeout');
			}
			$desc = "$sid step_$what $ft '$name' version $v";
			@alts = sub {
				my ($w) = @_;
				return fenced($t, $f, $w, sub {
					return err_alt('42704', 'no such step') unless $st;
					my $state_ok = $what eq 'start' ? $st->{state} eq 'planned'
					  : $what eq 'unknown' ? $st->{state} eq 'started'
					  : $st->{state} eq 'started'
					  || ($st->{state} eq 'unknown' && ($st->{receipt} // '') eq 'succeeded');
					my $version_ok = $v == $st->{version};
					return err_alt([ '55U02', '55U04' ], 'wrong version and state') if !$state_ok && !$version_ok;
					return err_alt('55U04', "step is $st->{state}") unless $state_ok;
					return err_alt('55U02', "version $st->{version} expected") unless $version_ok;
					return ok_alt(desc => "step $what",
						check => sub {
							my ($res) = @_;
							return undef if $what eq 'commit';
							my $nv = $res->{rows}[0]{v};
							return "new version $nv is not above $v" unless defined $nv && $nv > $v;
							return undef;
						},
						apply => sub {
							return { $tid => [ with($t, sub {
								my $x = $_[0]{steps}{$name};
								if ($what eq 'start')
								{
									$x->{state} = 'started';
									$x->{attempt}++;
									$x->{receipt} = undef;
								}
								$x->{state} = 'committed' if $what eq 'commit';
								$x->{state} = 'unknown' if $what eq 'unknown';
							}) ] };
						});
				});
			};
		}
		elsif ($kind eq 'step_receipt')
		{
			my $name = choose_step($t, $r[1], 'started', 'unknown');
			my $st = $t->{steps}{$name};
			my $receipt = pick([qw(succeeded succeeded failed_permanent not_executed)], $r[2]);
			$sql = 'SELECT extract(epoch FROM now())::float8 AS now, durable_record_receipt(?, ?, ?, ?, ?, ?::jsonb) AS v';
			@binds = ($tid, $f, $name, $receipt, "fx-$tid-$name", '{"by": "worker"}');
			$desc = "$sid record_receipt $ft '$name' $receipt";
			@alts = sub {
				my ($w) = @_;
				return fenced($t, $f, $w, sub {
					return err_alt('42704', 'no such step') unless $st;
					return err_alt('55U04', "step is $st->{state}")
					  unless $st->{state} eq 'started' || $st->{state} eq 'unknown';
					if ($st->{state} eq 'started')
					{
						return ok_alt(desc => 'receipt kept for recovery',
							apply => sub {
								return { $tid => [ with($t, sub {
									my $x = $_[0]{steps}{$name};
									if ($receipt eq 'not_executed') { $x->{state} = 'planned'; $x->{receipt} = undef }
									else { $x->{receipt} = $receipt }
								}) ] };
							});
					}
					return ok_alt(desc => 'receipt settles the unknown step',
						apply => sub {
							my ($c, $act) = settle_unknown($t, $name, $receipt);
							my @c = ($c);
							push @c, with($c, sub { $_[0]{state} = 'failed'; $_[0]{fence} = [ $f, $f + 1 ] })
							  if $act eq 'record_failure' || $act eq 'exhausted';
							return { $tid => \@c };
						});
				});
			};
		}
		elsif ($kind eq 'step_fail' || $kind eq 'fail')
		{
			my $class = pick([qw(transient transient transient permanent unknown bogus)], $r[1]);
			my $ra = $r[2] % 100 < 20 ? 2 : undef;
			my $name = $kind eq 'step_fail' ? choose_step($t, $r[3], 'started') : undef;
			my $st = defined $name ? $t->{steps}{$name} : undef;
			$sql = 'SELECT extract(epoch FROM now())::float8 AS now,
			        durable_fail(?, ?, ?, ?::jsonb, retry_after => ?::interval, step => ?) AS v';
			@binds = ($tid, $f, $class, '{"e": 1}', defined $ra ? interval($ra) : undef, $name);
			$desc = "$sid fail $ft $class" . (defined $ra ? " retry_after $ra s" : '')
			  . (defined $name ? " step '$name'" : '');
			@alts = sub {
				my ($w) = @_;
				# a bad argument may be refused before the fence is looked at
				return err_alt([ '22023', '55U01' ], 'unknown error class') if $class eq 'bogus';
				return fenced($t, $f, $w, sub {
					my @doubt = DurableModel::steps_in_doubt($t);
					if (!defined $name)
					{
						return err_alt('55U04', 'a step is in doubt') if @doubt;
					}
					else
					{
						return err_alt('42704', 'no such step') unless $st;
						return err_alt('55U04', "step is $st->{state}") unless $st->{state} eq 'started';
					}
					my $attempts = $st ? $st->{attempt} : $t->{attempt};
					my $d = DurableModel::next_action($attempts, $t->{max_attempts}, $class);
					my @others = grep { !defined $name || $_ ne $name } @doubt;
					my $check = sub {
						my ($res) = @_;
						my $v = $res->{rows}[0]{v} // 'null';
						return "decision $v, the budget gives $d" unless $v eq $d;
						return undef;
					};
					my $delay = defined $ra && $ra > 1 ? $ra : 1;
					my $apply = defined $name ? sub {
						my ($res) = @_;
						my ($action, $c) = DurableModel::fail_step($M, $t, $name, $d, $res->{rows}[0]{now}, $delay);
						$c->{fence} = [ $f, $f + 1 ];
						# another step failed before (a receipt): the task cannot be
						# completed, and the contract does not say whether giving it
						# up retries it or fails it
						my @c = ($c);
						push @c, with($c, sub { $_[0]{state} = 'failed' })
						  if grep { $_ ne $name && $t->{steps}{$_}{state} eq 'failed' } keys %{ $t->{steps} };
						return { $tid => \@c };
					} : sub {
						my ($res) = @_;
						my $now = $res->{rows}[0]{now};
						my $c = with($t, sub {
							my $x = $_[0];
							$x->{fence} = [ $f, $f + 1 ];
							my $sx = defined $name ? $x->{steps}{$name} : undef;
							if ($d eq 'schedule_retry')
							{
								$sx->{state} = 'planned' if $sx;
								$sx->{receipt} = undef if $sx;
								$x->{state} = 'waiting';
								$x->{run_at} = { min => $now + $delay, max => $q->{capacity} ? $INF : $now + $delay };
							}
							elsif ($d eq 'manual_review')
							{
								$sx->{state} = 'unknown' if $sx;
								$x->{state} = 'needs_review';
							}
							else
							{
								$sx->{state} = 'failed' if $sx;
								$x->{state} = 'failed';
							}
						});
						return { $tid => [$c] };
					};
					return ok_alt(desc => $d, check => $check, apply => $apply);
				});
			};
		}
		elsif ($kind eq 'commit')
		{
			$sql = 'SELECT extract(epoch FROM now())::float8 AS now, durable_commit(?, ?, ?::jsonb) AS v';
			@binds = ($tid, $f, '{"ok": true}');
			$desc = "$sid commit $ft";
			@alts = sub {
				my ($w) = @_;
				return fenced($t, $f, $w, sub {
					return err_alt('55U04', 'a step is in doubt') if DurableModel::steps_in_doubt($t);
					return ok_alt(desc => 'completed',
						apply => sub {
							return { $tid => [ with($t, sub { $_[0]{state} = 'completed'; $_[0]{fence} = [ $f, $f + 1 ] }) ] };
						});
				});
			};
		}
		$after = sub {
			my ($res, $alt) = @_;
			# a write locks the task until the transaction ends
			$tx->{wrote} = 1 if $tx && !$alt->{err} && !($kind eq 'step_plan' && $alt->{desc} ne 'planned');
			$stats{stale_rejected}++ if $alt->{err} && $alt->{err} eq '55U01';
			if ($alt->{taken})
			{
				$M->{tasks}{$tid}{_fence_before} = $M->{tasks}{$tid}{fence};
				push @require_changed, $tid;
			}
		};
	}
	elsif ($kind eq 'enqueue')
	{
		my $queue = pick([qw(q1 q1 q2 q3 q3)], $r[0]);
		my $class = pick([qw(idempotent idempotent pure unsafe queryable)], $r[1]);
		my $max = pick([ undef, undef, 1, 2, 3 ], $r[2]);
		my $key = $r[3] % 100 < 25 ? 'e' . ($r[3] % 4) : undef;
		my $payload = '{"p": ' . ($key ? $r[4] % 100 < 85 ? 0 : 1 : $r[4] % 1000) . '}';
		# pinned to a workflow version at enqueue, mostly one deployed, in q3
		# often one that is not (a producer ahead of the deploy, or behind);
		# a key's task always to the same
		my $x = $r[5] % 100;
		my @undeployed = grep { my $v = $_; !grep { $_ eq $v } @{ $M->{deployed}{workflow} } } @WORKFLOWS;
		my $wv = $key ? { e1 => '1', e2 => '2' }->{$key}
		  : $x < ($queue eq 'q3' ? 55 : 25) ? pick($M->{deployed}{workflow}, $r[5] >> 7)
		  : $x >= 75 && $queue eq 'q3' ? pick(\@undeployed, $r[5] >> 7)
		  : $x >= 90 ? pick(\@WORKFLOWS, $r[5] >> 7) : undef;
		# q2 is fair (docs/design.md section 16): its tasks mostly name one of
		# three tenants, which changes the order its claims take them in,
		# never whether a task may be claimed
		my $fkey = $queue eq 'q2' && ($r[4] >> 12) % 100 < 60 ? 't' . (($r[4] >> 20) % 3) : undef;
		$stats{fair_enqueues}++ if $fkey;
		# and name rate limits: the queue's, and their tenant's
		my %limits;
		$limits{model_rate} = 1 if $queue eq 'q2' && ($r[4] >> 8) % 100 < 40;
		$limits{"model_tenant:$fkey"} = 1 if $fkey && ($r[4] >> 16) % 100 < 50;
		my $limits = %limits ? '{' . join(', ', map { qq{"$_": $limits{$_}} } sort keys %limits) . '}' : undef;
		$stats{rate_limited_enqueues}++ if $limits;
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now,
		        durable_enqueue(?, ?::jsonb, idempotency_key => ?, class => ?, max_attempts => ?,
		                        workflow_version => ?, fairness_key => ?, rate_limits => ?::jsonb) AS v';
		@binds = ($queue, $payload, $key, $class, $max, $wv, $fkey, $limits);
		$desc = "$sid enqueue $queue $class max_attempts " . ($max // 'default')
		  . ($key ? " key $key $payload" : '') . (defined $wv ? " workflow_version $wv" : '')
		  . ($fkey ? " fairness key $fkey" : '') . ($limits ? " rate limits $limits" : '');
		my $known = $key ? $M->{enqueue_keys}{"$queue/$key"} : undef;
		@alts = sub {
			if ($known && $known->{payload} ne $payload)
			{
				return err_alt('55U03', "key $key was used with another payload");
			}
			if ($known)
			{
				return ok_alt(desc => 'the first task',
					check => sub {
						my $v = $_[0]{rows}[0]{v};
						return "task id $v, the key's task is $known->{tid}" unless $v == $known->{tid};
						return undef;
					},
					apply => sub { return {} });
			}
			return ok_alt(desc => 'a new task',
				check => sub {
					my $v = $_[0]{rows}[0]{v};
					return "task id $v was handed out before" if $M->{tasks}{$v};
					return undef;
				},
				apply => sub {
					my ($res) = @_;
					my $v = $res->{rows}[0]{v};
					T($v);
					$M->{enqueue_keys}{"$queue/$key"} = { tid => $v, payload => $payload } if $key;
					return { $v => [ { id => $v, queue => $queue, class => $class,
						max_attempts => $max // $M->{queues}{$queue}{max_attempts},
						state => 'ready', fence => 0, attempt => 0, steps => {},
						versions => defined $wv ? { workflow => $wv } : undef, due_since => $res->{t0},
						limits => {%limits} } ] };
				});
		};
	}
	elsif ($kind eq 'debounce')
	{
		# a debounce key's calls (docs/design.md section 16, items 1-2): one
		# task while it was never claimed, under crashes and kills as any;
		# when it runs is the waits model's (test/t/014) to check
		my $queue = pick([qw(q1 q2)], $r[0]);
		my $key = 'd' . ($r[1] % 3);
		my $delay = ($r[2] % 6) / 10;
		my $max_wait = $r[3] % 100 < 50 ? 1 : undef;
		my $known = $M->{debounced}{"$queue/$key"};
		my $kt = defined $known ? $M->{tasks}{$known} : undef;
		my $coalesces = $kt && $kt->{state} eq 'ready' && $kt->{fence} == 0;
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now,
		        durable_debounce(?, ?, ?::jsonb, make_interval(secs => ?),
		                         CASE WHEN ?::float8 IS NOT NULL THEN make_interval(secs => ?) END) AS v';
		@binds = ($queue, $key, '{"p": ' . ($r[4] % 1000) . '}', $delay, $max_wait, $max_wait);
		$desc = "$sid debounce $queue $key delay $delay s max_wait " . ($max_wait // '-');
		@alts = sub {
			if ($coalesces)
			{
				return ok_alt(desc => 'the key\'s task, never claimed',
					check => sub {
						my $v = $_[0]{rows}[0]{v};
						return "task id $v, the key's task is $known" unless $v == $known;
						return undef;
					},
					apply => sub { $stats{debounces_coalesced}++; return {} });
			}
			return ok_alt(desc => 'a new task',
				check => sub {
					my $v = $_[0]{rows}[0]{v};
					return "task id $v was handed out before" if $M->{tasks}{$v};
					return undef;
				},
				apply => sub {
					my ($res) = @_;
					my $v = $res->{rows}[0]{v};
					T($v);
					$M->{debounced}{"$queue/$key"} = $v;
					$stats{debounces_made}++;
					return { $v => [ { id => $v, queue => $queue, class => 'idempotent',
						max_attempts => $M->{queues}{$queue}{max_attempts},
						state => 'ready', fence => 0, attempt => 0, steps => {},
						versions => undef, due_since => $res->{t0}, limits => {} } ] };
				});
		};
	}
	elsif ($kind eq 'claim')
	{
		my $queue = pick([qw(q1 q1 q2 q3 q3)], $r[0]);
		my $lease = (3 + $r[1] % 12) / 10;
		my $batch = $r[2] % 100 < 80 ? 1 : 2;
		# a worker that says what versions it runs (docs/design.md section 15): in
		# q3, whose tasks go to review when no worker runs them, nearly
		# every worker does
		my $runs = $r[3] % 100 < ($queue eq 'q3' ? 96 : 35) ? draw_runs($r[4]) : undef;
		my $worker = worker_name($s, $runs);
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now, c.task_id, c.fence,
		        extract(epoch FROM c.lease_until)::float8 AS lease_until, c.attempt, c.versions::text AS versions
		        FROM (SELECT 1) x LEFT JOIN LATERAL durable_claim(?, ?, lease => ?::interval, batch => ?,
		                                                          versions => ?::jsonb) c ON true
		        LEFT JOIN LATERAL (SELECT durable_begin(c.task_id, c.fence)
		                           WHERE c.task_id IS NOT NULL) begun ON true';
		@binds = ($queue, $worker, interval($lease), $batch, $runs ? DurableModel::versions_json($runs) : undef);
		$desc = "$sid claim $queue lease $lease s batch $batch" . ($runs ? ' running ' . VS($runs) : '');
		$stats{claims}++;
		$stats{claims_with_versions}++ if $runs;
		# the row of durable.workers_seen it writes, unless its backend wrote
		# the same less than a second ago
		$op->{_seen} = { queue => $queue, worker => $worker, runs => $runs, key => "$s->{pid}/$queue/$worker" };
		@alts = sub {
			my ($w) = @_;
			return ok_alt(desc => 'claimable tasks, or nothing',
				check => sub {
					my ($res) = @_;
					my @rows = grep { defined $_->{task_id} } @{ $res->{rows} };
					my $now = $res->{rows}[0]{now};
					return 'more tasks than the batch' if @rows > $batch;
					my %seen;
					for my $row (@rows)
					{
						my $t = $M->{tasks}{ $row->{task_id} };
						return "handed out $row->{task_id}, which the model does not know" unless $t;
						return 'the same task twice' if $seen{ $row->{task_id} }++;
						return "the queue $queue is paused" if $M->{queues}{$queue}{paused};
						return T($t->{id}) . " of queue $t->{queue}" if $t->{queue} ne $queue;
						my $base = $t;
						my $c = DurableModel::claimable($M, $t, $now, $now);
						if ($c == 0 && DurableModel::expired($t, $now, $now) != 0)
						{
							# settled on the way, and what it settled to may be claimed
							my ($action, $rt) = DurableModel::recover($M, $t, $t->{lease_until}, $now);
							if (ref $rt->{state} ? grep { $_ eq 'ready' } @{ $rt->{state} } : $rt->{state} eq 'ready')
							{
								$c = 1;
								$base = with($rt, sub { $_[0]{fence} = $t->{fence} + 1 });
							}
						}
						# a worker is handed only tasks whose pinned versions it runs
						return 'handed out ' . T($t->{id}) . ' pinned to ' . VS($t->{versions})
						  . ' to a worker that runs ' . VS($runs)
						  if $runs && !DurableModel::versions_run($base->{versions}, $runs);
						$c = DurableModel::claimable($M, $base, $now, $now, $runs) if $base != $t;
						if ($c == 0)
						{
							my @d = DurableModel::steps_in_doubt($t);
							return 'handed out ' . T($t->{id}) . " ($t->{state}"
							  . (defined $t->{run_at} ? ', run_at ' . DurableModel::show($t->{run_at}) : '')
							  . (@d ? ', steps in doubt: ' . join(',', @d) : '') . ') which may not be claimed';
						}
						return T($t->{id}) . " fence $row->{fence}, the model gives " . ($base->{fence} + 1)
						  unless $row->{fence} == $base->{fence} + 1;
						return T($t->{id}) . " attempt $row->{attempt}, the model gives " . ($base->{attempt} + 1)
						  unless $row->{attempt} == $base->{attempt} + 1;
						return T($t->{id}) . ' lease_until is not now() + lease'
						  unless abs($row->{lease_until} - $now - $lease) < 0.002;
						# it pins the names the task lacks, to the last version of
						# each list; a claim that says nothing pins nothing
						my $pin = DurableModel::versions_pin($base->{versions}, $runs);
						my $got = DurableModel::versions_parse($row->{versions});
						return T($t->{id}) . ' pinned to ' . VS($base->{versions}) . ', claimed by a worker that runs '
						  . ($runs ? VS($runs) : 'anything') . ': versions ' . VS($got) . ', the model gives ' . VS($pin)
						  unless VS($got) eq VS($pin);
						$row->{_base} = $base;
						$row->{_pin} = $pin;
					}
					return undef;
				},
				apply => sub {
					my ($res) = @_;
					my %c;
					my @rows = grep { defined $_->{task_id} } @{ $res->{rows} };
					for my $row (@rows)
					{
						my $tid = $row->{task_id};
						$c{$tid} = [ with($row->{_base}, sub {
							my $x = $_[0];
							$x->{state} = 'running';
							$x->{fence} = $row->{fence};
							$x->{attempt} = $row->{attempt};
							$x->{lease_until} = $row->{lease_until};
							$x->{run_at} = undef;
							$x->{holder} = 'worker';
							$x->{versions} = $row->{_pin};
						}) ];
						$stats{pinned_by_claim}++ if VS($row->{_pin}) ne VS($row->{_base}{versions});
						unshift @{ $s->{handles} }, { tid => $tid, fence => $row->{fence}, kind => 'worker' };
						$stats{handed_out}++;
						my $limits = $row->{_base}{limits} // {};
						push @{ $RATE_TAKES{$_} }, [ $res->{rows}[0]{now}, $limits->{$_} ] for keys %$limits;
						$stats{rate_limited_claims}++ if %$limits;
					}
					check_rate_windows($desc);
					# the newest eight of each kind (a reconcile handler's too)
					my %n;
					@{ $s->{handles} } = grep { ++$n{ $_->{kind} } <= 8 } @{ $s->{handles} };
					if (!@rows && !$M->{queues}{$queue}{paused})
					{
						my $now = $res->{rows}[0]{now};
						my $busy = busy_tasks();
						$stats{empty_claims_with_work}++
						  if grep { $_->{queue} eq $queue && !$busy->{ $_->{id} }
							  && DurableModel::claimable($M, $_, $now, $now, $runs) == 1 } values %{ $M->{tasks} };
					}
					# what the claim tells the reviews of versions: its worker's
					# last claim is now, when its backend surely recorded it
					# (it recorded none of that worker in the last second, nor
					# may have, in a claim that did not commit)
					my $now = $res->{rows}[0]{now};
					my $sn = $op->{_seen};
					my $last = $M->{recorded}{ $sn->{key} } // $M->{seen_reset};
					$last = $M->{seen_reset} if $last < $M->{seen_reset};
					my $rec = $now - $last >= $RECORD_INTERVAL + $EPS ? $now : undef;
					$M->{recorded}{ $sn->{key} } = $now if defined $rec || $now - $last > $RECORD_INTERVAL - $EPS;
					push @{ $M->{seen} }, { %$sn, now => $now, rec => $rec, t1 => $res->{t1} } if defined $rec;
					@{ $M->{seen} } = grep { $_->{now} > $now - 10 } @{ $M->{seen} };
					return \%c;
				});
		};
	}
	elsif ($kind eq 'reconcile')
	{
		# qh's tasks and its schedule's occurrences are not the model's
		$sql = q{SELECT extract(epoch FROM now())::float8 AS now, c.task_id, c.action
		        FROM (SELECT 1) x LEFT JOIN LATERAL (SELECT * FROM durable_reconcile(?) r
		         WHERE r.action <> 'scheduled' AND NOT EXISTS (SELECT FROM durable.tasks h
		          WHERE h.task_id = r.task_id AND h.queue_name = 'qh')) c ON true};
		my $batch = 1 + $r[0] % 20;
		@binds = ($batch);
		$desc = "$sid durable_reconcile($batch)";
		@alts = sub {
			my ($w) = @_;
			my %exp;
			return ok_alt(desc => 'expired leases settled by the recovery table',
				check => sub {
					my ($res) = @_;
					my $now = $res->{rows}[0]{now};
					my @rows = grep { defined $_->{task_id} } @{ $res->{rows} };
					# the batch bounds each kind of work of the tick: the expired
					# leases settled, the tasks sent to review for their versions
					my $reviews = grep { $_->{action} eq 'version_unavailable' } @rows;
					return 'more expired leases than the batch' if @rows - $reviews > $batch;
					return 'more reviews for versions than the batch' if $reviews > $batch;
					my $locked = locked_tasks();
					for my $row (@rows)
					{
						if ($row->{action} eq 'version_unavailable')
						{
							# a ready task no worker runs the versions of goes to
							# review: this call saw every claim before it
							my $t = $exp{ $row->{task_id} } ? $exp{ $row->{task_id} }[0] : $M->{tasks}{ $row->{task_id} };
							return "sent unknown task $row->{task_id} to review" unless $t;
							my ($why, $rb);
							for my $b (bases_of($t, $now))
							{
								$why = review_complaint($b, $now, $res->{t0}, 0) // ($locked->{ $t->{id} } ? 'a writer holds it' : undef);
								if (!defined $why) { $rb = $b; last }
							}
							return T($t->{id}) . " sent to review for versions no worker runs, but $why" unless $rb;
							$exp{ $t->{id} } = [ reviewed_task($rb) ];
							$stats{version_reviews}++;
							next;
						}
						$stats{decisions}++;
						my $t = $M->{tasks}{ $row->{task_id} } or return "settled unknown task $row->{task_id}";
						return 'settled ' . T($t->{id}) . " ($t->{state}), not a running task"
						  unless $t->{state} eq 'running';
						return 'settled ' . T($t->{id}) . ' whose lease runs until '
						  . DurableModel::show($t->{lease_until}) . ', now() is ' . DurableModel::show($now)
						  if DurableModel::expired($t, $now, $now) == 0;
						return 'settled ' . T($t->{id}) . ", held by session s$locked->{$t->{id}}'s open transaction"
						  if $locked->{ $t->{id} };
						my ($action, $rt) = DurableModel::recover($M, $t, $t->{lease_until}, $now);
						my @d = DurableModel::steps_in_doubt($t);
						return T($t->{id}) . ": action $row->{action}, the tables give " . DurableModel::show($action) . " (steps in doubt: "
						  . (join(', ', map { "$_ $t->{steps}{$_}{class} $t->{steps}{$_}{state} attempt $t->{steps}{$_}{attempt}"
							  . (defined $t->{steps}{$_}{receipt} ? " receipt $t->{steps}{$_}{receipt}" : '') } @d) || 'none')
						  . ", task attempt $t->{attempt} of $t->{max_attempts}, class $t->{class})"
						  unless DurableModel::matches($action, $row->{action});
						$exp{ $t->{id} } = [$rt];
					}
					return undef;
				},
				apply => sub { return \%exp });
		};
	}
	elsif ($kind eq 'claim_reconcile')
	{
		my $queue = pick([qw(q1 q1 q2)], $r[0]);
		my $lease = (3 + $r[1] % 12) / 10;
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now, c.task_id, c.fence,
		        extract(epoch FROM c.lease_until)::float8 AS lease_until, c.step
		        FROM (SELECT 1) x LEFT JOIN LATERAL durable_claim_reconcile(?, ?, lease => ?::interval, batch => 10) c ON true';
		@binds = ($queue, "handler$s->{id}", interval($lease));
		$desc = "$sid claim_reconcile $queue lease $lease s";
		@alts = sub {
			my %exp;
			return ok_alt(desc => 'tasks whose queryable steps wait for a look-up',
				check => sub {
					my ($res) = @_;
					my $now = $res->{rows}[0]{now};
					my %by;
					push @{ $by{ $_->{task_id} } }, $_ for grep { defined $_->{task_id} } @{ $res->{rows} };
					for my $tid (sort keys %by)
					{
						my $t = $M->{tasks}{$tid} or return "handed out unknown task $tid";
						# the reconciler may have sent a running task whose lease
						# ran out after the last observation to the look-up
						if ($t->{state} eq 'running' && defined $now
							&& DurableModel::expired($t, $t->{lease_until}, $now) != 0)
						{
							my ($action, $r) = DurableModel::recover($M, $t, $t->{lease_until}, $now);
							if (!ref $r->{state} && $r->{state} eq 'waiting' && defined $r->{run_at}
								&& !ref $r->{run_at} && $r->{run_at} == $INF)
							{
								$r->{fence} = $r->{fence}{min} if ref $r->{fence};
								$t = $r;
								$stats{implicit}++;
								$stats{decisions}++;
							}
						}
						return 'handed out ' . T($tid) . " ($t->{state}) to a reconcile handler"
						  unless $t->{state} eq 'waiting' && defined $t->{run_at} && $t->{run_at} == $INF;
						my @want = grep { $t->{steps}{$_}{class} eq 'queryable' } DurableModel::steps_in_doubt($t);
						my @got = sort map { $_->{step} // 'null' } @{ $by{$tid} };
						return T($tid) . ': offered steps ' . join(',', @got) . ', the queryable steps in doubt are '
						  . join(',', @want)
						  unless join(',', @got) eq join(',', sort @want);
						my %fences = map { $_->{fence} => 1 } @{ $by{$tid} };
						my ($fence) = keys %fences;
						return T($tid) . ' fence ' . join(',', keys %fences) . ', the model gives ' . ($t->{fence} + 1)
						  unless keys %fences == 1 && $fence == $t->{fence} + 1;
						$exp{$tid} = [ with($t, sub {
							$_[0]{state} = 'running';
							$_[0]{fence} = $fence;
							$_[0]{lease_until} = $by{$tid}[0]{lease_until};
							$_[0]{run_at} = undef;
							$_[0]{holder} = 'handler';
						}) ];
						unshift @{ $s->{handles} }, { tid => $tid, fence => $fence, kind => 'handler', steps => \@got };
					}
					return undef;
				},
				apply => sub {
					my ($res) = @_;
					if (!%exp)
					{
						my $busy = busy_tasks();
						$stats{empty_lookups_with_work}++
						  if !$M->{queues}{$queue}{paused} && grep { $_->{queue} eq $queue && $_->{state} eq 'waiting' && defined $_->{run_at}
							  && $_->{run_at} == $INF && !$busy->{ $_->{id} } } values %{ $M->{tasks} };
					}
					return \%exp;
				});
		};
	}
	elsif ($kind eq 'handler_receipt')
	{
		my $h = handle_for($s, $r[0], 'handler') or return undef;
		my $tid = $h->{tid};
		return undef if busy_tasks()->{$tid};
		my $t = $M->{tasks}{$tid} or return undef;
		my $f = $h->{fence};
		my $name = pick($h->{steps}, $r[1]);
		my $st = $t->{steps}{$name};
		my $receipt = pick([qw(succeeded succeeded failed_permanent not_executed)], $r[2]);
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now, durable_record_receipt(?, ?, ?, ?, ?, ?::jsonb) AS v';
		@binds = ($tid, $f, $name, $receipt, "fx-$tid-$name", '{"by": "handler"}');
		$desc = "$sid handler record_receipt " . T($tid) . " fence $f '$name' $receipt";
		@alts = sub {
			my ($w) = @_;
			return fenced($t, $f, $w, sub {
				return err_alt('42704', 'no such step') unless $st;
				return err_alt('55U04', "step is $st->{state}") unless $st->{state} eq 'unknown';
				return ok_alt(desc => 'the look-up settles the step',
					apply => sub {
						my ($c, $act) = settle_unknown($t, $name, $receipt);
						my $fails = $act eq 'record_failure' || $act eq 'exhausted';
						my @c;
						if (DurableModel::steps_in_doubt($c))
						{
							# another step still waits for its look-up
							push @c, with($c, sub { $_[0]{fence} = [ $f, $f + 1 ] });
							push @c, with($c, sub { $_[0]{state} = 'waiting'; $_[0]{run_at} = $INF; $_[0]{fence} = { min => $f } });
							push @c, with($c, sub { $_[0]{state} = 'failed'; $_[0]{fence} = { min => $f } })
							  if $fails;
						}
						elsif ($fails || grep { $c->{steps}{$_}{state} eq 'failed' } keys %{ $c->{steps} })
						{
							push @c, with($c, sub { $_[0]{state} = 'failed'; $_[0]{fence} = [ $f, $f + 1 ] });
						}
						else
						{
							push @c, with($c, sub { $_[0]{state} = 'ready'; $_[0]{fence} = [ $f, $f + 1 ] });
						}
						return { $tid => \@c };
					});
			});
		};
		$after = sub {
			my ($res, $alt) = @_;
			$stats{stale_rejected}++ if $alt->{err} && $alt->{err} eq '55U01';
			if ($alt->{taken}) { $M->{tasks}{$tid}{_fence_before} = $t->{fence}; push @require_changed, $tid }
		};
	}
	elsif ($kind eq 'resolve')
	{
		my $busy = busy_tasks();
		my @review = sort { $a <=> $b } grep { !$busy->{$_} && $M->{tasks}{$_}{state} eq 'needs_review' }
		  keys %{ $M->{tasks} };
		my @other = sort { $a <=> $b } grep { !$busy->{$_} && $M->{tasks}{$_}{state} ne 'needs_review' }
		  keys %{ $M->{tasks} };
		my $tid = $r[0] % 100 < 90 ? pick(\@review, $r[1]) // pick(\@other, $r[1]) : pick(\@other, $r[1]);
		return undef unless defined $tid;
		my $t = $M->{tasks}{$tid};
		my $decision = pick([qw(mark_committed mark_committed mark_not_executed mark_not_executed
			  mark_failed retry cancel)], $r[2]);
		my @doubt = DurableModel::steps_in_doubt($t);
		my $step = $RESOLVE_STEP && $r[3] % 100 >= 15 ? pick(\@doubt, $r[3] >> 7) : undef;
		if ($RESOLVE_STEP)
		{
			$sql = 'SELECT extract(epoch FROM now())::float8 AS now,
			        durable_resolve(?, ?, ?, ?::jsonb, step => ?) AS v';
			@binds = ($tid, $decision, 'model-operator', '{"checked": true}', $step);
		}
		else
		{
			$sql = 'SELECT extract(epoch FROM now())::float8 AS now, durable_resolve(?, ?, ?, ?::jsonb) AS v';
			@binds = ($tid, $decision, 'model-operator', '{"checked": true}');
		}
		$desc = "$sid resolve " . T($tid) . " ($t->{state}" . (@doubt ? ', in doubt: ' . join(',', @doubt) : '')
		  . ") $decision" . (defined $step ? " step '$step'" : '');
		# what the resolve may answer for the task as it is
		my $judge = sub {
			my ($t) = @_;
			my @doubt = DurableModel::steps_in_doubt($t);
			return err_alt('55U04', "task is $t->{state}") unless $t->{state} eq 'needs_review';
			my $f = $t->{fence};
			my $resume = sub { $_[0]{state} = [ 'ready', 'waiting' ]; $_[0]{run_at} = { max => time + 60 } };
			my $base = sub { $_[0]{fence} = { min => $f, max => $f + 1 }; $_[0]{attempt} = { min => 0 } };
			if ($decision eq 'cancel')
			{
				return ok_alt(desc => 'cancelled', apply => sub {
					return { $tid => [ with($t, sub { $base->($_[0]); $_[0]{state} = 'cancelled' }) ] } });
			}
			if ($decision eq 'retry')
			{
				return err_alt('55U04', 'a step is in doubt') if @doubt;
				return ok_alt(desc => 'a new run', apply => sub {
					return { $tid => [ with($t, sub { $base->($_[0]); $resume->($_[0]) }) ] } });
			}
			if (!@doubt)
			{
				return ok_alt(desc => "$decision on the task", apply => sub {
					return { $tid => [ with($t, sub {
						$base->($_[0]);
						if ($decision eq 'mark_committed') { $_[0]{state} = 'completed' }
						elsif ($decision eq 'mark_failed') { $_[0]{state} = 'failed' }
						else { $resume->($_[0]) }
					}) ] };
				});
			}
			# the decision settles one step in doubt: the one it names, or
			# (when the call cannot name it) one of them
			return err_alt('22023', 'several steps in doubt, and the decision names none')
			  if $RESOLVE_STEP && !defined $step && @doubt > 1;
			my @settle = defined $step ? ($step) : @doubt;
			return ok_alt(desc => "$decision on a step",
				apply => sub {
					my @c;
					for my $n (@settle)
					{
						push @c, with($t, sub {
							my $x = $_[0];
							$base->($x);
							$x->{steps}{$n}{state} = { mark_committed => 'committed', mark_not_executed => 'planned',
								mark_failed => 'failed' }->{$decision};
							$x->{steps}{$n}{receipt} = undef;
							if (DurableModel::steps_in_doubt($x)) { $x->{state} = 'needs_review' }
							elsif (grep { $x->{steps}{$_}{state} eq 'failed' } keys %{ $x->{steps} }) { $x->{state} = 'failed' }
							else { $resume->($x) }
						});
					}
					return { $tid => \@c };
				});
		};
		@alts = sub {
			my ($w) = @_;
			my @a = $judge->($t);
			# the reconciler may have sent a running task whose lease ran
			# out after the last observation to review
			if ($t->{state} eq 'running' && DurableModel::expired($t, $t->{lease_until}, $w->[1]) != 0)
			{
				my ($action, $rt) = DurableModel::recover($M, $t, $t->{lease_until}, $w->[1]);
				if (!ref $rt->{state} && $rt->{state} eq 'needs_review')
				{
					$rt->{fence} = $rt->{fence}{min} if ref $rt->{fence};
					push @a, $judge->($rt);
				}
			}
			return @a;
		};
	}
	elsif ($kind eq 'cancel')
	{
		my $busy = busy_tasks();
		my $tid = pick([ sort { $a <=> $b } grep { !$busy->{$_} } keys %{ $M->{tasks} } ], $r[0]);
		return undef unless defined $tid;
		my $t = $M->{tasks}{$tid};
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now, durable_cancel(?, ?) AS v';
		@binds = ($tid, 'model');
		$desc = "$sid cancel " . T($tid) . " ($t->{state})";
		@alts = sub {
			my ($w) = @_;
			return err_alt('55U04', "task is $t->{state}")
			  if $t->{state} =~ /^(completed|failed|cancelled|needs_review)$/;
			my @a = ok_alt(desc => 'cancelled', apply => sub {
				return { $tid => [ with($t, sub {
					$_[0]{state} = 'cancelled';
					$_[0]{fence} = $t->{state} eq 'running' ? { min => $t->{fence} + 1 } : { min => $t->{fence} };
				}) ] };
			});
			# an expired lease may have been settled first, e.g. to review
			push @a, err_alt('55U04', 'settled first to a state that cannot be cancelled', taken => $tid)
			  if $t->{state} eq 'running' && $t->{lease_until} < $w->[1] + $EPS;
			return @a;
		};
		$after = sub {
			my ($res, $alt) = @_;
			if ($alt->{taken}) { $M->{tasks}{$tid}{_fence_before} = $t->{fence}; push @require_changed, $tid }
		};
	}
	elsif ($kind eq 'replay')
	{
		my $queue = pick([qw(q1 q2 q3)], $r[0]);
		my $q = $M->{queues}{$queue};
		# by reason (a stop code, or what a quarantine said), by partition
		my $x = $r[1] % 100;
		my $reason = $x < 50 ? undef : $x < 65 ? 'quarantined' : $x < 85 ? pick(\@QUARANTINE_REASONS, $r[1] >> 7)
		  : 'attempts_exhausted';
		my $part = $q->{partitions} > 1 && $r[2] % 100 < 35 ? $q->{partition_base} + $r[3] % $q->{partitions} : undef;
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now, c.task_id, c.action
		        FROM (SELECT 1) x LEFT JOIN LATERAL durable_replay_dead_letters(?, 10, partition => ?, reason => ?) c ON true';
		@binds = ($queue, $part, $reason);
		$desc = "$sid replay_dead_letters $queue" . (defined $part ? " partition $part" : '')
		  . (defined $reason ? " reason '$reason'" : '');
		# the model knows the stop code of a quarantined task; any other
		# failed task stopped for something else, which may be that reason
		# when it is a stop code
		my $of_reason = sub {
			my ($t, $sure) = @_;
			return 0 if defined $part && (!defined $t->{partition} || $t->{partition} != $part);
			return 1 unless defined $reason;
			my $quarantined = ($t->{stop_code} // '') eq 'quarantined';
			return $quarantined if $reason eq 'quarantined';
			return $quarantined && $t->{reason} eq $reason if grep { $_ eq $reason } @QUARANTINE_REASONS;
			return !$quarantined && !$sure;
		};
		@alts = sub {
			my %exp;
			# a task another session has begun a transaction for but not
			# written is not locked: it may be replayed, need not be
			my $busy = busy_tasks();
			my @failed = grep { $_->{queue} eq $queue && $_->{state} eq 'failed' && $of_reason->($_, 0) }
			  values %{ $M->{tasks} };
			# a failed step is final; a step in doubt may not be handed out
			my %may = map { $_->{id} => 1 }
			  grep { my $t = $_; !grep { $t->{steps}{$_}{state} eq 'failed' } keys %{ $t->{steps} } } @failed;
			my %sure = map { $_ => 1 }
			  grep { !DurableModel::steps_in_doubt($M->{tasks}{$_}) && !$busy->{$_} && $of_reason->($M->{tasks}{$_}, 1) }
			  keys %may;
			return ok_alt(desc => 'failed tasks without a failed step get a new run',
				check => sub {
					my ($res) = @_;
					my %got = map { $_->{task_id} => 1 } grep { defined $_->{task_id} } @{ $res->{rows} };
					my $now = @{ $res->{rows} } ? $res->{rows}[0]{now} : undef;
					for my $tid (sort keys %got)
					{
						my $t = $M->{tasks}{$tid};
						my $base = $t;
						# the reconciler may have failed a running task whose
						# lease ran out after the last observation, and the
						# replay given it its new run
						if (!$may{$tid} && $t && defined $now
							&& DurableModel::expired($t, $t->{lease_until}, $now) != 0)
						{
							my ($action, $r) = DurableModel::recover($M, $t, $t->{lease_until}, $now);
							if (!ref $r->{state} && $r->{state} eq 'failed' && $of_reason->($r, 0)
								&& !grep { (ref $r->{steps}{$_}{state} ? '' : $r->{steps}{$_}{state}) eq 'failed' }
								keys %{ $r->{steps} })
							{
								$base = $r;
								$stats{implicit}++;
								$stats{decisions}++;
							}
						}
						return 'replayed ' . T($tid) . ' (' . ($t ? $t->{state} : '?')
						  . (defined $t->{stop_code} ? " $t->{stop_code}" : '') . (defined $t->{reason} ? " '$t->{reason}'" : '')
						  . (defined $t->{partition} ? " partition $t->{partition}" : '') . ')'
						  . ' which is not a failed task of that partition and reason without a failed step'
						  unless $may{$tid} || $base != $t;
						my $from = $base->{fence};
						$from = $from->{min} if ref $from;
						$exp{$tid} = [ with($base, sub {
							$_[0]{state} = 'ready';
							$_[0]{attempt} = 0;
							$_[0]{fence} = { min => $from };
							$_[0]{due_since} = $res->{t0};
						}) ];
						$stats{replayed_quarantined}++ if ($base->{stop_code} // '') eq 'quarantined';
					}
					if (keys %sure <= 10)
					{
						my @missed = grep { !$got{$_} } sort keys %sure;
						return 'did not replay ' . join(', ', map { T($_) } @missed) if @missed;
					}
					return undef;
				},
				apply => sub { return \%exp });
		};
	}
	elsif ($kind eq 'pause' || $kind eq 'resume')
	{
		my $queue = pick([qw(q1 q2 q3)], $r[0]);
		my $q = $M->{queues}{$queue};
		# one partition of a queue that has several (docs/design.md section 15): the
		# queue's own pause is apart
		my $part = $q->{partitions} > 1 && $r[1] % 100 < 70 ? $q->{partition_base} + $r[2] % $q->{partitions} : undef;
		$sql = "SELECT extract(epoch FROM now())::float8 AS now, durable_$kind(?, partition => ?)::text AS v";
		@binds = ($queue, $part);
		$desc = "$sid $kind $queue" . (defined $part ? " partition $part" : '');
		@alts = sub {
			return ok_alt(desc => $kind, apply => sub {
				my ($res) = @_;
				if (defined $part)
				{
					if ($kind eq 'resume') { delete $q->{paused_parts}{$part} }
					else { $q->{paused_parts}{$part} //= $res->{t1} }
				}
				elsif ($kind eq 'resume') { $q->{paused} = 0 }
				elsif (!$q->{paused}) { $q->{paused} = 1; $q->{paused_at} = $res->{t1} }
				return {};
			});
		};
	}
	elsif ($kind eq 'deploy')
	{
		# a new version deployed (the newest is what workers start new work
		# under), or one retired: what workers say they run changes; tasks
		# pinned to a retired version wait for a migration or go to review
		my $d = $M->{deployed};
		my ($name, $all) = $r[0] % 10 < 7 ? ('workflow', \@WORKFLOWS) : ('model', \@MODELS);
		my @now = @{ $d->{$name} };
		my @new = grep { my $v = $_; !grep { $_ eq $v } @now } @$all;
		if (@new && (@now == 1 || $r[1] % 2))
		{
			my $v = pick(\@new, $r[2]);
			@now = sort (@now, $v);
			$desc = "deploy $name $v";
		}
		else
		{
			# mostly the oldest goes; sometimes the newest is rolled back
			my $v = $r[2] % 100 < 75 ? shift @now : pop @now;
			$desc = "retire $name $v";
		}
		$d->{$name} = \@now;
		$desc .= ': workers run ' . VS($d);
		$stats{deploys}++;
		observe($desc);
		return $desc;
	}
	elsif ($kind eq 'migrate')
	{
		# an operator moves one task to other versions (docs/design.md section 15):
		# mostly one in review because no worker ran its versions
		my $locked = locked_tasks();
		my @ids = sort { $a <=> $b } grep { !$locked->{$_} } keys %{ $M->{tasks} };
		my @live = grep { !terminal($M->{tasks}{$_}) } @ids;
		my @orphans = grep { ($M->{tasks}{$_}{stop_code} // '') eq 'version_unavailable' } @live;
		my @doubt = grep { DurableModel::steps_in_doubt($M->{tasks}{$_}) } @live;
		my $x = $r[0] % 100;
		my $tid = $x < 50 ? pick(\@orphans, $r[1]) // pick(\@live, $r[1])
		  : $x < 65 ? pick(\@doubt, $r[1]) // pick(\@live, $r[1])
		  : $x < 90 ? pick(\@live, $r[1]) : pick(\@ids, $r[1]);
		return undef unless defined $tid;
		my $t = $M->{tasks}{$tid};
		my $y = $r[2] % 100;
		my $from = $y < 35 ? {}
		  : $y < 65 && $t->{versions} && exists $t->{versions}{workflow} ? { workflow => $t->{versions}{workflow} }
		  : $y < 85 ? { %{ $t->{versions} // {} } }
		  : { workflow => pick(\@WORKFLOWS, $r[2] >> 7) };
		my $to = draw_to($r[3]);
		my $dry = $r[4] % 100 < 25 ? 1 : 0;
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now, c.task_id, c.state,
		        c.from_versions::text AS from_versions, c.to_versions::text AS to_versions, c.action
		        FROM durable_migrate(?::bigint, ?::jsonb, ?::jsonb, ?, ?::jsonb, dry_run => ?::boolean) c';
		@binds = ($tid, DurableModel::versions_json($from), DurableModel::versions_json($to), 'model-operator',
			'{"deployed": ' . DurableModel::versions_json($M->{deployed}) . '}', $dry ? 'true' : 'false');
		$desc = "$sid migrate " . T($tid) . " ($t->{state}, pinned to " . VS($t->{versions}) . ') from ' . VS($from)
		  . ' to ' . VS($to) . ($dry ? ' (dry run)' : '');
		$stats{migrations}++;
		my $judge = sub {
			my ($b, $t0) = @_;
			return err_alt('55U04', "task is $b->{state}") if terminal($b);
			my $pinned = DurableModel::versions_contain($b->{versions}, $from);
			my @doubt = DurableModel::steps_in_doubt($b);
			return err_alt([ '55U02', '55U04' ], 'pinned to other versions, and a step in doubt', doubt => 1)
			  if !$pinned && @doubt;
			return err_alt('55U02', 'pinned to ' . VS($b->{versions})) unless $pinned;
			return err_alt('55U04', "step(s) in doubt: @doubt", doubt => 1) if @doubt;
			my $new = DurableModel::versions_merge($b->{versions}, $to);
			my $c = migrated_task($b, $new, $t0);
			return ok_alt(desc => $dry ? "would migrate ($b->{state})" : "migrated ($b->{state})",
				check => sub {
					my ($res) = @_;
					my @rows = grep { defined $_->{task_id} } @{ $res->{rows} };
					return scalar(@rows) . ' rows' unless @rows == 1;
					my $row = $rows[0];
					my $act = $dry ? 'would_migrate' : 'migrated';
					my $st = $dry ? $b->{state} : $c->{state};
					return "task $row->{task_id}" unless $row->{task_id} == $tid;
					return "action $row->{action}" unless $row->{action} eq $act;
					return "state $row->{state}, the model gives $st" unless $row->{state} eq $st;
					my ($f, $g) = map { DurableModel::versions_parse($row->{$_}) } qw(from_versions to_versions);
					return 'from_versions ' . VS($f) . ', pinned to ' . VS($b->{versions})
					  unless VS($f) eq VS($b->{versions});
					return 'to_versions ' . VS($g) . ', the model gives ' . VS($new) unless VS($g) eq VS($new);
					return undef;
				},
				apply => sub { return $dry ? {} : { $tid => [$c] } });
		};
		# a lease that ran out may have been settled first
		@alts = sub {
			my ($w) = @_;
			return map { $judge->($_, $w->[0]) } bases_of($t, $w->[1]);
		};
		$after = sub {
			my ($res, $alt) = @_;
			$stats{migrations_refused_in_doubt}++ if $alt->{doubt};
		};
	}
	elsif ($kind eq 'migrate_queue')
	{
		# an operator moves the tasks of a queue pinned to a version (or any
		# version) to others; a task with a step in doubt is reported, left
		my $queue = pick([qw(q3 q3 q1 q2)], $r[0]);
		my $locked = locked_tasks();
		return undef if grep { $M->{tasks}{$_} && $M->{tasks}{$_}{queue} eq $queue } keys %$locked;
		my $from = $r[1] % 100 < 30 ? {} : { workflow => pick(\@WORKFLOWS, $r[2]) };
		my $to = draw_to($r[3]);
		my $dry = $r[4] % 100 < 30 ? 1 : 0;
		my $batch = $r[4] % 100 >= 85 ? 1 + ($r[4] >> 8) % 2 : 1000;
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now, c.task_id, c.state,
		        c.from_versions::text AS from_versions, c.to_versions::text AS to_versions, c.action
		        FROM (SELECT 1) x LEFT JOIN LATERAL durable_migrate(?::text, ?::jsonb, ?::jsonb, ?, ?::jsonb,
		                                                            dry_run => ?::boolean, batch => ?) c ON true';
		@binds = ($queue, DurableModel::versions_json($from), DurableModel::versions_json($to), 'model-operator',
			'{"deployed": ' . DurableModel::versions_json($M->{deployed}) . '}', $dry ? 'true' : 'false', $batch);
		$desc = "$sid migrate $queue from " . VS($from) . ' to ' . VS($to) . ($dry ? ' (dry run)' : '')
		  . ($batch < 1000 ? " batch $batch" : '');
		$stats{migrations}++;
		@alts = sub {
			my ($w) = @_;
			# the unfinished tasks pinned to from, not yet to to
			my %bases;
			for my $t (values %{ $M->{tasks} })
			{
				next unless $t->{queue} eq $queue && !terminal($t)
				  && DurableModel::versions_contain($t->{versions}, $from)
				  && !DurableModel::versions_contain($t->{versions}, $to);
				$bases{ $t->{id} } = [ grep { !terminal($_) } bases_of($t, $w->[1]) ];
			}
			my %exp;
			return ok_alt(desc => 'the tasks pinned to from, migrated or in doubt',
				check => sub {
					my ($res) = @_;
					my @rows = grep { defined $_->{task_id} } @{ $res->{rows} };
					return scalar(@rows) . " rows, more than the batch $batch" if @rows > $batch;
					my %got;
					for my $row (@rows)
					{
						my $tid = $row->{task_id};
						my $t = $M->{tasks}{$tid};
						return "reported $tid, which the model does not know" unless $t;
						return 'reported ' . T($tid) . " ($t->{state}, of $t->{queue}, pinned to " . VS($t->{versions})
						  . '), which the migration does not move' unless $bases{$tid} && @{ $bases{$tid} };
						return 'reported ' . T($tid) . ' twice' if $got{$tid}++;
						my @why;
						for my $b (@{ $bases{$tid} })
						{
							my $doubt = DurableModel::steps_in_doubt($b);
							my $act = $doubt ? 'in_doubt' : $dry ? 'would_migrate' : 'migrated';
							my $new = DurableModel::versions_merge($b->{versions}, $to);
							my $c = $doubt || $dry ? undef : migrated_task($b, $new, $w->[0]);
							my $st = $c ? $c->{state} : $b->{state};
							my ($f, $g) = map { DurableModel::versions_parse($row->{$_}) } qw(from_versions to_versions);
							if ($row->{action} ne $act || $row->{state} ne $st || VS($f) ne VS($b->{versions})
								|| VS($g) ne VS($new))
							{
								push @why, "$row->{action} $row->{state} " . VS($f) . ' -> ' . VS($g)
								  . ", the model gives $act $st " . VS($b->{versions}) . ' -> ' . VS($new);
								next;
							}
							$exp{$tid} = [$c] if $c;
							$stats{migrations_refused_in_doubt}++ if $doubt;
							@why = ();
							last;
						}
						return T($tid) . ': ' . join(' / or / ', @why) if @why;
					}
					# below the batch, every task it moves is reported
					if (@rows < $batch)
					{
						for my $tid (sort { $a <=> $b } keys %bases)
						{
							my $t = $M->{tasks}{$tid};
							next if $got{$tid} || @{ $bases{$tid} } < bases_of($t, $w->[1]);
							return 'did not report ' . T($tid) . " ($t->{state}, pinned to " . VS($t->{versions}) . ')'
							  unless $t->{state} eq 'running' && DurableModel::expired($t, $t->{lease_until}, $w->[1]) != 0;
						}
					}
					return undef;
				},
				apply => sub { return \%exp });
		};
	}
	elsif ($kind eq 'quarantine')
	{
		# an operator stops what cannot go on (the stop-loss runbook): to
		# the dead letters with a reason, never a decision on a step in doubt
		my $locked = locked_tasks();
		my @ids = sort { $a <=> $b } grep { !$locked->{$_} } keys %{ $M->{tasks} };
		my @live = grep { !terminal($M->{tasks}{$_}) } @ids;
		my @in_doubt = grep { DurableModel::steps_in_doubt($M->{tasks}{$_}) } @live;
		my $x = $r[0] % 100;
		my $tid = $x < 25 ? pick(\@in_doubt, $r[1]) // pick(\@live, $r[1])
		  : $x < 85 ? pick(\@live, $r[1]) // pick(\@ids, $r[1]) : pick(\@ids, $r[1]);
		return undef unless defined $tid;
		my $t = $M->{tasks}{$tid};
		my $reason = pick(\@QUARANTINE_REASONS, $r[2]);
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now, durable_quarantine(?, ?)::text AS v';
		@binds = ($tid, $reason);
		my @doubt = DurableModel::steps_in_doubt($t);
		$desc = "$sid quarantine " . T($tid) . " ($t->{state}" . (@doubt ? ', in doubt: ' . join(',', @doubt) : '')
		  . ") '$reason'";
		$stats{quarantines}++;
		my $judge = sub {
			my ($b) = @_;
			return err_alt('55U04', "task is $b->{state}") if terminal($b);
			my @d = DurableModel::steps_in_doubt($b);
			return err_alt('55U04', "step(s) in doubt: @d", doubt => 1) if @d;
			return ok_alt(desc => "quarantined ($b->{state})",
				apply => sub {
					return { $tid => [ with($b, sub {
						my $x = $_[0];
						my $f = $b->{fence};
						$x->{state} = 'failed';
						$x->{fence} = $b->{state} eq 'running' ? $f + 1 : [ $f, $f + 1 ];
						$x->{holder} = undef;
						$x->{stop_code} = 'quarantined';
						$x->{stop_for} = 'failed';
						$x->{reason} = $reason;
					}) ] };
				});
		};
		@alts = sub {
			my ($w) = @_;
			return map { $judge->($_) } bases_of($t, $w->[1]);
		};
		$after = sub {
			my ($res, $alt) = @_;
			$stats{quarantines_refused_in_doubt}++ if $alt->{doubt};
		};
	}
	elsif ($kind eq 'settings')
	{
		my @set = (pick(\@DATESTYLES, $r[0]), pick(\@TIMEZONES, $r[1]),
			pick(\@INTERVALSTYLES, $r[2]), 1 + $r[3] % 3, pick(\@SEARCH_PATHS, $r[4]));
		$sql = "SELECT extract(epoch FROM now())::float8 AS now,
		        set_config('DateStyle', ?, false) || set_config('TimeZone', ?, false)
		        || set_config('IntervalStyle', ?, false) || set_config('extra_float_digits', ?, false)
		        || set_config('search_path', ?, false) AS v";
		@binds = @set;
		$desc = "$sid settings " . join(' / ', @set);
		@alts = sub { return ok_alt(desc => 'settings', apply => sub { return {} }) };
	}
	elsif ($kind eq 'alter_queue')
	{
		# an operator changes a queue mid-run: tasks keep the attempts they
		# were enqueued with, later ones get the new budget
		my $queue = pick([qw(q1 q2)], $r[0]);
		my $max = 1 + $r[1] % 4;
		my $lease = (5 + $r[2] % 20) / 10;
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now,
		        durable_alter_queue(?, lease => ?::interval, max_attempts => ?)::text AS v';
		@binds = ($queue, interval($lease), $max);
		$desc = "$sid alter_queue $queue max_attempts $max lease $lease s";
		@alts = sub {
			return ok_alt(desc => 'altered', apply => sub { $M->{queues}{$queue}{max_attempts} = $max; return {} });
		};
	}
	elsif ($kind eq 'outbox_emit')
	{
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now, durable_outbox_emit(' . $MQ . '?, ?::jsonb, ?) AS v';
		@binds = ('topic' . ($r[0] % 2), '{"n": ' . ($r[1] % 1000) . '}', 'k' . ($r[2] % 5));
		$desc = "$sid outbox_emit";
		@alts = sub {
			return ok_alt(desc => 'a new message',
				check => sub { my $v = $_[0]{rows}[0]{v}; return "message id $v again" if $M->{outbox}{$v}; undef },
				apply => sub {
					my $v = $_[0]{rows}[0]{v};
					$M->{outbox}{$v} = { fence => 0, published => 0, lease_until => undef, attempt => 0 };
					return {};
				});
		};
	}
	elsif ($kind eq 'outbox_claim')
	{
		my $batch = 1 + $r[0] % 3;
		my $lease = (3 + $r[1] % 12) / 10;
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now, c.message_id, c.fence, c.attempt
		        FROM (SELECT 1) x LEFT JOIN LATERAL durable_outbox_claim(' . $MQ . '?, ?, ?::interval) c ON true';
		@binds = ("pub$s->{id}", $batch, interval($lease));
		$desc = "$sid outbox_claim batch $batch lease $lease s";
		@alts = sub {
			return ok_alt(desc => 'unpublished messages whose lease is free',
				check => sub {
					my ($res) = @_;
					my $now = $res->{rows}[0]{now};
					my @rows = grep { defined $_->{message_id} } @{ $res->{rows} };
					return 'more than the batch' if @rows > $batch;
					my %f = map { $_->{fence} => 1 } @rows;
					return 'several fences in one claim' if keys %f > 1;
					for my $row (@rows)
					{
						my $m = $M->{outbox}{ $row->{message_id} } or return "unknown message $row->{message_id}";
						return "message $row->{message_id} was published already" if $m->{published};
						return "message $row->{message_id} is leased until " . DurableModel::show($m->{lease_until})
						  if defined $m->{lease_until} && $m->{lease_until} > $now + $EPS;
						return "fence $row->{fence} is not above $M->{outbox_fence}" unless $row->{fence} > $M->{outbox_fence};
					}
					return undef;
				},
				apply => sub {
					my ($res) = @_;
					my $now = $res->{rows}[0]{now};
					my @rows = grep { defined $_->{message_id} } @{ $res->{rows} };
					return {} unless @rows;
					for my $row (@rows)
					{
						my $m = $M->{outbox}{ $row->{message_id} };
						$m->{fence} = $row->{fence};
						$m->{lease_until} = $now + $lease;
						$M->{outbox_fence} = $row->{fence};
					}
					unshift @{ $s->{outbox} }, { fence => $rows[0]{fence}, ids => [ map { $_->{message_id} } @rows ] };
					return {};
				});
		};
	}
	elsif ($kind eq 'outbox_ack')
	{
		my $h = pick($s->{outbox}, $r[0] % 100 < 80 ? 0 : $r[0]) or return undef;
		my @ids = @{ $h->{ids} };
		push @ids, $ids[0] if $r[1] % 100 < 15;    # the same id twice
		my @all = sort { $a <=> $b } keys %{ $M->{outbox} };
		push @ids, pick(\@all, $r[2]) if $r[1] % 100 >= 90;    # one it may not hold
		my %d = map { $_ => 1 } @ids;
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now, durable_outbox_ack(' . $MQ . '?::bigint[], ?) AS v';
		@binds = ('{' . join(',', @ids) . '}', $h->{fence});
		$desc = "$sid outbox_ack [" . join(',', @ids) . "] fence $h->{fence}";
		@alts = sub {
			my ($w) = @_;
			my @held = grep { $M->{outbox}{$_}{fence} == $h->{fence} && !$M->{outbox}{$_}{published} } keys %d;
			my @done = grep { $M->{outbox}{$_}{fence} == $h->{fence} && $M->{outbox}{$_}{published} } keys %d;
			my @expired = grep { defined $M->{outbox}{$_}{lease_until} && $M->{outbox}{$_}{lease_until} < $w->[1] + $EPS } @held;
			my @a;
			if (@held + @done == keys %d)
			{
				push @a, ok_alt(desc => 'published',
					check => sub {
						my $v = $_[0]{rows}[0]{v};
						return "returned $v" unless $v == @held || $v == keys %d || $v == @ids;
						return undef;
					},
					apply => sub { $M->{outbox}{$_}{published} = 1 for @held; return {} });
			}
			push @a, err_alt('55U01', 'not held under this fence') if @held + @done < keys %d || @done || @expired;
			return @a;
		};
	}
	elsif ($kind =~ /^key_(begin|advance|finish)$/)
	{
		return undef unless $KEY_FENCE;
		my $what = $1;
		my $key = 'k' . ($r[0] % 4);
		my $k = $M->{keys}{$key};
		if ($what eq 'begin')
		{
			my $request = '{"r": ' . ($k && $r[1] % 100 < 90 ? $k->{request} : $r[1] % 2) . '}';
			my $lock = (3 + $r[2] % 12) / 10;
			$sql = 'SELECT extract(epoch FROM now())::float8 AS now, status, recovery_point, response::text AS response, fence
			        FROM durable_idempotent_begin(' . $MQ . '?, ?, ?::jsonb, ?::interval)';
			@binds = ('model', $key, $request, interval($lock));
			$desc = "$sid idempotent_begin $key $request lock $lock s";
			my ($rq) = $request =~ /(\d+)/;
			@alts = sub {
				my ($w) = @_;
				return err_alt('55U03', 'another request under the key') if $k && $k->{request} != $rq;
				my $started = sub {
					my ($desc, $min_fence, $rp) = @_;
					return ok_alt(desc => $desc,
						check => sub {
							my $row = $_[0]{rows}[0];
							return 'status ' . ($row->{status} // 'null') unless ($row->{status} // '') eq 'started';
							return 'fence ' . ($row->{fence} // 'null') . " is not above $min_fence"
							  unless defined $row->{fence} && $row->{fence} > $min_fence;
							return "recovery point $row->{recovery_point}, stored $rp"
							  if defined $rp && ($row->{recovery_point} // '') ne $rp;
							return undef;
						},
						apply => sub {
							my $row = $_[0]{rows}[0];
							$M->{keys}{$key} = { request => $rq, state => 'in_progress', fence => $row->{fence},
								locked_until => $row->{now} + $lock, rp => $row->{recovery_point} };
							unshift @{ $s->{keys} }, { key => $key, fence => $row->{fence} };
							return {};
						});
				};
				return $started->('started', 0, undef) unless $k;
				if ($k->{state} eq 'completed')
				{
					return ok_alt(desc => 'completed',
						check => sub {
							my $row = $_[0]{rows}[0];
							return 'status ' . ($row->{status} // 'null') unless ($row->{status} // '') eq 'completed';
							return 'response ' . ($row->{response} // 'null') . ", stored $k->{response}"
							  unless ($row->{response} // '') eq $k->{response};
							return undef;
						},
						apply => sub { return {} });
				}
				my @a;
				push @a, ok_alt(desc => 'in_progress',
					check => sub { my $st = $_[0]{rows}[0]{status} // 'null'; return $st eq 'in_progress' ? undef : "status $st" },
					apply => sub { return {} })
				  if $k->{locked_until} > $w->[0] - $EPS;
				push @a, $started->('taken over', $k->{fence}, $k->{rp}) if $k->{locked_until} < $w->[1] + $EPS;
				return @a;
			};
		}
		else
		{
			my $h = pick([ grep { $_->{key} eq $key } @{ $s->{keys} } ], $r[1]) // pick($s->{keys}, $r[1]) or return undef;
			$key = $h->{key};
			$k = $M->{keys}{$key};
			my $f = $h->{fence} + ($r[2] % 100 < 5 ? 1 : 0);
			if ($what eq 'advance')
			{
				my $rp = 'rp' . ($r[3] % 3);
				$sql = 'SELECT extract(epoch FROM now())::float8 AS now,
				        durable_idempotent_advance(' . $MQN . 'scope => ?, key => ?, fence => ?, recovery_point => ?, lock => ?::interval)::text AS v';
				@binds = ('model', $key, $f, $rp, '1 second');
				$desc = "$sid idempotent_advance $key fence $f $rp";
				@alts = sub {
					return err_alt([ '55U01', '55U04' ], 'completed') if $k->{state} eq 'completed' && $k->{fence} == $f;
					return err_alt('55U01', 'stale fence') if $k->{fence} != $f;
					return ok_alt(desc => 'advanced', apply => sub {
						$k->{rp} = $rp;
						$k->{locked_until} = $_[0]{rows}[0]{now} + 1;
						return {};
					});
				};
			}
			else
			{
				my $response = '{"answer": ' . ($r[3] % 100) . '}';
				$sql = 'SELECT extract(epoch FROM now())::float8 AS now,
				        durable_idempotent_finish(' . $MQN . 'scope => ?, key => ?, fence => ?, response => ?::jsonb)::text AS v';
				@binds = ('model', $key, $f, $response);
				$desc = "$sid idempotent_finish $key fence $f";
				@alts = sub {
					return err_alt([ '55U01', '55U04' ], 'completed') if $k->{state} eq 'completed' && $k->{fence} == $f;
					return err_alt('55U01', 'stale fence') if $k->{fence} != $f;
					return ok_alt(desc => 'finished', apply => sub {
						$k->{state} = 'completed';
						$k->{response} = $response;
						return {};
					});
				};
			}
		}
	}
	elsif ($kind eq 'inbox')
	{
		my $id = 'm' . ($r[0] % 5);
		my $payload = '{"m": "' . $id . '"' . ($r[1] % 100 < 10 ? ', "x": 1' : '') . '}';
		$sql = 'SELECT extract(epoch FROM now())::float8 AS now, durable_inbox_receive(' . $MQ . '?, ?, ?::jsonb)::text AS v';
		@binds = ('c1', $id, $payload);
		$desc = "$sid inbox_receive $id $payload";
		my $seen = $M->{inbox}{$id};
		@alts = sub {
			return err_alt('55U03', 'another payload under the id') if $seen && $seen ne $payload;
			return ok_alt(desc => $seen ? 'a duplicate' : 'the first time',
				check => sub { my $v = $_[0]{rows}[0]{v}; return ($v eq ($seen ? 'false' : 'true')) ? undef : "returned $v" },
				apply => sub { $M->{inbox}{$id} = $payload; return {} });
		};
	}
	elsif ($kind eq 'decide')
	{
		# the decision functions against the model's tables
		my $x = $r[0] % 3;
		if ($x == 0)
		{
			my @rc = (undef, qw(succeeded failed_permanent not_executed));
			my ($exp, $rc, $safe, $att, $max, $qy) = ($r[1] % 2, $rc[ $r[2] % 4 ], $r[3] % 2, 1 + $r[4] % 4, 1 + ($r[4] >> 4) % 4, $r[5] % 2);
			$sql = 'SELECT extract(epoch FROM now())::float8 AS now,
			        durable_recovery_action(?::bool, ?, ?::bool, ?, ?, queryable => ?::bool) AS v';
			@binds = ($exp ? 'true' : 'false', $rc, $safe ? 'true' : 'false', $att, $max, $qy ? 'true' : 'false');
			my $want = DurableModel::recovery_action_flags($exp, $rc, $safe, $att, $max, $qy);
			$desc = "$sid durable_recovery_action(" . join(', ', map { $_ // 'null' } @binds) . ")";
			@alts = sub {
				return ok_alt(desc => $want, check => sub { my $v = $_[0]{rows}[0]{v}; $v eq $want ? undef : "gave $v" },
					apply => sub { return {} });
			};
		}
		elsif ($x == 1)
		{
			my $class = pick([qw(transient transient permanent unknown)], $r[1]);
			my ($att, $max) = (1 + $r[2] % 5, 1 + ($r[2] >> 4) % 5);
			my ($el, $dl, $nd) = ($r[3] % 40, $r[4] % 100 < 30 ? undef : $r[4] % 40, $r[5] % 10);
			$sql = 'SELECT extract(epoch FROM now())::float8 AS now,
			        durable_next_action(?, ?, ?::interval, ?::interval, ?, ?::interval) AS v';
			@binds = ($att, $max, "$el seconds", defined $dl ? "$dl seconds" : undef, $class, "$nd seconds");
			my $want = DurableModel::next_action($att, $max, $class, $el, $dl, $nd);
			$desc = "$sid durable_next_action(" . join(', ', map { $_ // 'null' } @binds) . ")";
			@alts = sub {
				return ok_alt(desc => $want, check => sub { my $v = $_[0]{rows}[0]{v}; $v eq $want ? undef : "gave $v" },
					apply => sub { return {} });
			};
		}
		else
		{
			my ($id, $att, $base, $cap) = ('act-' . ($r[1] % 1000), 1 + $r[2] % 70, 1 + $r[3] % 5, 1 + $r[4] % 120);
			$sql = 'SELECT extract(epoch FROM now())::float8 AS now, durable_retry_delay(?, ?, ?, ?) AS v';
			@binds = ($id, $att, $base, $cap);
			my $want = DurableModel::retry_delay($id, $att, $base, $cap);
			$desc = "$sid durable_retry_delay('$id', $att, $base, $cap)";
			@alts = sub {
				return ok_alt(desc => $want, check => sub { my $v = $_[0]{rows}[0]{v}; $v == $want ? undef : "gave $v" },
					apply => sub { return {} });
			};
		}
	}
	elsif ($kind eq 'foreign')
	{
		# a worker of another application acts on q2's tasks, with the
		# right fence even: refused with 42501, nothing changes
		return undef unless $GRANTS;
		my $busy = busy_tasks();
		my @q2 = sort { $a <=> $b } grep { $M->{tasks}{$_}{queue} eq 'q2' && !$busy->{$_} } keys %{ $M->{tasks} };
		my $tid = pick(\@q2, $r[0]);
		my $x = $r[1] % 5;
		if ($x == 0 || !defined $tid)
		{
			$sql = "SELECT extract(epoch FROM now())::float8 AS now, c.task_id AS v
			        FROM (SELECT 1) x LEFT JOIN LATERAL durable_claim('q2', 'intruder') c ON true";
			$desc = "$sid as model_foreign: claim q2";
		}
		else
		{
			my $t = $M->{tasks}{$tid};
			my @calls = (
				[ 'durable_heartbeat(?, ?)::text', 'heartbeat' ],
				[ "durable_commit(?, ?, '{\"forged\": true}')::text", 'commit' ],
				[ "(SELECT state FROM durable_step(?, ?, 'a', 'idempotent'))", 'step' ],
				[ "durable_fail(?, ?, 'permanent')", 'fail' ]);
			my $c = $calls[ $x - 1 ];
			$sql = "SELECT extract(epoch FROM now())::float8 AS now, $c->[0] AS v";
			@binds = ($tid, $t->{fence});
			$desc = "$sid as model_foreign: $c->[1] " . T($tid) . " with its current fence $t->{fence}";
		}
		$op->{role} = 'model_foreign';
		@alts = sub { return err_alt('42501', 'no grant on the queue') };
	}
	elsif ($kind eq 'bad_input')
	{
		my @cases = (
			[ "durable_claim('q1', 'w', lease => '-1 second')", '22023' ],
			[ "durable_claim('nope', 'w')", '42704' ],
			[ "durable_enqueue('nope', '{}')", '42704' ],
			[ "durable_enqueue('q1', '{}', class => 'bogus')", '22023' ],
			[ 'durable_heartbeat(999999999999, 1)', [ '42704', '55U01' ] ],
			[ "durable_retry_delay('x', 0)", '22023' ],
			[ 'durable_retry_delay(NULL, 1)', '22004' ],
			[ 'durable_pause(NULL)', '22004' ],
			[ "durable_next_action(1, 3, '1 s', '30 s', 'bogus')", '22023' ],
			[ "durable_recovery_action(true, 'bogus', true, 1, 3)", '22023' ],
			[ "durable_claim('q1', 'w', batch => 0)", '22023' ],
			[ "durable_claim('q3', 'w', versions => '{}')", '22023' ],
			[ "durable_claim('q3', 'w', versions => '{\"workflow\": []}')", '22023' ],
			[ "durable_claim('q3', 'w', versions => '{\"workflow\": 3}')", '22023' ],
			[ "(SELECT action FROM durable_migrate(999999999999, '{}', '{\"workflow\": \"1\"}', 'ops', '{}'))", '42704' ],
			[ "(SELECT action FROM durable_migrate('q3', '{}', '{}', 'ops', '{}'))", '22023' ],
			[ "(SELECT action FROM durable_migrate('nope', '{}', '{\"workflow\": \"1\"}', 'ops', '{}'))", '42704' ],
			[ "durable_quarantine(999999999999, 'x')", '42704' ],
			[ "durable_pause('q3', partition => -1)", '22023' ],
			[ "(SELECT count(*) FROM durable_replay_dead_letters('q1', 1, partition => -2))", '22023' ]);
		my $c = pick(\@cases, $r[0]);
		$sql = "SELECT extract(epoch FROM now())::float8 AS now, ($c->[0])::text AS v";
		$desc = "$sid $c->[0]";
		@alts = sub { return err_alt($c->[1], 'bad input') };
	}
	else
	{
		return undef;
	}

	# run it
	$s->{dbh}->do("SET ROLE $op->{role}") if $op->{role};
	my $res = run_sql($s->{dbh}, $sql, @binds);
	if ($op->{role})
	{
		delete $op->{role};
		$s->{dbh}->do('RESET ROLE') or session_lost($s);
	}
	my $w = window($s, $res);
	$OP_T1 = $res->{t1};
	@alts = map { ref $_ eq 'CODE' ? $_->($w) : $_ } @alts;
	if ($res->{err} && $DRIVER_CODES{ $res->{err} })
	{
		# our statement timeout, a kill or a restart: the operation did not happen
		$stats{timeouts}++ if $res->{err} eq '57014';
		# but a claim's backend may remember a record of its worker that
		# did not commit, and skip recording it for a second
		$M->{recorded}{ $op->{_seen}{key} } = $res->{t1} if $op->{_seen};
		if ($res->{err} eq '57014' && $kind =~ /claim/)
		{
			violation($kind, 'a claim waited', "$desc waited for more than 3 s (statement timeout)");
		}
		if ($res->{err} eq '57014' && $kind eq 'reconcile')
		{
			violation($kind, 'the tick waited', "$desc waited for more than 3 s (statement timeout)"
				  . ($HOLD{open} ? " while the holder holds $HOLD{open}" : ''));
		}
		if ($tx) { $s->{dbh}->rollback; $s->{txn} = undef }
		session_lost($s) unless $s->{dbh}->ping;
		$desc .= " -> $res->{err} (driver)";
		observe($desc);
		return $desc;
	}
	if ($res->{err} && !$DOCUMENTED_CODES{ $res->{err} })
	{
		violation($kind, "SQLSTATE $res->{err} outside docs/errors.md", "$desc -> $res->{err} $res->{msg}");
		if ($tx) { $s->{dbh}->rollback; $s->{txn} = undef }
		return "$desc -> $res->{err}";
	}
	my ($chosen, @why);
	for my $a (@alts)
	{
		my $codes = ref $a->{err} ? $a->{err} : defined $a->{err} ? [ $a->{err} ] : [];
		if ($res->{err})
		{
			if (grep { $_ eq $res->{err} } @$codes) { $chosen = $a; last }
			push @why, ($a->{err} ? join('|', @$codes) : 'success') . " ($a->{desc})";
			next;
		}
		if (defined $a->{err}) { push @why, join('|', @$codes) . " ($a->{desc})"; next }
		my $complaint = $a->{check} ? $a->{check}->($res) : undef;
		if (!defined $complaint) { $chosen = $a; last }
		push @why, "$a->{desc}, but $complaint";
	}
	my $answer = $res->{err} ? "$res->{err}" : 'ok' . (defined $res->{rows}[0]{v} ? " $res->{rows}[0]{v}" : '');
	$answer = 'ok' if !$res->{err} && $kind =~ /^(claim|reconcile|claim_reconcile|replay|outbox_claim|key_begin)$/;
	if ($kind eq 'claim' && !$res->{err})
	{
		my @got = map { T($_->{task_id}) . " fence $_->{fence}" } grep { defined $_->{task_id} } @{ $res->{rows} };
		$answer = @got ? 'got ' . join(', ', @got) : 'nothing';
	}
	elsif ($kind =~ /^(reconcile|replay)$/ && !$res->{err})
	{
		my @got = map { T($_->{task_id}) . " $_->{action}" } grep { defined $_->{task_id} } @{ $res->{rows} };
		$answer = @got ? join(', ', @got) : 'nothing';
	}
	elsif ($kind eq 'claim_reconcile' && !$res->{err})
	{
		my @got = map { T($_->{task_id}) . " fence $_->{fence} step $_->{step}" } grep { defined $_->{task_id} } @{ $res->{rows} };
		$answer = @got ? join(', ', @got) : 'nothing';
	}
	elsif ($kind eq 'key_begin' && !$res->{err})
	{
		my $row = $res->{rows}[0];
		$answer = ($row->{status} // 'null') . ' fence ' . ($row->{fence} // 'null');
	}
	$desc .= " -> $answer";
	if (!$chosen)
	{
		my $stale = @alts && !grep { !defined $_->{err} || ref $_->{err} || $_->{err} ne '55U01' } @alts;
		violation($kind, ($stale && !$res->{err} ? 'stale write accepted'
			  : $res->{err} ? "answered $res->{err}" : 'answer not allowed')
			  . ($kind eq 'bad_input' ? ' to ' . ($sql =~ /\((durable_\w+\([^)]*\))/)[0] : ''),
			"$desc; the model allows: " . join(' / ', @why) . ($res->{err} ? " [$res->{msg}]" : ''));
		if ($tx) { $s->{dbh}->rollback; $s->{txn} = undef }
		return $desc;
	}
	# a refusal never tells the current fence (docs/design.md section 9)
	if ($res->{err} && $res->{err} eq '55U01' && @binds >= 2 && $binds[0] =~ /^\d+$/ && $M->{tasks}{ $binds[0] })
	{
		my $cur = $M->{tasks}{ $binds[0] }{fence};
		if ($cur != $binds[1] && $res->{msg} =~ /\b(current|holds?|is now|expected)\b[^\n]*?\b$cur\b/i)
		{
			violation($kind, 'a refusal tells the current fence', "$desc: $res->{msg}");
		}
	}
	my $cands = $chosen->{apply} ? $chosen->{apply}->($res) : {};
	$after->($res, $chosen) if $after;
	if ($tx && $s->{txn})
	{
		if ($res->{err})
		{
			# an error aborts the transaction: roll it back
			$s->{dbh}->rollback;
			$s->{txn} = undef;
		}
		else
		{
			$tx->{pending} = $cands->{ $tx->{tid} } if $cands->{ $tx->{tid} };
			observe_txn($s, $desc);
			delete $cands->{ $tx->{tid} };
		}
	}
	%pending = (%pending, %$cands);
	observe($desc);
	return $desc;
}

#
# Sequences, and shrinking a failing one.
#
my $t_end;
sub run_sequence
{
	my ($seed, $given) = @_;
	reset_state();
	srand($seed);
	@failures = ();
	%pending = ();
	@require_changed = ();
	my (@ops, @trace);
	my $n = $given ? scalar @$given : $NOPS;
	for my $i (0 .. $n - 1)
	{
		last if !$given && time > $t_end;
		my $op = $given ? $given->[$i] : gen_op();
		my $desc = execute($op);
		$stats{ defined $desc ? 'ops' : 'skipped' }++ unless $given;
		$kinds_run{ delete $op->{_kind} }++ if defined $desc && !$given;
		# an operation that found nothing to act on did nothing: leave it out
		next unless defined $desc;
		push @ops, $op;
		push @trace, $desc;
		if (@failures)
		{
			return { fail => $failures[0], all => [@failures], ops => \@ops, trace => \@trace };
		}
	}
	return { ops => \@ops, trace => \@trace };
}

sub reconciler
{
	my ($on) = @_;
	$RECONCILER_OFF = !$on;
	$OBS->do("ALTER SYSTEM SET durable.reconciler_enabled = " . ($on ? 'on' : 'off'));
	$OBS->do('SELECT pg_reload_conf()');
	sleep 0.5;
}

# Shrinking runs the sequence again and again: the statistics keep what the
# exploration did.  The background reconciler's timing makes a run differ
# from the last; a failure that also shows without it (claims and
# durable_reconcile settle leases all the same) is shrunk without it.
sub shrink
{
	my ($seed, $f) = @_;
	my %saved = (%stats);
	my %saved_kinds = (%kinds_run);
	my @out = shrink_runs($seed, $f);
	%stats = %saved;
	%kinds_run = %saved_kinds;
	return @out;
}

sub shrink_runs
{
	my ($seed, $f) = @_;
	my $sig = $f->{fail}{sig};
	my @ops = @{ $f->{ops} };
	my $best = $f;
	my $deadline = time + $SHRINK_SECONDS;
	my $runs = 1;
	reconciler(0);
	my $r0 = run_sequence($seed, \@ops);
	my $quiet = $r0->{fail} && $r0->{fail}{sig} eq $sig;
	if ($quiet) { $best = $r0; @ops = @{ $r0->{ops} } }
	else { reconciler(1) }
	$best->{quiet} = $quiet;
	my $try = sub {
		my ($cand) = @_;
		return undef if time > $deadline;
		$runs++;
		my $r = run_sequence($seed, $cand);
		return ($r->{fail} && $r->{fail}{sig} eq $sig) ? $r : undef;
	};
	# first keep only what touches the task the failure names (and what
	# moves time and hands out work)
	if (my ($alias) = $f->{fail}{msg} =~ /\b(T\d+)\b/)
	{
		my @keep = grep { ($best->{trace}[$_] // '') =~ /\b$alias\b|sleep|enqueue|claim|reconcile|killed|SIGKILL|shut down/ }
		  0 .. $#ops;
		if (@keep < @ops && (my $r = $try->([ @ops[@keep] ])))
		{
			@ops = @{ $r->{ops} };
			$best = $r;
		}
	}
	my $chunk = int(@ops / 2) || 1;
	while ($chunk >= 1 && time < $deadline)
	{
		my $i = 0;
		while ($i < @ops && time < $deadline)
		{
			my @cand = (@ops[ 0 .. $i - 1 ], @ops[ $i + $chunk .. $#ops ]);
			if (@cand && (my $r = $try->(\@cand)))
			{
				@ops = @{ $r->{ops} };    # cut at the operation that failed
				$best = $r;
			}
			else
			{
				$i += $chunk;
			}
		}
		last if $chunk == 1;
		$chunk = int($chunk / 2) || 1;
	}
	# the shortest sequence found must still fail when run once more
	$deadline = time + 60;
	my $again = $try->(\@ops);
	$best = $again if $again;
	$best->{quiet} = $quiet;
	reconciler(1) if $quiet;
	return ($best, $runs, $again ? 1 : 0);
}

@S = map { { id => $_ + 1, handles => [], outbox => [], keys => [] } } 0 .. $NSESS - 1;
reconnect_all();

my %found;    # signature => report
my $t0 = time;
$t_end = $t0 + $SECONDS;
my $seq = 0;
# MODEL_REPLAY: run the operations given (as a failure prints them) once
my $REPLAY = $ENV{MODEL_REPLAY} ? eval $ENV{MODEL_REPLAY} : undef;
die "MODEL_REPLAY: $@" if $ENV{MODEL_REPLAY} && !$REPLAY;
while (time < $t_end && (!$MAXSEQ || $seq < $MAXSEQ) && (!$REPLAY || $seq < 1))
{
	my $seed = $SEED + $seq++;
	my $r = run_sequence($seed, $REPLAY);
	if ($REPLAY)
	{
		$stats{ops} += @{ $r->{ops} };
		diag(join("\n", map { sprintf('  %2d. %s', $_ + 1, $r->{trace}[$_]) } 0 .. $#{ $r->{trace} }));
	}
	$stats{sequences}++;
	next unless $r->{fail};
	my $sig = $r->{fail}{sig};
	$found{$sig}{count}++;
	$found{$sig}{as}{ $r->{fail}{detail} }++;
	next if $found{$sig}{report};
	note("sequence $seed failed after " . scalar(@{ $r->{ops} }) . " operations: $sig; shrinking");
	my ($best, $runs, $stable) = shrink($seed, $r);
	my @lines = map { sprintf('  %2d. %s', $_ + 1, $best->{trace}[$_] // '(skipped)') } 0 .. $#{ $best->{trace} };
	$found{$sig}{report} = "$sig\n  seed $seed (MODEL_SEED=$seed MODEL_SEQUENCES=1), found after "
	  . scalar(@{ $r->{ops} }) . ' operations; shortest sequence (' . scalar(@{ $best->{ops} })
	  . " operations, $runs shrink runs" . ($stable ? '' : ', did not fail again on its last run')
	  . ($best->{quiet} ? ', with the background reconciler off' : '') . "):\n"
	  . join("\n", @lines) . "\n  " . $best->{fail}{msg} . "\n  ops: ["
	  . join(', ', map { op_string($_) } @{ $best->{ops} }) . "]\n"
	  . "  (run it again: MODEL_REPLAY='[...the ops above...]')\n";
	diag($found{$sig}{report});
}
my $elapsed = time - $t0;

diag(sprintf("%d sequences, %d operations (%d skipped: nothing to act on), %.0f s, seeds %d..%d\n"
	  . "  claims %d (tasks handed out %d, empty while work was ready %d), decisions checked %d,\n"
	  . "  leases settled unasked %d, stale writes rejected %d, sessions killed %d, backend SIGKILLs %d,\n"
	  . "  server restarts %d, statement timeouts %d, look-ups handed nothing while some waited %d\n"
	  . "  versions: claims naming them %d (tasks pinned by a claim %d), deploys %d, reviews for versions no worker runs %d,\n"
	  . "  migrations %d (in doubt: refused or left %d), quarantines %d (refused in doubt %d), quarantined tasks replayed %d\n"
	  . "  locks held by another tenant %d (a part of the tick blocked by them %d)\n"
	  . "  enqueues with a fairness key %d (q2 is fair), with rate limits %d (claims of them %d)\n"
	  . "  debounces that made a task %d, that returned the key's task %d\n"
	  . "  kinds: %s",
	$stats{sequences}, $stats{ops}, $stats{skipped}, $elapsed, $SEED, $SEED + $seq - 1,
	$stats{claims}, $stats{handed_out}, $stats{empty_claims_with_work}, $stats{decisions},
	$stats{implicit}, $stats{stale_rejected}, $stats{kills}, $stats{crashes}, $stats{restarts},
	$stats{timeouts}, $stats{empty_lookups_with_work} // 0,
	map({ $stats{$_} // 0 } qw(claims_with_versions pinned_by_claim deploys version_reviews migrations
		migrations_refused_in_doubt quarantines quarantines_refused_in_doubt replayed_quarantined
		holds holds_blocking fair_enqueues rate_limited_enqueues rate_limited_claims
		debounces_made debounces_coalesced)),
	join(' ', map { "$_=$kinds_run{$_}" } sort keys %kinds_run)));

ok($stats{ops} > 0, 'operations ran');
for my $sig (sort keys %found)
{
	fail("the server did what the model forbids: $sig ($found{$sig}{count} sequences; seen as "
		  . join(', ', map { "$_ x$found{$sig}{as}{$_}" } sort keys %{ $found{$sig}{as} }) . ')');
}
ok(!%found, 'every answer and every state was one the contract allows') if !%found;
$_->{dbh}->disconnect for @S;
hold_release();
$HOLD{dbh}->disconnect if $HOLD{dbh};
$TICK->disconnect if $TICK;
$OBS->disconnect;
$node->stop;
done_testing();
