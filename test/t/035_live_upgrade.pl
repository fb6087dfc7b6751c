# An upgrade without an outage (docs/design.md section 14), under a
# running workload: the files of the next version replace the installed ones,
# ALTER EXTENSION durable UPDATE moves every call to the next version's
# library while the server still runs the preloaded one, and a restart,
# whenever it comes, ends the upgrade.  Three times, on a private copy of
# the PostgreSQL installation (the files are replaced under a running
# server):
#
#   from the version before this one, built from this repository's
#   history, to this one: the calls in flight when the update commits are
#   refused by the old library, with its 55000, and succeed when run again;
#   from this version to a next one built from this tree, whose update
#   locks two tables, in an order of its own, and holds them for a second:
#   a tenant's transaction open when the update starts goes on and
#   commits (the update waits for it holding nothing its calls need), and
#   the calls in flight at the commit fail with 40001, which pgbench runs
#   again, so no client sees a refused call;
#   from that one to the one after, the restart first: the installed
#   version's library, still on disk, serves its functions beside the
#   preloaded one, and its reconciler works, until the update.
#
# Producers enqueue and record each task id in the same transaction;
# workers claim and commit.  At the end every recorded task completed once,
# no other task exists, and durable_verify() is empty.
use strict;
use warnings;
use Cwd;
use File::Basename;
use File::Path qw(make_path);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $top = getcwd;
my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
my ($version) = slurp_file('durable.control') =~ /^default_version\s*=\s*'([^']+)'/m;
my ($hand) = glob("src/sql/updates/*--$version.sql");
my ($previous) = basename($hand // '') =~ /^(.+)--\Q$version\E\.sql$/;
defined $previous or BAIL_OUT("no src/sql/updates/*--$version.sql");

# the last commit of the version before: the parent of the one that began
# this; the tests run as another user than the one who owns the clone
my $git = "git -c safe.directory='$top'";
my $began = `$git log -n 1 --format=%H -S "default_version = '$version'" HEAD -- durable.control 2>/dev/null`;
chomp $began;
plan skip_all => "no history of durable $previous here (a shallow clone or an export)"
  unless $began ne '' && system("$git cat-file -e '$began^' 2>/dev/null") == 0;

my %pg = map { my $v = `$pg_config --$_`; chomp $v; ($_ => $v) } qw(bindir sharedir pkglibdir);
my $tmp = PostgreSQL::Test::Utils::tempdir('live');
my $tree = "$tmp/tree";

# a copy of the installation: durable's files are replaced in it, not in
# the one the other tests use
for my $dir (dirname($pg{bindir}), $pg{sharedir}, $pg{pkglibdir})
{
	next if -d "$tree$dir";
	make_path(dirname("$tree$dir"));
	system('cp', '-a', $dir, "$tree$dir") == 0 or BAIL_OUT("could not copy $dir");
}
my $libdir = "$tree$pg{pkglibdir}";
my $extdir = "$tree$pg{sharedir}/extension";

sub run_or_bail
{
	my ($what, $cmd) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run($cmd, '>', \$out, '2>', \$err)
	  or BAIL_OUT("$what failed: $err$out");
}

# what "make install" of a version puts in place; install(1) unlinks a file
# before writing it, as a package manager does, so that a server that
# mapped the old one keeps it
sub install_version
{
	my ($dir) = @_;
	run_or_bail("make install of $dir",
		[ 'make', '-s', '-C', $dir, 'with_llvm=no', "PG_CONFIG=$pg_config", 'install', "DESTDIR=$tree" ]);
}

my $old = "$tmp/old";
mkdir $old;
run_or_bail("git archive of $previous", [ 'sh', '-c', "$git archive '$began^' | tar -x -C '$old'" ]);
run_or_bail("the build of $previous", [ 'make', '-s', '-C', $old, 'with_llvm=no', "PG_CONFIG=$pg_config" ]);
install_version($old);

# this version, as installed for the other tests
my @this = ([ "$pg{pkglibdir}/durable.so", $libdir, 755 ],
	[ "$pg{pkglibdir}/durable-$version.so", $libdir, 755 ],
	map { [ $_, $extdir, 644 ] } glob("$pg{sharedir}/extension/durable*"));

# the next versions: this tree under other versions, whose updates lock
# the task table for a second
sub build_version
{
	my ($from, $to) = @_;
	my $dir = "$tmp/$to";
	mkdir $dir;
	system('cp', '-a', 'Makefile', 'durable.control', 'src', 'tools', $dir) == 0 or BAIL_OUT('copy');
	system('find', "$dir/src", '(', '-name', '*.o', '-o', '-name', '*.bc', ')', '-delete') == 0
	  or BAIL_OUT('clean');
	my $control = slurp_file("$dir/durable.control");
	$control =~ s/'\Q$version\E'/'$to'/;
	$control =~ s/durable-\Q$version\E'/durable-$to'/;
	append_to_file("$dir/durable.control.new", $control);
	rename "$dir/durable.control.new", "$dir/durable.control";
	# as an update that changes two tables, in an order of its own
	append_to_file("$dir/src/sql/updates/$from--$to.sql", q{
LOCK TABLE durable.task_history IN ACCESS EXCLUSIVE MODE;
LOCK TABLE durable.live_tasks IN ACCESS EXCLUSIVE MODE;
ALTER TABLE durable.live_tasks ALTER COLUMN payload SET STATISTICS 500;
SELECT pg_catalog.pg_sleep(1);
});
	run_or_bail("the scripts of $to", [ "$dir/tools/sql-scripts" ]);
	run_or_bail("the build of $to", [ 'make', '-s', '-C', $dir, 'with_llvm=no', "PG_CONFIG=$pg_config" ]);
	return $dir;
}
(my $next_version = $version) =~ s/(\d+)$/$1 + 1/e;
(my $last_version = $next_version) =~ s/(\d+)$/$1 + 1/e;
my $next = build_version($version, $next_version);
my $last = build_version($next_version, $last_version);

my $node = PostgreSQL::Test::Cluster->new('live', install_path => dirname("$tree$pg{bindir}"));
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.database = 'postgres'
durable.reconcile_interval = 100
fsync = off
max_connections = 40
max_prepared_transactions = 2
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
	$previous, "the server runs durable $previous");
$node->safe_psql('postgres', q{
	SELECT durable_create_queue('live');
	CREATE TABLE produced (task_id bigint PRIMARY KEY);
});

my $script_dir = "$tmp/scripts";
mkdir $script_dir;
append_to_file("$script_dir/produce.sql",
	"INSERT INTO produced SELECT durable_enqueue('live', '{}');\n");
append_to_file("$script_dir/work.sql",
	"SELECT durable_commit(task_id, fence, '{}') FROM durable_claim('live', 'w');\n");

sub produced { $node->safe_psql('postgres', 'SELECT count(*) FROM produced') }

# pgbench, its producers and workers, until stopped; bounded by the test.
# It runs again, as clients do, a transaction that failed with 40001 or
# 40P01; any other error aborts the client that met it.
sub start_load
{
	my %load = (err => '');
	$load{h} = IPC::Run::start(
		[ "$tree$pg{bindir}/pgbench", '-n', '-c', '4', '-T', '100000', '--max-tries', '1000',
		  '-f', "$script_dir/produce.sql", '-f', "$script_dir/work.sql",
		  '-h', $node->host, '-p', $node->port, 'postgres' ],
		'>', \my $out, '2>', \$load{err});
	return \%load;
}

sub stop_load
{
	my ($load) = @_;
	# SIGTERM: a test run in the background ignores SIGINT, and so do its
	# children; every client may have aborted, and pgbench ended, already
	$load->{h}->kill_kill(grace => 10);
	return [ grep { /client \d+ script \d+ aborted/ } split /\n/, $load->{err} ];
}

# more work done than when asked: the load runs
sub wait_for_work
{
	my ($what) = @_;
	my $since = produced();
	ok($node->poll_query_until('postgres', "SELECT count(*) > $since + 200 FROM produced"),
		$what);
}

sub update_to
{
	my ($to) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', 'ALTER EXTENSION durable UPDATE');
	updated_to($to, $ret, $err);
}

# what an update to a version that the preloaded library is not leaves;
# one committed in two phases says nothing
sub updated_to
{
	my ($to, $ret, $err, $prepared) = @_;
	is($ret, 0, "ALTER EXTENSION durable UPDATE to $to") or diag $err;
	like($err, qr/the server runs the library of an earlier version of durable until it restarts/,
		'its NOTICE says the upgrade ends with a restart')
	  unless $prepared;
	is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
		$to, "the extension is at $to");
	is($node->safe_psql('postgres', 'SELECT preloaded, library_version FROM durable.status'),
		"t|$to", "a session runs ${to}'s library beside the preloaded one");
	# the old reconciler waits for an extension of its version; the new one works
	ok($node->poll_query_until('postgres',
			"SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'durable reconciler'"),
		"the reconciler of $to works beside the waiting one of the preloaded library");
}

sub restart_onto
{
	my ($to) = @_;
	$node->restart;
	is($node->safe_psql('postgres', 'SELECT preloaded, library_version FROM durable.status'), "t|$to",
		"after the restart the preloaded library is ${to}'s");
	ok($node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable reconciler'"),
		'one reconciler works');
}

# -- from the version before to this one --

# a psql session fed from the string $in refers to, its output and errors into $out's
sub start_session
{
	my ($in, $out) = @_;
	return IPC::Run::start(
		[ "$tree$pg{bindir}/psql", '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-h', $node->host,
		  '-p', $node->port, 'postgres' ],
		'<', $in, '>', $out, '2>', $out);
}

# a session that called the old library, idle through the update
my ($in, $idle_out) = ('', '');
my $idle = start_session(\$in, \$idle_out);
$in .= "SELECT durable_enqueue('live', '{}') IS NOT NULL AS before;\n";
$idle->pump until $idle_out =~ /^t$/m;

my $load = start_load();
wait_for_work("$previous serves the load");
run_or_bail('install', [ 'install', '-m', $_->[2], $_->[0], "$_->[1]/" ]) for @this;
wait_for_work("$previous serves the load from the files of $version");
update_to($version);
my $aborted = stop_load($load);
my @other = grep { !/ERROR:  extension durable is at version \Q$version\E, but its library is version \Q$previous\E/ } @$aborted;
is_deeply(\@other, [], "only calls in flight at the update's commit were refused, by $previous");
note scalar(@$aborted) . " of 4 sessions had a call refused by $previous at the commit";

$load = start_load();
wait_for_work("run again, the calls go to ${version}'s library beside the preloaded $previous");
is_deeply(stop_load($load), [], 'none of them is refused');
$idle_out = '';
# with what only this version has: its library's code, not the old one's
$in .= "SELECT count(durable_enqueue('live', '{}', fairness_key => 'f')) FROM generate_series(1, 3);\n"
  . "SELECT count(*) FROM (SELECT fairness_key FROM durable.live_tasks UNION ALL SELECT fairness_key FROM durable.task_history) t WHERE fairness_key = 'f';\n\\q\n";
$idle->finish;
is($idle_out, "3\n3\n", "a session of ${previous}'s library calls ${version}'s once the update committed");

restart_onto($version);
$load = start_load();
wait_for_work("$version preloaded serves the load");
is_deeply(stop_load($load), [], 'and refuses no call');

# -- from this version to the next --

$load = start_load();
wait_for_work("$version serves the load");
install_version($next);
wait_for_work("$version serves the load from the files of $next_version");

# this version, installed beside the files of the next, binds its functions
# to its own library (until 0.9.0 its script named the one durable.control
# names, the next version's, and every call was refused)
$node->safe_psql('postgres', 'CREATE DATABASE beside_next');
$node->safe_psql('beside_next', "CREATE EXTENSION durable VERSION '$version'");
is($node->safe_psql('beside_next', q{
	SELECT string_agg(DISTINCT probin, ', ') FROM pg_proc WHERE probin LIKE '%durable%'}),
	"\$libdir/durable-$version",
	"CREATE EXTENSION durable VERSION '$version' beside the files of $next_version binds its own library");
is($node->safe_psql('beside_next', "SELECT durable_create_queue('beside')"), '',
	"and its calls are served");
$node->safe_psql('postgres', 'DROP DATABASE beside_next');

# a tenant's transaction, open when the update starts: the update waits for
# it without holding a lock its next calls need (it would deadlock with
# them, and they would lose), and goes through once it commits.  The update
# commits in two phases, as Citus commits it on a worker: the new version's
# reconciler starts at the PREPARE, and works from the COMMIT PREPARED.
$node->safe_psql('postgres', "SELECT durable_create_queue('tenant')");
my ($tenant_in, $tenant_out) = ('', '');
my $tenant = start_session(\$tenant_in, \$tenant_out);
$tenant_in .= "BEGIN;\nSELECT durable_enqueue('tenant', '{}') IS NOT NULL AS enqueued;\n";
$tenant->pump until $tenant_out =~ /^t$/m;
my $log_offset = -s $node->logfile;
my ($update_err, $update_out) = ('', '');
my $update = IPC::Run::start(
	[ "$tree$pg{bindir}/psql", '-X', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port,
	  '-c', 'BEGIN', '-c', 'ALTER EXTENSION durable UPDATE',
	  '-c', "PREPARE TRANSACTION 'durable_update'", '-c', "COMMIT PREPARED 'durable_update'",
	  'postgres' ],
	'>', \$update_out, '2>', \$update_err);
ok($node->poll_query_until('postgres', q{
	SELECT EXISTS (SELECT FROM pg_stat_activity
		WHERE query LIKE 'ALTER EXTENSION durable UPDATE%' AND wait_event_type = 'Lock')}),
	"the update waits for the tenant's open transaction");
sleep 1;
$tenant_in .= "SELECT count(durable_commit(task_id, fence, '{}')) FROM durable_claim('tenant', 't');\n"
  . "COMMIT;\nSELECT 'committed';\n\\q\n";
$tenant->finish;
is($tenant_out, "BEGIN\nt\n1\nCOMMIT\ncommitted\n",
	"the tenant's next calls in its transaction went on while the update waited, and it committed");
$update->finish;
updated_to($next_version, $? >> 8, $update_err, 'prepared');
ok($node->wait_for_log(qr/durable reconciler of version \Q$version\E stops working: extension "durable" in database "postgres" was updated to version \Q$next_version\E/,
		$log_offset),
	"the reconciler of $version says it stops working and why");
wait_for_work("the same sessions' calls go to $next_version");
is_deeply(stop_load($load), [], "no call refused: the ones in flight at the commit failed with 40001, and ran again");
restart_onto($next_version);

# -- from the next to the last, the restart first --

# the server restarts onto the last version's library while the extension
# is still at the next: the next's library, whose file "make install" of
# the last left in place, serves the next's functions beside it, and the
# next's reconciler works, started by the last's
$load = start_load();
wait_for_work("$next_version serves the load");
install_version($last);
wait_for_work("$next_version serves the load from the files of $last_version");
is_deeply(stop_load($load), [], "no call refused before the restart onto $last_version");
$log_offset = -s $node->logfile;
$node->restart;
is($node->safe_psql('postgres', 'SELECT preloaded, library_version FROM durable.status'),
	"t|$next_version", "after a restart onto ${last_version}'s library, a session runs ${next_version}'s beside it");
ok($node->wait_for_log(qr/Until the update, the reconciler of version \Q$next_version\E works beside this one/,
		$log_offset),
	"the preloaded reconciler of $last_version started the one of $next_version");
# a lease that expires in a queue nobody claims from is the reconciler's
my $lapsed = $node->safe_psql('postgres', q{
	SELECT durable_create_queue('lapse');
	SELECT durable_enqueue('lapse', '{}');
	SELECT task_id FROM durable_claim('lapse', 'gone', lease => '1 second');});
$lapsed = (split /\n/, $lapsed)[-1];
ok($node->poll_query_until('postgres',
		"SELECT state = 'ready' FROM durable.live_tasks WHERE task_id = $lapsed"),
	"${next_version}'s reconciler works until the update: it took back an expired lease");
$load = start_load();
wait_for_work("${next_version}'s library serves the load beside ${last_version}'s");
$log_offset = -s $node->logfile;
my ($ret, $out, $err) = $node->psql('postgres', 'ALTER EXTENSION durable UPDATE');
is($ret, 0, "ALTER EXTENSION durable UPDATE to $last_version, under the load") or diag $err;
wait_for_work("the same sessions' calls go to $last_version, the preloaded library");
is_deeply(stop_load($load), [], "no call refused: the ones in flight at the commit failed with 40001, and ran again");
is($node->safe_psql('postgres', 'SELECT preloaded, library_version FROM durable.status'),
	"t|$last_version", "the update ended the upgrade: sessions run the preloaded $last_version");
ok($node->wait_for_log(qr/durable reconciler of version \Q$next_version\E stops: extension "durable" in database "postgres" is now at version \Q$last_version\E/,
		$log_offset),
	"the reconciler of $next_version says it stops, and why");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable reconciler'"),
	"one reconciler works: the preloaded one of $last_version");
$node->safe_psql('postgres', q{
	SELECT count(durable_commit(task_id, fence, '{}')) FROM durable_claim('lapse', 'back');
	SELECT durable_drop_queue('lapse', cascade => true);});

# -- nothing lost, nothing twice --

my $drained;
for (1 .. 1000)
{
	$drained = $node->safe_psql('postgres', q{
		SELECT count(durable_commit(task_id, fence, '{}')) FROM durable_claim('live', 'drain', batch => 100)});
	last if $drained == 0;
}
is($node->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM durable.live_tasks WHERE queue_name = 'live'),
	       (SELECT count(*) FROM produced p WHERE NOT EXISTS
			(SELECT FROM durable.task_history h WHERE h.task_id = p.task_id AND h.state = 'completed')),
	       (SELECT count(*) - count(DISTINCT task_id) FROM durable.task_history WHERE queue_name = 'live'),
	       (SELECT count(*) FROM durable.task_history WHERE queue_name = 'live') - (SELECT count(*) FROM produced) - 4}),
	'0|0|0|0', 'every task produced completed once, and no other task exists (but the idle session\'s four)');
is($node->safe_psql('postgres', 'SELECT count(*) FROM durable_verify()'), '0', 'durable_verify() is empty');
note produced() . ' tasks produced across two upgrades';

$node->stop;
done_testing();
