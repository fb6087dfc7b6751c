# The window of an upgrade done in the other order (035_live_upgrade.pl
# does it without one): between a restart onto a new library and ALTER
# EXTENSION durable UPDATE, the library refuses every call with 55000.  A worker of either client rides the
# window out: it says why, waits and tries again, does nothing meanwhile,
# and works the queue once the extension is at the library's version; it
# does not exit.  The window is made as the library sees it: pg_extension
# names an older version.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurablePython;
use DurableWorkerScenarios;

my $node = DurableWorkerScenarios::new_node('window');
my $user = $node->safe_psql('postgres', 'SELECT current_user');
my ($host, $port) = ($node->host, $node->port);
my ($python, $why) = DurablePython::installed_python(PostgreSQL::Test::Utils::tempdir('window'));
$python or BAIL_OUT($why);
my $version = $node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'durable'");

sub set_version
{
	my ($v) = @_;
	$node->safe_psql('postgres', "UPDATE pg_extension SET extversion = '$v' WHERE extname = 'durable'");
}

for my $worker ([ python => [ $python, 'examples/python/worker.py' ],
		"host=$host port=$port user=$user dbname=postgres", "host=$host port=$port user=$user dbname=service" ],
	[ js => [ 'node', 'examples/ts/worker.js' ],
		"postgresql://$user\@localhost:$port/postgres?host=$host", "postgresql://$user\@localhost:$port/service?host=$host" ])
{
	my ($name, $cmd, $db, $service) = @$worker;
	my $queue = "window_$name";
	$node->safe_psql('postgres', qq{
		SELECT durable_create_queue('$queue');
		SELECT count(durable_enqueue('$queue', jsonb_build_object('n', n, 'steps', '[]'::jsonb)))
		FROM generate_series(1, 3) n});

	set_version('0.8.0');
	is($node->psql('postgres', "SELECT count(*) FROM durable_claim('$queue', 'probe')"), 3,
		"$name: in the window a call is refused");
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ @$cmd, '--db', $db, '--service', $service, '--queue', $queue,
			'--name', "$name-1", '--idle-exit', '3' ],
		'>', \$out, '2>', \$err);
	my $said = 0;
	for (1 .. 600)
	{
		$h->pump_nb;
		$said = $err =~ /durable refused the worker's call \(extension durable is at version 0\.8\.0/;
		last if $said || !$h->pumpable;
		select(undef, undef, undef, 0.1);
	}
	ok($said, "$name: the worker says why it waits") or diag($err);
	ok($h->pumpable, "$name: ... and goes on running");
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM durable.tasks WHERE queue_name = '$queue' AND state = 'ready' AND fence = 0"),
		'3', "$name: nothing was claimed in the window");

	set_version($version);
	$h->finish;
	is($h->full_result(0), 0, "$name: after the update it worked the queue and left when idle")
	  or diag($err);
	is($node->safe_psql('postgres', qq{
			SELECT count(*) FROM durable.tasks
			WHERE queue_name = '$queue' AND state = 'completed' AND attempt = 1}),
		'3', "$name: every task completed, at its first attempt");
}

# The other side: an update to a later version committed while a session
# runs this version's library, and changed a table as updates do.  Its
# next call fails as a serialization failure, to be run again, when the
# functions are bound to the later version's library (035_live_upgrade.pl),
# not with 55000 or an error about the table's columns.
$node->safe_psql('postgres', "SELECT durable_create_queue('crossed')");
my $crossed = qq{
	SELECT count(durable_enqueue('crossed', '{}'));
	ALTER TABLE durable.live_tasks ADD COLUMN added_later int;
	UPDATE pg_extension SET extversion = '999.0.0' WHERE extname = 'durable';
	SELECT durable_enqueue('crossed', '{}');
};
my ($ret, $out, $err) = $node->psql('postgres', $crossed, on_error_stop => 0);
like($err, qr/ERROR:  extension durable was updated to version 999\.0\.0 during this call/,
	'a call after an update to a later version fails as a serialization failure');
($ret, $out, $err) = $node->psql('postgres', q{
	\set VERBOSITY verbose
	SELECT durable_enqueue('crossed', '{}');}, on_error_stop => 0);
like($err, qr/ERROR:  40001: extension durable was updated/, 'with SQLSTATE 40001');
$node->safe_psql('postgres', qq{
	ALTER TABLE durable.live_tasks DROP COLUMN added_later;
	UPDATE pg_extension SET extversion = '$version' WHERE extname = 'durable';
});
is($node->safe_psql('postgres', "SELECT count(durable_enqueue('crossed', '{}'))"), '1',
	'and succeeds once the version is the library\'s');

$node->stop;
done_testing();
