# A PostgreSQL::Test::Cluster node with durable preloaded, for durable's
# TAP tests.
package DurableNode;

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

# new_node(name, extra postgresql.conf lines...)
sub new_node
{
	my ($name, @conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', join("\n",
		"shared_preload_libraries = 'durable'",
		"durable.database = 'postgres'",
		"max_connections = 40",
		"fsync = off",
		@conf) . "\n");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION durable');
	return $node;
}

# pid of the running reconciler, or '' when there is none
sub reconciler_pid
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'durable reconciler'");
}

1;
