# The version lives in durable.control only: META.json and the install
# script must agree with it.
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
ok(-f "durable--$version.sql", "install script durable--$version.sql exists");

done_testing();
