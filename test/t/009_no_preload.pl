# Without preloading: a server whose shared_preload_libraries has pg_cron
# but not durable.  CREATE EXTENSION works and says, once, that no
# reconciler runs; durable.status says it too; the whole worker loop of
# examples/durable_worker runs.  Workers are killed with SIGKILL while they
# hold leases (one of them by itself right after a queryable call, so a
# step is left in doubt), and with no worker left to claim anything, the
# durable_reconcile() that pg_cron runs settles every expired lease: its
# events carry the role of the cron job, and cron.job_run_details has its
# runs.  A VACUUM scheduled the same way runs too, and so does a durable
# schedule that came due.  Fresh workers then
# finish everything: nothing lost, no effect twice, durable_verify() empty.
#
# The schedules are the README's: on pg_cron 1.5 and later '5 seconds',
# on 1.4 (Debian 12's, which knows no seconds) '* * * * *', at the start of
# every minute.  The test keeps the documented schedule rather than a cron
# command that loops durable_reconcile() for most of a minute, which would
# be quicker to wait for but would test something nobody is told to run.
# To wait for one run only, the kills happen early in a minute: on 1.4 the
# test waits for the next minute when fewer than 20 s of this one are left.
# So it takes about a minute on 1.4 (at most about 80 s) and seconds on 1.5+.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $bin = 'examples/durable_worker';
plan skip_all => "$bin is not built" unless -x $bin;
my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
plan skip_all => "pg_cron is not installed in $sharedir (Debian: postgresql-15-cron)"
  unless -f "$sharedir/extension/pg_cron.control";

my $node = PostgreSQL::Test::Cluster->new('no_preload');
$node->init;
$node->append_conf('postgresql.conf', join("\n",
	"shared_preload_libraries = 'pg_cron'",
	"cron.database_name = 'postgres'",
	# pg_cron runs each job over libpq; the test cluster has only a socket
	"cron.host = '" . $node->host . "'",
	"max_connections = 40",
	"fsync = off") . "\n");
$node->start;

# CREATE EXTENSION in a database of its own, pg_cron's being postgres
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('postgres', 'CREATE DATABASE service');
$node->safe_psql('service', slurp_file('examples/service.sql'));
my ($rc, $out, $err) = $node->psql('app', 'CREATE EXTENSION durable');
is($rc, 0, 'CREATE EXTENSION works without preloading');
like($err, qr/NOTICE:  durable is not preloaded: no reconciler works in database "app"/,
	'and says once that no reconciler works here');
unlike($err, qr/FATAL|ERROR|WARNING/, 'with nothing worse than that notice');
is($node->safe_psql('app',
	'SELECT preloaded, reconciler, reconciler_pid, reconciler_database, node_id FROM durable.status'),
	'f|not preloaded|||0', 'durable.status: not preloaded, no reconciler, node 0');
# a session has durable's GUCs once it has loaded the library
is($node->safe_psql('app', q{
	SELECT count(*) FROM durable.status;
	SHOW durable.reconcile_batch}),
	"1\n1000", 'the other GUCs exist');
($rc, $out, $err) = $node->psql('app', 'SELECT count(*) FROM durable.status; SHOW durable.node_id');
like($err, qr/unrecognized configuration parameter "durable.node_id"/,
	'durable.node_id needs the postmaster');

# pg_cron: the reconciler's work, as a role of its own so that its events
# say who did it; the vacuum as the extension's owner, who may vacuum
my $cron_version = $node->safe_psql('postgres', q{
	CREATE EXTENSION pg_cron;
	SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'});
my ($major, $minor) = $cron_version =~ /^(\d+)\.(\d+)/;
my $seconds = $major > 1 || $minor >= 5;
my $every = $seconds ? '5 seconds' : '* * * * *';
note("pg_cron $cron_version: schedule '$every'");
$node->safe_psql('app', 'CREATE ROLE reconcile_job LOGIN IN ROLE durable_operator');
$node->safe_psql('postgres', qq{
	SELECT cron.schedule_in_database('durable-reconcile', '$every',
	    'SELECT count(*) FROM durable_reconcile()', 'app', 'reconcile_job');
	SELECT cron.schedule_in_database('durable-vacuum', '$every',
	    'VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) durable.live_tasks', 'app');
});

# a durable schedule that came due while nobody reconciled: pg_cron's
# durable_reconcile() enqueues its occurrence, once
$node->safe_psql('app', q{
	SELECT durable_create_queue('exports');
	SELECT durable_schedule('export', '0 0 1 1 *', 'exports') > now();
	UPDATE durable.schedules SET next_run = now() - interval '1 minute';
});

my $tasks = 30;
$node->safe_psql('app', qq{
	SELECT durable_create_queue('orders', lease => '2 s', retry_base => 1, retry_cap => 1);
	SELECT count(durable_enqueue('orders',
	    '{"steps": [["reserve", "idempotent"], ["charge", "queryable"]]}'))
	FROM generate_series(1, $tasks);
});

my $db = $node->connstr('app');
my $svc = $node->connstr('service');
sub start_worker
{
	my ($name, @args) = @_;
	my %w = (name => $name, out => '');
	$w{h} = IPC::Run::start(
		[ $bin, '--db', $db, '--service', $svc, '--queue', 'orders',
		  '--name', $name, '--quiet', @args ],
		'>', \$w{out}, '2>', \my $err);
	return \%w;
}

# early in a minute on pg_cron 1.4, so that one run settles every lease
if (!$seconds)
{
	my $left = 60 - $node->safe_psql('app', 'SELECT extract(second FROM now())::int');
	sleep($left + 1) if $left < 20;
}

# three workers hold leases; one kills itself after a queryable call, the
# test kills the other two
my @workers = (start_worker('w1', '--idle-exit', '-1', '--call-ms', '100',
		'--crash-at', 'after_call:queryable'),
	map { start_worker("w$_", '--idle-exit', '-1', '--call-ms', '300') } 2 .. 3);
ok($node->poll_query_until('app',
	q{SELECT count(DISTINCT owner) = 2 FROM durable.tasks WHERE state = 'running' AND owner IN ('w2', 'w3')}),
	'two workers hold leases');
kill 'KILL', $_->{h}->{KIDS}[0]{PID} for @workers[1, 2];
$_->{h}->finish for @workers;
my $killed = $node->safe_psql('app', q{SELECT count(*) FROM durable.tasks WHERE state = 'running'});
cmp_ok($killed, '>=', 2, "$killed leases are left by killed workers");
is($node->safe_psql('app', q{
	SELECT count(*) > 0 FROM durable.steps WHERE class = 'queryable' AND state = 'started'}),
	't', 'and a queryable step in doubt');

# no worker claims anything now: only pg_cron can settle them
my $t0 = time;
ok($node->poll_query_until('app', q{SELECT count(*) = 0 FROM durable.tasks WHERE state = 'running'}),
	'every expired lease is settled');
note(sprintf('settled %.0f s after the kills', time - $t0));
is($node->safe_psql('app', q{
	SELECT count(*) FILTER (WHERE role = 'reconcile_job') || '|' || count(*)
	FROM durable.events WHERE kind = 'lease_expired'}),
	"$killed|$killed", 'by the cron job: every lease_expired event carries its role');
ok($node->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM cron.job_run_details d JOIN cron.job j USING (jobid)
	WHERE j.jobname = 'durable-reconcile' AND d.status = 'succeeded'}),
	'cron.job_run_details has the reconcile job\'s runs');
ok($node->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM cron.job_run_details d JOIN cron.job j USING (jobid)
	WHERE j.jobname = 'durable-vacuum' AND d.status = 'succeeded'}),
	'and the vacuum job\'s');
ok($node->poll_query_until('app', q{
	SELECT vacuum_count > 0 FROM pg_stat_user_tables WHERE relid = 'durable.live_tasks'::regclass}),
	'durable.live_tasks was vacuumed');

is($node->safe_psql('app', q{
	SELECT count(*) || '|' || count(*) FILTER (WHERE idempotency_key LIKE 'schedule:export:%')
	|| '|' || (SELECT next_run > now() FROM durable.schedules)
	FROM durable.tasks WHERE queue_name = 'exports'}),
	'1|1|true', 'the cron job enqueued the schedule\'s occurrence once and moved it on');

# fresh workers finish everything, the step in doubt looked up
my @finishers = map { start_worker("f$_", '--idle-exit', '3000') } 1 .. 2;
$_->{h}->finish for @finishers;
is($node->safe_psql('app', q{
	SELECT count(*) FILTER (WHERE state = 'completed') || '|' || count(*) FROM durable.tasks
	WHERE queue_name = 'orders'}),
	"$tasks|$tasks", 'nothing lost: every task completed');
is($node->safe_psql('service', q{
	SELECT count(DISTINCT key) || '|' || count(*) FILTER (WHERE n > 1)
	FROM (SELECT key, count(*) n FROM effects GROUP BY key) k}),
	2 * $tasks . '|0', 'every effect happened, none twice');
is($node->safe_psql('app', q{
	SELECT count(*) FROM durable.steps
	WHERE state <> 'committed' OR effect_id IS NULL}),
	'0', 'every step committed with the effect it made');
is($node->safe_psql('app', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() reports nothing');

unlike(slurp_file($node->logfile), qr/cannot create PGC_POSTMASTER variables/,
	'no backend died loading durable');

$node->stop;
done_testing();
