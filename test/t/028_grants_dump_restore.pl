# A queue's grants follow their role by name, not by OID (issue 37,
# finding 8): a database with a queue restricted to role A is dumped and
# restored into a second cluster where A exists under another OID and an
# unrelated role B holds A's old one.  There A works and B gets 42501.  And
# a role that holds a grant cannot be dropped while it does (PostgreSQL
# says what depends on it); REVOKE or DROP OWNED lets it go, and a new role
# of the same name inherits nothing.  DROP EXTENSION takes the grants
# sequences along.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;

my $src = DurableNode::new_node('grants_src');
$src->safe_psql('postgres', 'CREATE DATABASE app');
$src->safe_psql('app', q{
	CREATE EXTENSION durable;
	CREATE ROLE role_a LOGIN IN ROLE durable_producer, durable_worker;
	SELECT durable_create_queue('vault', lease => '1 hour');
	SELECT durable_grant_queue('vault', 'role_a', 'all');
});
my $a_oid = $src->safe_psql('app', "SELECT 'role_a'::regrole::oid");
my $task = $src->safe_psql('app', q{SET ROLE role_a; SELECT durable_enqueue('vault', '{"n": 1}')});
ok($task > 0, 'role_a enqueues into its restricted queue');

my $dump = $src->basedir . '/app.dump';
$src->command_ok([ 'pg_dump', '-Fc', '-d', $src->connstr('app'), '-f', $dump ], 'pg_dump');

# the second cluster: role_b takes role_a's old OID, role_a comes later
my $dst = DurableNode::new_node('grants_dst');
my $taken = $dst->safe_psql('postgres', qq{
	DO \$\$
	DECLARE o oid;
	BEGIN
		LOOP
			CREATE ROLE filler;
			SELECT oid INTO o FROM pg_roles WHERE rolname = 'filler';
			EXIT WHEN o >= $a_oid;
			DROP ROLE filler;
			COMMIT;
		END LOOP;
		ALTER ROLE filler RENAME TO role_b;
	END
	\$\$;
	SELECT 'role_b'::regrole::oid});
is($taken, $a_oid, "role_b holds role_a's old OID in the second cluster");
$dst->safe_psql('postgres', 'CREATE ROLE role_a LOGIN');
isnt($dst->safe_psql('postgres', "SELECT 'role_a'::regrole::oid"), $a_oid,
	'and role_a another one');
$dst->safe_psql('postgres', 'CREATE DATABASE app');
$dst->command_ok([ 'pg_restore', '--exit-on-error', '-d', $dst->connstr('app'), $dump ],
	'pg_restore, without an error');
$dst->safe_psql('app', 'GRANT durable_producer, durable_worker TO role_a, role_b');

my ($ret, $out, $err) = $dst->psql('app',
	"SET ROLE role_a; SELECT task_id FROM durable_claim('vault', 'a-1') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun");
is($ret, 0, 'role_a claims from its queue after the restore') or diag($err);
is($out, $task, 'the task it enqueued before the dump');
($ret, $out, $err) = $dst->psql('app',
	"\\set VERBOSITY sqlstate\nSET ROLE role_b; SELECT durable_enqueue('vault', '{}')");
like($err, qr/42501/, 'role_b, holding role_a\'s old OID, may not enqueue');
($ret, $out, $err) = $dst->psql('app',
	"\\set VERBOSITY sqlstate\nSET ROLE role_b; SELECT count(*) FROM durable_claim('vault', 'b-1') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun");
like($err, qr/42501/, 'nor claim');

# a role with a grant cannot be dropped while it holds it
($ret, $out, $err) = $src->psql('app', 'DROP ROLE role_a');
isnt($ret, 0, 'DROP ROLE of a role with a queue grant is refused');
like($err, qr/cannot be dropped because some objects depend on it/, 'saying why') or diag($err);
like($src->safe_psql('app', q{SET ROLE role_a; SELECT count(*) FROM durable_claim('vault', 'a-1') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun}),
	qr/^1$/, 'and the grant still works');
$src->safe_psql('app', q{
	DROP OWNED BY role_a;
	DROP ROLE role_a;
	CREATE ROLE role_a LOGIN IN ROLE durable_producer, durable_worker;
});
($ret, $out, $err) = $src->psql('app',
	"\\set VERBOSITY sqlstate\nSET ROLE role_a; SELECT durable_enqueue('vault', '{}')");
like($err, qr/42501/, 'after DROP OWNED and DROP ROLE a new role of that name holds nothing');

# the grants sequences go with the extension
$src->safe_psql('app', 'DROP EXTENSION durable');
is($src->safe_psql('app', q{SELECT count(*) FROM pg_class WHERE relname LIKE 'queue\_grants\_%'}),
	'0', 'DROP EXTENSION takes the grants sequences along');

$src->stop;
$dst->stop;
done_testing();
