# The version lives in durable.control only: META.json and the install
# scripts must agree with it.  durable--0.1.0.sql is never rewritten: every
# later version is reached through a chain of update scripts from it, which
# CREATE EXTENSION follows too.  The README's worked example of waits is a
# regression test, word for word.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;

my $control = slurp_file('durable.control');
my ($version) = $control =~ /^default_version\s*=\s*'([^']+)'/m;
ok(defined $version, 'durable.control names a default_version');

my $meta = slurp_file('META.json');
my @versions = $meta =~ /"version"\s*:\s*"([^"]+)"/g;
is($versions[0], $version, 'META.json version matches durable.control');
is($versions[1], $version, 'META.json provides the same version');
my ($file) = $meta =~ /"file"\s*:\s*"([^"]+)"/;
ok(-f $file, "META.json's install script $file exists");

# follow the update scripts from the base script to the default version
my %next = map { /^durable--([^-]+)--([^-]+)\.sql$/ ? ($1 => $2) : () }
  glob('durable--*--*.sql');
my $at = '0.1.0';
ok(-f "durable--$at.sql", 'the base install script durable--0.1.0.sql exists');
my $steps = 0;
$at = $next{$at} while exists $next{$at} && $steps++ < 100;
is($at, $version, "update scripts lead from 0.1.0 to $version");

# the README's worked examples are regression tests, word for word
my $readme = slurp_file('README.md');
for my $test ('workflow_waits')
{
	my ($block) = $readme =~ /\(it is the regression test\s+`sql\/$test\.sql`\).*?```sql\n(.*?)```/s;
	is($block, slurp_file("sql/$test.sql"), "README shows sql/$test.sql as it is");
}

done_testing();
