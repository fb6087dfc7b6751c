# A PgBouncer in front of a PostgreSQL::Test::Cluster node, for the tests
# that run durable's clients through a pooler.
#
#   my $bouncer = DurablePgBouncer->new($node, 'tx', pool_mode => 'transaction',
#                                       default_pool_size => 2);
#   $bouncer->connstr('postgres');   # host=... port=... dbname=postgres user=...
#   $bouncer->url('postgres');       # the same as a URL (node-postgres)
#   $bouncer->admin('SHOW SERVERS'); # its console
#   $bouncer->stop;
#
# It runs in the foreground as the user the test runs as, with its ini, auth
# file, pid file and socket in a directory of the test's, and its log next
# to the node's.  Every database of the node is served under its own name,
# by the node's superuser (trusted, as the node trusts local connections).
# Settings given to new() go into its ini as they are: a setting an older
# PgBouncer does not know makes it refuse to start.  It is stopped by stop(),
# or at the end of the test, also of a failed one.
package DurablePgBouncer;

use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(usleep);

my @running;

# new(node, name, ini setting => value...)
sub new
{
	my ($class, $node, $name, %settings) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir("pgbouncer_$name");
	# a socket's path is limited to about a hundred bytes
	my $socket_dir = length($dir) < 80 ? $dir : PostgreSQL::Test::Utils::tempdir_short();
	my $self = bless {
		name => $name,
		dir => $dir,
		host => $socket_dir,
		port => PostgreSQL::Test::Cluster::get_free_port(),
		user => $node->safe_psql('postgres', 'SELECT current_user'),
		log => "$PostgreSQL::Test::Utils::log_path/pgbouncer_$name.log",
	}, $class;

	my %ini = (
		listen_addr => '127.0.0.1',
		listen_port => $self->{port},
		unix_socket_dir => $socket_dir,
		auth_type => 'trust',
		auth_file => "$dir/userlist.txt",
		admin_users => $self->{user},
		pidfile => "$dir/pgbouncer.pid",
		logfile => $self->{log},
		pool_mode => 'transaction',
		max_client_conn => 500,
		# the server connection used last is handed out first (PgBouncer's
		# default, said here because tests count on it)
		server_round_robin => 0,
		# set by some drivers (JDBC, psycopg's older versions) at startup
		ignore_startup_parameters => 'extra_float_digits',
		%settings);
	append_to_file("$dir/userlist.txt", qq{"$self->{user}" ""\n});
	append_to_file("$dir/pgbouncer.ini", join("\n",
		'[databases]',
		'* = host=' . $node->host . ' port=' . $node->port,
		'[pgbouncer]',
		(map { "$_ = $ini{$_}" } sort keys %ini)) . "\n");

	# Debian installs it in /usr/sbin, which a user's PATH may not name
	my ($bin) = grep { -x } map { "$_/pgbouncer" } split(/:/, $ENV{PATH}), '/usr/sbin';
	die "pgbouncer is not installed (tools/test installs it)\n" unless $bin;
	$self->{handle} = IPC::Run::start([ $bin, "$dir/pgbouncer.ini" ],
		'>', \$self->{out}, '2>', \$self->{err});
	push @running, $self;
	my $waited = 0;
	until ($self->_console_ok('SHOW VERSION'))
	{
		die "pgbouncer $name did not start: $self->{err}\n" . slurp_file($self->{log})
		  if !$self->{handle}->pumpable
		  || ++$waited > 10 * $PostgreSQL::Test::Utils::timeout_default;
		usleep(100_000);
	}
	return $self;
}

sub host { return $_[0]->{host} }
sub port { return $_[0]->{port} }

# a libpq connection string for dbname through the pooler
sub connstr
{
	my ($self, $dbname) = @_;
	return "host=$self->{host} port=$self->{port} dbname=$dbname user=$self->{user}";
}

# the same as a URL, as node-postgres takes it (the socket as ?host=)
sub url
{
	my ($self, $dbname) = @_;
	return "postgresql://$self->{user}\@localhost:$self->{port}/$dbname?host=$self->{host}";
}

sub _console_ok
{
	my ($self, $command) = @_;
	my ($out, $err);
	return IPC::Run::run([ 'psql', '-XAtq', '-d', $self->connstr('pgbouncer'),
			'-c', $command ], '>', \$out, '2>', \$err);
}

# run a command on PgBouncer's console; its rows, fields separated by |
sub admin
{
	my ($self, $command) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'psql', '-XAtq', '-d', $self->connstr('pgbouncer'),
			'-c', $command ], '>', \$out, '2>', \$err)
	  or die "pgbouncer $self->{name}: $command: $err";
	chomp $out;
	return $out;
}

# PgBouncer's version, as a number: 1.18.0 is 11800
sub version
{
	my ($self) = @_;
	my ($major, $minor, $patch) = $self->admin('SHOW VERSION') =~ /(\d+)\.(\d+)\.(\d+)/;
	return $major * 10000 + $minor * 100 + $patch;
}

# stop at once, closing its clients' connections: SHUTDOWN on its console
# does that in every version (SIGTERM waits for the clients from 1.23 on);
# one that does not answer is killed
sub stop
{
	my ($self) = @_;
	return unless $self->{handle};
	eval { $self->admin('SHUTDOWN') };
	$self->{handle}->kill_kill(grace => 5);
	delete $self->{handle};
	@running = grep { $_ != $self } @running;
	return;
}

END
{
	my $status = $?;
	$_->stop for @running;
	$? = $status;
}

1;
