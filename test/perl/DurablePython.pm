# The Python client library (clients/python) as a user gets it: built as a
# wheel and an sdist from a copy of the source (the build writes into the
# tree it builds), each installed into a fresh virtual environment with
# pip, offline.  The environments see Debian's psycopg
# (--system-site-packages): the library itself comes from the built file.
package DurablePython;

use strict;
use warnings;
use PostgreSQL::Test::Utils;

my $python = '/usr/bin/python3';
my %pip_env = (PIP_NO_CACHE_DIR => 1, PIP_DISABLE_PIP_VERSION_CHECK => 1,
	PIP_NO_INDEX => 1, PYTHONDONTWRITEBYTECODE => 1);

# run a command, its output in the test's log; true when it succeeded
sub run_logged
{
	local %ENV = (%ENV, %pip_env);
	return PostgreSQL::Test::Utils::run_log([@_]);
}

# build(dir): the wheel and the sdist of clients/python, built in dir;
# returns (wheel, sdist), or () when the build failed
sub build
{
	my ($dir) = @_;
	my $src = "$dir/pgdurable-src";
	system('cp', '-R', 'clients/python', $src) == 0 or return ();
	run_logged($python, '-m', 'build', '--no-isolation', '--outdir', "$dir/dist", $src)
	  or return ();
	my ($wheel) = glob("$dir/dist/pgdurable-*-py3-none-any.whl");
	my ($sdist) = glob("$dir/dist/pgdurable-*.tar.gz");
	return $wheel && $sdist ? ($wheel, $sdist) : ();
}

# venv(dir, artifact, system_site_packages): a fresh virtual environment
# with artifact (a wheel or an sdist) installed; returns its python, or
# undef when that failed
sub venv
{
	my ($dir, $artifact, $system) = @_;
	run_logged($python, '-m', 'venv', ($system ? '--system-site-packages' : ()), $dir)
	  or return undef;
	run_logged("$dir/bin/python", '-m', 'pip', 'install', '--no-index', '--no-deps',
		'--no-build-isolation', $artifact)
	  or return undef;
	return "$dir/bin/python";
}

# installed_python(dir): a virtual environment under dir with pgdurable
# installed from its wheel, for running examples/python/worker.py; returns
# (python, undef) or (undef, why not)
sub installed_python
{
	my ($dir) = @_;
	my ($wheel) = build($dir) or return (undef, 'clients/python did not build (see the log)');
	my $venv = venv("$dir/venv", $wheel, 1)
	  or return (undef, 'the wheel did not install into a fresh venv (see the log)');
	return ($venv, undef);
}

1;
