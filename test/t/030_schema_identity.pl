# A fresh install and an updated one are the same extension.
#
# CREATE EXTENSION durable runs the install script of the current version,
# built from src/sql (tools/sql-scripts); an installation of 0.1.0 updated
# with ALTER EXTENSION durable UPDATE runs every update script instead,
# the last one built from the same sources.  Both databases must end with
# the same schema, object for object: the same tables with their columns
# in the same order, types, defaults, collations, constraints, indexes,
# functions with their bodies and settings, views, comments and
# privileges (pg_dump --binary-upgrade --schema-only, which writes the
# extension's member objects too), the same member objects, the same
# configuration tables, and the same rows in durable's own tables.
#
# Normalised away, and nothing else: OIDs, xids, pg_dump's comment lines
# and the key of its \restrict lines, the clock-seeded values of the id sequences, the missing
# values PostgreSQL keeps for rows older than an ADD COLUMN ... DEFAULT
# (storage, not schema), and the random id and time of the installation
# row.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('identity');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.database = 'postgres'\nfsync = off\n");
$node->start;

# the clock, in milliseconds since 2025-01-01 UTC, before either install:
# the id sequences of both start past it
my $clock_ms = $node->safe_psql('postgres', q{
	SELECT floor(extract(epoch FROM clock_timestamp() - '2025-01-01 00:00:00+00') * 1000)::bigint});
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('postgres', 'CREATE DATABASE updated');
$node->safe_psql('fresh', 'CREATE EXTENSION durable');
$node->safe_psql('updated', "CREATE EXTENSION durable VERSION '0.1.0'");
$node->safe_psql('updated', 'ALTER EXTENSION durable UPDATE');

my $version = $node->safe_psql('fresh',
	q{SELECT default_version FROM pg_available_extensions WHERE name = 'durable'});
is($node->safe_psql($_, q{SELECT extversion FROM pg_extension WHERE extname = 'durable'}),
	$version, "$_: durable $version")
  for qw(fresh updated);
# the fresh database ran the install script of the version, not a chain
ok(-f $node->safe_psql('postgres', q{SELECT setting FROM pg_config WHERE name = 'SHAREDIR'})
	  . "/extension/durable--$version.sql",
	"durable--$version.sql is installed");

# pg_dump's output as objects: its "-- Name: ...; Type: ..." lines start
# one, and everything up to the next is its text, normalised.
sub dump_objects
{
	my ($db, @options) = @_;
	my ($out, $err) = run_command(
		[ 'pg_dump', '--schema-only', @options, '-d', $node->connstr($db) ]);
	die "pg_dump $db: $err" if $err ne '';
	my (%objects, $name);
	$name = '(preamble)';
	for my $line (split /\n/, $out)
	{
		if ($line =~ /^-- (?:Data for )?Name: (.*?); Type: (.*?); Schema: ([^;]*);/)
		{
			$name = "$2 $3.$1";
			$name .= ' #' . (1 + grep { /^\Q$name\E( #\d+)?$/ } keys %objects)
			  if exists $objects{$name};
			$objects{$name} = '';
			next;
		}
		next if $line =~ /^--/ || $line eq '';
		next if $line =~ /^\\(un)?restrict /;
		next if $line =~ /^SELECT pg_catalog\.set_config\('search_path'/;
		next if $line =~ /binary_upgrade_set_next_\w+\(/;
		next if $line =~ /binary_upgrade_set_missing_value\(/;
		$line =~ s/^(SELECT pg_catalog\.binary_upgrade_create_empty_extension\('durable', '\w+', \w+, '[^']*'), '\{[0-9,]*\}'/$1, '{extconfig}'/;
		$line =~ s/\b(relfrozenxid|relminmxid) = '\d+'/$1 = 'N'/g;
		$line =~ s/WHERE oid = '\d+'/WHERE oid = 'N'/;
		$line =~ s/^(SELECT pg_catalog\.setval\('[^']+', )\d+(, \w+\);)$/$1N$2/;
		$objects{$name} .= "$line\n";
	}
	return \%objects;
}

# the objects that differ, each with both texts
sub compare_objects
{
	my ($what, $a, $b) = @_;
	my @differ;
	my %names = map { $_ => 1 } keys %$a, keys %$b;
	for my $name (sort keys %names)
	{
		my $x = $a->{$name} // "(missing)\n";
		my $y = $b->{$name} // "(missing)\n";
		push @differ, "--- $name\nfresh:\n$x" . "updated:\n$y" if $x ne $y;
	}
	ok(!@differ, "$what: fresh and updated are the same, object for object ("
		  . scalar(keys %names) . ' objects)')
	  or diag(join "\n", @differ);
}

compare_objects('pg_dump --schema-only --binary-upgrade',
	dump_objects('fresh', '--binary-upgrade'),
	dump_objects('updated', '--binary-upgrade'));
compare_objects('pg_dump --schema-only',
	dump_objects('fresh'), dump_objects('updated'));

# the same query in both databases gives the same rows
sub same_rows
{
	my ($what, $sql) = @_;
	my $fresh = $node->safe_psql('fresh', $sql);
	my $updated = $node->safe_psql('updated', $sql);
	is($fresh, $updated, $what);
	return $fresh;
}

my $members = same_rows('the member objects of the extension', q{
	SELECT pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)
	FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
	WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	  AND e.extname = 'durable'
	ORDER BY 1});
cmp_ok(scalar(split /\n/, $members), '>', 100, 'the member objects are all there to compare');

same_rows('the configuration tables of the extension', q{
	SELECT coalesce(c.oid::regclass::text, 'OID of no relation') || ' ' || quote_literal(x.condition)
	FROM pg_extension e,
	     unnest(e.extconfig, e.extcondition) x(config, condition)
	     LEFT JOIN pg_class c ON c.oid = x.config
	WHERE e.extname = 'durable'
	ORDER BY 1});

# the rows of every table of durable; the installation's own row is
# random by design (its id and time), so only counted
my $tables = same_rows('the tables of durable', q{
	SELECT c.relname FROM pg_class c
	WHERE c.relnamespace = 'durable'::regnamespace AND c.relkind IN ('r', 'p')
	ORDER BY 1});
for my $table (split /\n/, $tables)
{
	my $sql = $table eq 'installation'
	  ? "SELECT count(*) FROM durable.$table"
	  : "SELECT t::text FROM durable.$table t ORDER BY 1";
	same_rows("the rows of durable.$table", $sql);
}

# the sequences start from the clock in both (values differ by the time
# between the two installations): both are past the clock before them
my $sequences = same_rows('the id sequences start from the clock', qq{
	SELECT sequencename || ' ' || (last_value >= $clock_ms)
	FROM pg_sequences WHERE schemaname = 'durable' ORDER BY 1});
unlike($sequences, qr/ false$/m, 'every id sequence is past the clock before the installs');

$node->stop;
done_testing();
