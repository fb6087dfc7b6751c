# The version lives in durable.control only: every manifest (META.json, the
# console's, the JavaScript worker's and the TypeScript client's
# package.json, the Python client's pyproject.toml) and the install
# scripts must agree with it, and so must the Debian package's upstream
# version.  durable--0.1.0.sql is never rewritten: every later version is
# reached through a chain of update scripts from it, which CREATE EXTENSION
# follows too.  The docs' worked example of waits is a
# regression test, word for word.
#
# The Makefile builds out of tree as Debian's pg_buildext does it (an empty
# build directory, "make -f <source>/Makefile VPATH=<source>"): a durable.so
# with every C function the scripts name, an install under DESTDIR of the
# control file, every script and durable.so, and nothing written into the
# source tree.
use strict;
use warnings;
use Cwd qw(getcwd);
use File::Find;
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;

my $control = slurp_file('durable.control');
my ($version) = $control =~ /^default_version\s*=\s*'([^']+)'/m;
ok(defined $version, 'durable.control names a default_version');

# every manifest takes its version from durable.control
my $meta = decode_json(slurp_file('META.json'));
is($meta->{version}, $version, 'META.json version matches durable.control');
is($meta->{provides}{durable}{version},
	$version, 'META.json provides the same version');
for my $manifest ('console/package.json', 'examples/ts/package.json',
	'clients/ts/package.json')
{
	(my $lock = $manifest) =~ s/package\.json$/package-lock.json/;
	my $package = decode_json(slurp_file($manifest));
	is($package->{version}, $version,
		"$manifest version matches durable.control");
	my $locked = decode_json(slurp_file($lock));
	is($locked->{version}, $version, "$lock version matches durable.control");
	is($locked->{packages}{''}{version},
		$version, "$lock names the same version for its root package");
}

# the Python client's version, in its pyproject.toml and its module
my ($pyproject) = slurp_file('clients/python/pyproject.toml') =~ /^version\s*=\s*"([^"]+)"/m;
is($pyproject, $version, 'clients/python/pyproject.toml version matches durable.control');
my ($module) = slurp_file('clients/python/src/pgdurable/__init__.py') =~ /^__version__\s*=\s*"([^"]+)"/m;
is($module, $version, 'pgdurable.__version__ matches durable.control');

# the Debian package's version is durable's, with a Debian revision after
# it (debian/changelog's first entry), and the package is built for every
# major META.json says is tested
my ($debian) = slurp_file('debian/changelog') =~ /\A\S+ \(([^)]+)\)/;
my ($upstream) = ($debian // '') =~ /^(?:\d+:)?(.+)-[^-]+$/;
is($upstream, $version,
	"debian/changelog's first entry (" . ($debian // 'none') . ") is version $version");
my @pgversions = sort grep { /\S/ } split /\s+/, slurp_file('debian/pgversions');
is_deeply(\@pgversions, [ sort @{ $meta->{x_postgresql_versions}{tested} } ],
	'debian/pgversions names the majors META.json says are tested');

# META.json's install script is the base of the chain, which CREATE
# EXTENSION runs first at every version
my $file = $meta->{provides}{durable}{file};
is($file, 'durable--0.1.0.sql', "META.json's file is the base install script");
ok(-f $file, "META.json's install script $file exists");
like($meta->{release_status} // '',
	qr/^(stable|testing|unstable)$/, 'META.json has a release_status');
ok($meta->{resources}{repository} && $meta->{resources}{bugtracker},
	'META.json names a repository and a bug tracker');

# follow the update scripts from the base script to the default version
my %next = map { /^durable--([^-]+)--([^-]+)\.sql$/ ? ($1 => $2) : () }
  glob('durable--*--*.sql');
my $at = '0.1.0';
ok(-f "durable--$at.sql", 'the base install script durable--0.1.0.sql exists');
my $steps = 0;
$at = $next{$at} while exists $next{$at} && $steps++ < 100;
is($at, $version, "update scripts lead from 0.1.0 to $version");

# CHANGELOG.md has a section for every version of the chain, newest first
my @chain = ('0.1.0');
push @chain, $next{ $chain[-1] } while exists $next{ $chain[-1] } && @chain < 100;
my @logged = slurp_file('CHANGELOG.md') =~ /^## \[?(\d+\.\d+\.\d+)\]?/mg;
is_deeply(\@logged, [ reverse @chain ],
	'CHANGELOG.md has every version of the chain, newest first');

# the docs' worked examples are regression tests, word for word
my $workflows = slurp_file('docs/workflows.md');
for my $test ('workflow_waits')
{
	my ($block) = $workflows =~ /\(it is the regression test\s+`sql\/$test\.sql`\).*?```sql\n(.*?)```/s;
	# all of it but the cleanup every regression file ends with (the files
	# share one database and run in any order), which is not the example's
	my $file = slurp_file("sql/$test.sql");
	$file =~ s/\n+-- leave nothing behind: .*\z/\n/s;
	is($block, $file, "docs/workflows.md shows sql/$test.sql as it is");
}

# ---- the out-of-tree build, as pg_buildext does it ----

my $src = getcwd();
my $pg_config = $ENV{PG_CONFIG} || 'pg_config';
my $build = PostgreSQL::Test::Utils::tempdir('vpath_build');
my $destdir = PostgreSQL::Test::Utils::tempdir('vpath_destdir');

# what the source tree holds (its test output directory aside), to see that
# the build writes nothing there
sub tree_state
{
	my %state;
	find(
		{
			wanted => sub {
				if ($_ eq "$src/.git" || $_ eq "$src/tmp_check" || m{/node_modules$})
				{
					$File::Find::prune = 1;
					return;
				}
				return if -d $_;
				my @st = lstat($_);
				$state{$_} = "$st[7] $st[9]";
			},
			no_chdir => 1
		},
		$src);
	return \%state;
}
my $before = tree_state();

my @make = ('make', '-C', $build, '-f', "$src/Makefile", "VPATH=$src",
	"PG_CONFIG=$pg_config", 'USE_PGXS=1');
ok(run_log([@make]), 'make -f <source>/Makefile VPATH=<source> in an empty directory');
ok(!-e "$build/examples/durable_worker", 'make builds no example worker program');

# every C function the scripts name, linked into the library of this
# version built here; this version's scripts name it by its file (released
# ones through the control file's module_pathname)
my ($library) = $control =~ /^module_pathname\s*=\s*'\$libdir\/([^']+)'/m;
is($library, "durable-$version", "durable.control binds the scripts to durable-$version, the library of its version");
my @symbols;
for my $script (glob('durable--*.sql'))
{
	push @symbols, slurp_file($script) =~ /'MODULE_PATHNAME'\s*,\s*'(\w+)'/g;
	push @symbols, slurp_file($script) =~ /'\$libdir\/durable-\Q$version\E'\s*,\s*'(\w+)'/g;
}
for my $script ("durable--$version.sql", glob("durable--*--$version.sql"))
{
	my $text = slurp_file($script);
	my @named = $text =~ /AS\s+'(MODULE_PATHNAME|\$libdir\/[^']+)'/g;
	my @own = grep { $_ eq "\$libdir/durable-$version" } @named;
	ok(@own && @own == @named,
		"$script binds its C functions to \$libdir/durable-$version, by the file's name");
}
my %function = map { ($_ => 1) } @symbols;
my %wanted = map { ($_ => 1, "pg_finfo_$_" => 1) } keys %function;
my %defined;
if (-f "$build/durable-$version.so")
{
	my $nm = `nm -D --defined-only '$build/durable-$version.so'`;
	%defined = map { (split ' ')[-1] => 1 } split /\n/, $nm;
}
my @missing = sort grep { !$defined{$_} } keys %wanted;
ok(%function && !@missing,
	"the durable-$version.so built out of tree defines the "
	  . scalar(keys %function)
	  . ' C functions the scripts name')
  or diag('missing: ' . join(' ', @missing[ 0 .. ($#missing < 9 ? $#missing : 9) ]));
my $loader = -f "$build/durable.so" ? `nm -D --defined-only '$build/durable.so'` : '';
ok($loader =~ /\b_PG_init\b/ && $loader !~ /\bpg_finfo_/,
	'and durable.so, the loader, defines no SQL function');

ok(run_log([ @make, 'install', "DESTDIR=$destdir" ]), 'make install DESTDIR=... out of tree');
chomp(my $sharedir = `'$pg_config' --sharedir`);
chomp(my $pkglibdir = `'$pg_config' --pkglibdir`);
my @want = ("$sharedir/extension/durable.control", "$pkglibdir/durable.so",
	"$pkglibdir/durable-$version.so", map { "$sharedir/extension/$_" } glob('durable--*.sql'));
my @absent = grep { !-f "$destdir$_" } @want;
is_deeply(\@absent, [], "it installs durable.control, every script, durable.so and durable-$version.so under DESTDIR");

ok(run_log([ @make, 'worker' ]), 'make worker out of tree');
ok(-x "$build/examples/durable_worker", 'it builds the example worker program in the build directory');

my $after = tree_state();
my @changed = sort grep { ($before->{$_} // '') ne ($after->{$_} // '') }
  keys %{ { %$before, %$after } };
is_deeply(\@changed, [], 'the out-of-tree build wrote nothing into the source tree');

done_testing();
