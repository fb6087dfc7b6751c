# The Quick start in SQL (docs/quick-start.md) runs as written: its SQL
# block, taken from the page itself, gives what its comments say, and refuses exactly the three
# writes it says are refused.  (test/t/025_docs.pl runs it again with every
# other block marked runnable, and checks the SQLSTATEs its comments name.)
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableNode;
use DurableReadme;

# taken as tools/package takes it for the installed Debian package
my $block = DurableReadme::quick_start(slurp_file('docs/quick-start.md'));
ok(defined $block, 'docs/quick-start.md has a Quick start with an SQL block');
unlike($block, qr/CREATE EXTENSION/, 'which does not create the extension tools/psql made');
unlike($block, qr/\b\d{7,}\b/, 'nor names a literal task id');

my $node = DurableNode::new_node('readme');
my ($rc, $out, $err) = $node->psql('postgres', $block,
	on_error_stop => 0);
my @errors = $err =~ /ERROR:\s+([^\n]*)/g;
is(scalar(@errors), 3, 'three writes are refused')
  or diag($err);
like($errors[0] // '', qr/^55U02: could not change step "send"/,
	"a step's commit under its old version: 55U02");
like($errors[1] // '', qr/^55U01: .*is no longer running under fencing token/,
	'a second commit: no longer running');
like($errors[2] // '', qr/^55U01: fencing token \d+ is stale/, "worker-7's late commit: stale");
like($out, qr/^committed\|3\|\{"message_id": "m-1"\}$/m, 'the step is committed once, at version 3');
like($out, qr/^t$/m, 'an idempotency key returns the same task');
like($out, qr/^t\|1$/m, 'the oldest task comes first, with fence 1');
like($out, qr/^schedule_retry$/m, 'a transient failure schedules a retry');
like($out, qr/^waiting\|1\|t$/m, 'the task waits for its retry');
like($out, qr/^2\|2$/m, 'the retry is claimed with fence 2, attempt 2');
like($out, qr/^4\|claimed\|running\|2\|worker-8\|/m, 'and the history tells it');
is($node->safe_psql('postgres', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() is empty');

$node->stop;
done_testing();
