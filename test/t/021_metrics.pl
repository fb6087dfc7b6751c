# Metrics from the database: durable_metrics_prometheus() passes
# `promtool check metrics` (Debian's prometheus package), its counters
# equal what the tables say, the alert rules pass their promtool tests, a
# stock postgres_exporter with metrics/postgres_exporter.yaml exposes the
# same series under the same names, and a real Prometheus (on loopback) that
# scrapes them sees no counter go back when retention removes history:
# durable_tasks_completed_total is monotonic where durable.queue_stats'
# completed, a count of the history kept, drops.  Then the same without
# preloading: the gauges are there, and the counters say they need the
# preload.
#
# Prometheus scrapes the console's /metrics (console/, which answers with
# `SELECT durable_metrics_prometheus()`), logged in with HTTP Basic as a
# pg_monitor-only role.  Retention is made to remove the tasks by ageing
# their finish by ten days, instead of waiting a week.
use strict;
use warnings;
use IPC::Run;
use HTTP::Tiny;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use DurableNode;

my ($bindir) = grep { -x "$_/promtool" && -x "$_/prometheus" } split /:/, $ENV{PATH};
plan skip_all => 'promtool and prometheus are not installed (Debian: prometheus)' unless $bindir;
my $promtool = "$bindir/promtool";

my $node = DurableNode::new_node('metrics', "durable.reconcile_interval = '200ms'");
sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(q{SELECT durable_create_queue('mq', lease => '1 minute', max_attempts => 1)});
sql(q{SELECT count(durable_enqueue('mq', jsonb_build_object('n', n))) FROM generate_series(1, 30) n});
sql(q{SELECT count(durable_commit(task_id, fence)) FROM durable_claim('mq', 'w', batch => 20) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun});
sql(q{SELECT count(durable_fail(task_id, fence, 'permanent')) FROM durable_claim('mq', 'w', batch => 5) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun});

# the format, as Prometheus' own tool reads it
my $text = sql('SELECT durable_metrics_prometheus()') . "\n";
my ($out, $err) = ('', '');
my $ok = IPC::Run::run([ $promtool, 'check', 'metrics' ], '<', \$text, '>', \$out, '2>', \$err);
ok($ok, 'promtool check metrics finds nothing wrong') or diag("$out$err");

sub metric
{
	my ($name) = @_;
	my $t = sql('SELECT durable_metrics_prometheus()');
	return $t =~ /^\Q$name\E (\S+)$/m ? $1 : undef;
}
is(metric('durable_tasks_completed_total{queue="mq"}'),
	sql(q{SELECT count(*) FROM durable.tasks WHERE queue_name = 'mq' AND state = 'completed'}),
	'completed_total is what history says');
is(metric('durable_tasks_dead_lettered_total{queue="mq"}'), '5', 'the failures are dead letters');
is(metric('durable_tasks{queue="mq",state="ready"}'), '5', 'the gauge of ready tasks');
is(metric('durable_queue_latency_seconds_count{queue="mq"}'), '25', 'a latency observed per claim');

# every series the Grafana dashboard draws is one durable exposes
my %exposed = map { /^(durable_\w+)/ ? ($1 => 1) : () } split /\n/, $text;
my $dashboard = slurp_file('metrics/grafana-dashboard.json');
my %drawn = map { $_ => 1 } map { /\b(durable_\w+)/g } $dashboard =~ /"expr": "([^"]*)"/g;
my @missing = grep { !$exposed{$_} } sort keys %drawn;
is("@missing", '', 'every series of metrics/grafana-dashboard.json is exposed');
cmp_ok(scalar(keys %drawn), '>=', 10, 'and the dashboard draws them');

# the alert rules: promtool checks them and runs their tests
($out, $err) = ('', '');
ok(IPC::Run::run([ $promtool, 'check', 'rules', 'metrics/alerts.yml' ], '>', \$out, '2>', \$err),
	'promtool check rules takes metrics/alerts.yml') or diag("$out$err");
($out, $err) = ('', '');
ok(IPC::Run::run([ $promtool, 'test', 'rules', 'metrics/alerts.test.yml' ], '>', \$out, '2>', \$err),
	'and each rule fires on what it is for, not on what is normal (alerts.test.yml)') or diag("$out$err");
my %alerted = map { /\b(durable_\w+)/g } slurp_file('metrics/alerts.yml') =~ /^\s+expr: (.*)$/mg;
my %families = map { $_ => 1 } $text =~ /^# TYPE (durable_\w+) /mg;
my @unexposed = grep { !$families{$_} } sort keys %alerted;
is("@unexposed", '', 'every series an alert reads is one durable exposes');

# A stock postgres_exporter, run as a pg_monitor-only role with
# metrics/postgres_exporter.yaml, exposes the same series under the same
# names and labels (and its own "server"), with the same values but for
# the ages and the reconciler's ticks, which move between two reads.
sql(q{CREATE ROLE scraper LOGIN IN ROLE pg_monitor});
sql(q{SELECT durable_create_queue('stuckq', lease => '1 hour', progress_timeout => '1 second')});
sql(q{SELECT durable_enqueue('stuckq', '{}')});
sql(q{SELECT count(*) FROM durable_claim('stuckq', 'hangs') claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun});
sql(q{SELECT durable_create_budget('exported', 100)});
sql(q{SELECT durable_create_queue('fairq')});
sql(q{SELECT durable_enqueue('fairq', '{}', fairness_key => k) FROM unnest(ARRAY['a', 'b']) k});
usleep(1_100_000);
my ($exporter_bin) = grep { -x "$_/prometheus-postgres-exporter" } split /:/, $ENV{PATH};
SKIP:
{
	skip 'prometheus-postgres-exporter is not installed (Debian: prometheus-postgres-exporter)', 6
	  unless $exporter_bin;
	# the series as durable gives them, and as the exporter does
	sub series
	{
		my ($text) = @_;
		my %series;
		for (split /\n/, $text)
		{
			next unless /^(durable_\w+)(?:\{(.*)\})? (\S+)$/;
			my ($name, $labels, $value) = ($1, $2 // '', $3);
			my @labels = sort grep { !/^server=/ } $labels =~ /(\w+="(?:[^"\\]|\\.)*")/g;
			$series{"$name\{" . join(',', @labels) . '}'} = $value;
		}
		return %series;
	}
	my $exporter_port = PostgreSQL::Test::Cluster::get_free_port();
	local $ENV{DATA_SOURCE_NAME} = 'host=' . $node->host . ' port=' . $node->port
	  . ' user=scraper dbname=postgres sslmode=disable';
	my $exporter = IPC::Run::start(
		[ "$exporter_bin/prometheus-postgres-exporter", '--disable-default-metrics',
			'--disable-settings-metrics', '--extend.query-path=metrics/postgres_exporter.yaml',
			"--web.listen-address=127.0.0.1:$exporter_port" ],
		'>', PostgreSQL::Test::Utils::tempdir() . '/exporter.log', '2>&1');
	my $http0 = HTTP::Tiny->new(timeout => 10);
	my $scraped = '';
	for (1 .. 100)
	{
		my $r = $http0->get("http://127.0.0.1:$exporter_port/metrics");
		$scraped = $r->{content} if $r->{success};
		last if $scraped =~ /^durable_tasks\{/m;
		usleep(100_000);
	}
	my %durable = series(sql('SELECT durable_metrics_prometheus()'));
	my %exported = series($scraped);
	$exporter->signal('TERM');
	$exporter->finish;
	my @lost = grep { !exists $exported{$_} } sort keys %durable;
	my @extra = grep { !exists $durable{$_} } sort keys %exported;
	is("@lost", '', 'the exporter exposes every series of durable_metrics_prometheus()');
	is("@extra", '', 'and no durable series of its own');
	my $moving = qr/^durable_(?:reconciler_(?:ticks_total|lag_seconds)|oldest_\w+|fairness_oldest_\w+)\{/;
	my @differ = grep { exists $exported{$_} && $_ !~ $moving && $exported{$_} + 0 != $durable{$_} + 0 }
	  sort keys %durable;
	is("@differ", '', 'with the same values');
	is($exported{'durable_stuck_tasks{queue="stuckq"}'}, '1', 'the stuck task is counted');
	cmp_ok(scalar(grep { /_bucket\{/ } keys %exported), '>', 0, 'histograms are there');
	my @undrawn = grep { my $f = $_; !grep { /^\Q$f\E(?:_bucket|_sum|_count)?\{/ } keys %exported } sort keys %drawn;
	is("@undrawn", '', 'every series of the dashboard comes through the exporter');
}

# the console, for Prometheus to scrape as the pg_monitor-only role
my $metrics_port = PostgreSQL::Test::Cluster::get_free_port();
my $console = IPC::Run::start(
	[ 'node', 'console/bin/durable-console.js', '--port', $metrics_port,
		'--database', 'postgresql:///postgres?host=' . $node->host . '&port=' . $node->port ],
	'>', PostgreSQL::Test::Utils::tempdir() . '/console.out', '2>&1');

my $promdir = PostgreSQL::Test::Utils::tempdir();
my $prom_port = PostgreSQL::Test::Cluster::get_free_port();
PostgreSQL::Test::Utils::append_to_file("$promdir/prometheus.yml", <<"EOF");
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: durable
    basic_auth:
      username: scraper
      password: any
    static_configs:
      - targets: ['127.0.0.1:$metrics_port']
EOF
my $prom = IPC::Run::start(
	[ "$bindir/prometheus", "--config.file=$promdir/prometheus.yml", "--storage.tsdb.path=$promdir/data",
		"--web.listen-address=127.0.0.1:$prom_port" ],
	'>', "$promdir/prometheus.log", '2>&1');
my $http = HTTP::Tiny->new(timeout => 10);

sub query
{
	my ($q) = @_;
	my $r = $http->get("http://127.0.0.1:$prom_port/api/v1/query?query=" . join('', map { sprintf '%%%02X', ord } split //, $q));
	return undef unless $r->{success};
	return $r->{content} =~ /"value":\[[0-9.]+,"([^"]+)"\]/ ? $1 : undef;
}

sub wait_for
{
	my ($q, $want) = @_;
	my $deadline = time + 90;
	my $got;
	while (time < $deadline)
	{
		$got = query($q);
		return $got if defined $got && $got eq $want;
		usleep(250_000);
	}
	return $got;
}

is(wait_for('durable_tasks_completed_total{queue="mq"}', '20'), '20',
	'Prometheus scrapes the counters');
is(wait_for('durable_tasks{queue="mq",state="ready"}', '5'), '5', 'and the gauges');

# retention removes the finished tasks: aged by ten days, past the week kept
sql(q{UPDATE durable.task_history SET finished_at = finished_at - interval '10 days' WHERE queue_name = 'mq'});
sql('SELECT count(*) FROM durable_reconcile()');
is(sql(q{SELECT completed + failed FROM durable.queue_stats WHERE queue_name = 'mq'}), '0',
	'retention removed them: the history counts nothing');
sql(q{SELECT count(durable_commit(task_id, fence)) FROM durable_claim('mq', 'w', batch => 5) claimed CROSS JOIN LATERAL durable_begin(claimed.task_id, claimed.fence) begun});
is(wait_for('durable_tasks_completed_total{queue="mq"}', '25'), '25',
	'the counter goes on from where it was');
is(query('resets(durable_tasks_completed_total{queue="mq"}[10m])'), '0',
	'and never went back: rate() stays right');
ok(query('rate(durable_tasks_completed_total{queue="mq"}[10m])') > 0, 'rate() answers');

$prom->signal('TERM');
$prom->finish;
$console->signal('TERM');
$console->finish;
$node->stop;

# without preloading: the gauges, and counters that say they need it
my $plain = PostgreSQL::Test::Cluster->new('metrics_plain');
$plain->init;
$plain->append_conf('postgresql.conf', "fsync = off\n");
$plain->start;
$plain->safe_psql('postgres', 'CREATE EXTENSION durable');
$plain->safe_psql('postgres', q{SELECT durable_create_queue('mq');
	SELECT durable_enqueue('mq', '{}')});
my $plain_text = $plain->safe_psql('postgres', 'SELECT durable_metrics_prometheus()');
like($plain_text, qr/^durable_counters_available 0$/m, 'without preloading the counters say so');
like($plain_text, qr/^durable_tasks\{queue="mq",state="ready"\} 1$/m, 'and the gauges are there');
is($plain->safe_psql('postgres', 'SELECT count(*) FROM durable.queue_counters'), '0',
	'durable.queue_counters is empty');
my ($rc, $stdout, $stderr) = $plain->psql('postgres', 'SELECT durable_reset_counters()');
like($stderr, qr/must be loaded via "shared_preload_libraries"/, 'a reset says what is missing');
$text = $plain_text . "\n";
ok(IPC::Run::run([ $promtool, 'check', 'metrics' ], '<', \$text, '>', \$out, '2>', \$err),
	'promtool takes that too') or diag("$out$err");
$plain->stop;

done_testing();
