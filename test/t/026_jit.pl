# durable compiles nothing: its statements are small, run again and again,
# and JIT compilation costs more than it saves (on a Citus node an idle
# reconciler spent two thirds of its time in LLVM; a client's keyed claim
# three quarters of its).
# A server that JIT-compiles every plan (jit_above_cost = 0) must still
# show no JIT-compiled function in any statement the reconciler ran, while
# a client's own statements there are compiled (which proves that the
# check can see compilation at all).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;

# pg_stat_statements counts what was compiled: a server without it (the
# assert-enabled one of tools/cassert builds no contrib) cannot show it
my $pkglibdir = `pg_config --pkglibdir`;
chomp $pkglibdir;
plan skip_all => "pg_stat_statements is not installed in $pkglibdir"
  unless -f "$pkglibdir/pg_stat_statements.so";

my $node = DurableNode::new_node('jit',
	"shared_preload_libraries = 'durable, pg_stat_statements'",
	"pg_stat_statements.track = all",
	"durable.reconcile_interval = '100ms'",
	"jit = on", "jit_above_cost = 0", "jit_inline_above_cost = 0",
	"jit_optimize_above_cost = 0");

# a server built without LLVM, or without its JIT package installed (from
# 18 on Debian's postgresql-NN-jit, which tools/test installs), compiles
# nothing: there is nothing to show
if ($node->safe_psql('postgres', 'SELECT pg_jit_available()') ne 't')
{
	plan skip_all => 'this server cannot JIT-compile (no llvmjit)';
}

# the client's work, uncompiled, so that what is counted below is the
# reconciler's: expired leases for it to settle
$ENV{PGOPTIONS} = '-c jit=off';
$node->safe_psql('postgres', q{
	CREATE EXTENSION pg_stat_statements;
	SELECT durable_create_queue('jit', lease => '1 ms');
	SELECT count(durable_enqueue('jit', jsonb_build_object('n', n))) FROM generate_series(1, 20) n;
	SELECT count(*) FROM durable_claim('jit', 'w', batch => 20) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun;
	SELECT pg_stat_statements_reset();
});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM durable.tasks WHERE queue_name = 'jit' AND state = 'running'});

my $compiled = q{
	SELECT coalesce(sum(jit_functions), 0) FROM pg_stat_statements
	WHERE query ~ 'durable\.(live_tasks|queues|event_log|concurrency_keys)'};
is($node->safe_psql('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_statements WHERE query ~ 'durable\.live_tasks'}), 't',
	"the reconciler's statements are seen");
is($node->safe_psql('postgres', $compiled), '0',
	"no statement of the reconciler was JIT-compiled");

# nor do a client's calls, whatever the session's jit: durable's statements
# run uncompiled (the generic plan of a claim in a queue with a concurrency
# limit compiled its expressions on every call, 35 ms where running them
# took half of one)
{
	local $ENV{PGOPTIONS} = '-c jit=on';
	$node->safe_psql('postgres', q{
		SELECT durable_create_queue('jit_keyed', concurrency_limit => 1);
		SELECT count(durable_enqueue('jit_keyed', jsonb_build_object('n', n),
		                             concurrency_key => 'k' || n % 3))
		FROM generate_series(1, 10) n;
		SELECT pg_stat_statements_reset();
	});
	for my $call (1 .. 3)
	{
		$node->safe_psql('postgres', q{
			SELECT durable_commit(task_id, fence) FROM durable_claim('jit_keyed', 'w') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun});
	}
}
is($node->safe_psql('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_statements WHERE query ~ 'durable\.concurrency_keys'}), 't',
	"the statements of a client's keyed claims are seen");
is($node->safe_psql('postgres', $compiled), '0',
	"no statement of a client's calls was JIT-compiled");

# the check sees compilation where there is some: a client's statement
{
	local $ENV{PGOPTIONS} = '-c jit=on';
	$node->safe_psql('postgres', 'SELECT count(*) FROM durable.live_tasks');
}
cmp_ok($node->safe_psql('postgres', $compiled), '>', 0,
	"a client's statement on the same server is JIT-compiled");

$node->stop;
done_testing();
