# The days of history without a reconciler: in a database no reconciler
# serves (durable not preloaded) and no pg_cron schedule reaches, the first
# writes after CREATE EXTENSION start the one-shot worker that makes the
# coming days (the first of all waits for it), so that tasks finished go
# to today's partition of history, not to the default one; nothing is made by CREATE EXTENSION
# itself, so a restore's CREATE EXTENSION meets no day the dump also has.
# With durable preloaded but its reconciler stopped (durable.reconciler_enabled
# off), the same: a served database whose tick does not run is no different.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

sub partition_of
{
	my ($node, $db, $task) = @_;
	return $node->safe_psql($db,
		"SELECT tableoid::regclass FROM durable.task_history WHERE task_id = $task");
}

sub days_made
{
	my ($node, $db) = @_;
	return $node->safe_psql($db, q{
SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'durable'
  AND c.relname ~ '^(task_history|step_history|event_log)_p[0-9]{8}$'});
}

for my $preload (0, 1)
{
	my $what = $preload ? 'preloaded, reconciler off' : 'not preloaded';
	my $node = PostgreSQL::Test::Cluster->new("history_days_$preload");
	$node->init;
	$node->append_conf('postgresql.conf',
		$preload
		? "shared_preload_libraries = 'durable'\ndurable.reconciler_enabled = off\n"
		: "max_worker_processes = 8\n");
	$node->start;
	$node->safe_psql('postgres', 'CREATE DATABASE app');
	$node->safe_psql('app', 'SET client_min_messages = warning; CREATE EXTENSION durable');
	is(days_made($node, 'app'), 0, "$what: CREATE EXTENSION makes no day of history");

	# The first write finds no day and waits for the worker that makes them:
	# what it writes goes to its day, in this backend as in others.
	$node->safe_psql('app', "SELECT durable_create_queue('q')");
	is(days_made($node, 'app'), 0, "$what: nor does creating a queue");
	my $first = $node->safe_psql('app', q{
SELECT durable_enqueue('q', '{}') \gset
SELECT task_id, fence FROM durable_claim('q', 'w') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun \gset
SELECT durable_commit(:task_id, :fence);
SELECT :task_id});
	is(days_made($node, 'app'), 9,
		"$what: the first enqueue made today and the two days after it for each history table");
	like(partition_of($node, 'app', $first), qr/task_history_p\d{8}$/,
		"$what: the first task finished is in its day's partition");
	is($node->safe_psql('app', q{SELECT count(*) FROM durable.event_log_default}), 0,
		"$what: no event went to the default partition");

	# a task finished now goes to a day of its own, in a new backend as in this one
	my $next = $node->safe_psql('app', q{
SELECT durable_enqueue('q', '{}') \gset
SELECT task_id, fence FROM durable_claim('q', 'w') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun \gset
SELECT durable_commit(:task_id, :fence);
SELECT :task_id});
	$next = (split /\n/, $next)[-1];
	like(partition_of($node, 'app', $next), qr/task_history_p\d{8}$/,
		"$what: a task finished after that is in its day's partition");

	my $log = slurp_file($node->logfile);
	unlike($log, qr/could not make|ERROR:  .*maintain_history/, "$what: no day failed to be made");
	$node->stop;
}

done_testing();
