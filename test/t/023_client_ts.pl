# The TypeScript client library (clients/ts, npm package pgdurable) as a
# user gets it: packed with npm pack from a copy of clients/ts, installed
# from that tarball into a fresh project of its own, its declarations
# checked by tsc from the user's side (a typed consumer passes, one that
# names a step class that does not exist fails), and the example worker
# (examples/ts/worker.js) run from that project against a real server and
# the stand-in service of examples/service.sql, which counts effects:
#
# 1.-4. the crash scenarios of DurableWorkerScenarios, which the Python
#    worker runs too (010_reference_workers): SIGKILL in the middle of a
#    step for every class (DURABLE_CRASH_AT), SIGTERM in the middle of a
#    step, connections the server closes, a workflow that waits;
# 5. the SQLSTATE table: 55U01 (durable_expire_lease on a task the worker
#    holds: it drops the task, and finishes it when it comes back), 57014
#    (pg_cancel_backend of a statement blocked on a lock) and 40P01 (a
#    deadlock the worker's statement loses): run again, nothing lost;
# 6. a user's own test: a worker SIGKILLed mid-step under the queue's lease
#    of an hour (no --lease: not 30 s) comes back at once through
#    durable_expire_lease, and a second worker, behind a "pooler" (--pooled:
#    no LISTEN, said once), finishes it, every effect once;
# 7. in session mode an idle worker is woken by durable_ready (LISTEN);
# 8. handlers as they are written (probe.js): one that catches Stopping or
#    LeaveToRecovery and goes on (nothing more called, nothing committed),
#    one whose own connections fail (ECONNREFUSED, its own pg client's
#    57P01: its failure, not the worker's lost connection), a reconcile
#    look-up that throws (logged, the worker goes on), a handler's own
#    40001 (the handler runs again), and a heartbeat that hangs (the worker
#    takes its task for lost once the lease is out);
# 9. a stream a handler writes, read live by another process (readStream),
#    and resumed after a position.
#
# npm needs the registry for pg's metadata (the cache is the test's own;
# the TypeScript compiler is the one tools/test installed in clients/ts).
use strict;
use warnings;
use Cwd qw(getcwd);
use File::Copy qw(copy);
use File::Path qw(make_path);
use IPC::Run;
use JSON::PP;
use Time::HiRes qw(usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurableWorkerScenarios qw(start_worker run_worker tasks_of steps_of effects_of);

my $tree = getcwd();
my $tsc = "$tree/clients/ts/node_modules/typescript/bin/tsc";
if (!-f $tsc)
{
	fail('clients/ts/node_modules is missing: run npm ci in clients/ts (tools/test does)');
	done_testing();
	exit;
}

# ---- the package, as a registry would take it, and a project that installs it ----

my $tmp = PostgreSQL::Test::Utils::tempdir('client_ts');
# npm's cache and home are the test's: the server user's HOME may be unwritable
local $ENV{HOME} = $tmp;
local $ENV{npm_config_cache} = "$tmp/npm-cache";
local $ENV{npm_config_update_notifier} = 'false';
local $ENV{npm_config_fund} = 'false';
local $ENV{npm_config_audit} = 'false';

sub npm
{
	my ($dir, @args) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ 'npm', @args ], '>', \$out, '2>', \$err, init => sub { chdir $dir });
	return ($ok, $out, $err);
}

my $pkg = "$tmp/pgdurable";
make_path("$pkg/src");
copy("clients/ts/$_", "$pkg/$_") or die "copy $_: $!"
  for qw(package.json package-lock.json tsconfig.json README.md);
copy($_, "$pkg/src/") or die "copy $_: $!" for glob('clients/ts/src/*.ts');
symlink("$tree/clients/ts/node_modules", "$pkg/node_modules") or die "symlink: $!";
my ($ok, $out, $err) = npm($pkg, 'pack', '--pack-destination', $tmp);
ok($ok, 'npm pack builds the package (prepare compiles it with tsc)') or diag($err);
my ($tarball) = $out =~ /^(pgdurable-[\d.]+\.tgz)$/m;
my $version = decode_json(slurp_file('clients/ts/package.json'))->{version};
is($tarball, "pgdurable-$version.tgz", "... into $tarball");
my $listing = `tar -tzf '$tmp/$tarball'`;
like($listing, qr{^package/dist/index\.js$}m, '... with the compiled JavaScript');
like($listing, qr{^package/dist/index\.d\.ts$}m, '... and its declarations');
unlike($listing, qr{^package/(src|node_modules)/}m, '... and neither sources nor modules');

my $app = "$tmp/app";
make_path($app);
append_to_file("$app/package.json", encode_json({
	name => 'durable-user', version => '1.0.0', private => JSON::PP::true, type => 'module',
	dependencies => { pgdurable => "file:../$tarball", pg => '^8.13.0' } }));
($ok, $out, $err) = npm($app, 'install', '--prefer-offline', '--loglevel=error');
ok($ok, 'a fresh project installs the tarball') or diag($err);
ok(-f "$app/node_modules/pgdurable/dist/worker.d.ts" && !-l "$app/node_modules/pgdurable",
	'... as a copy of the package, declarations included');

# the example worker, run from the project that installed the package
copy('examples/ts/worker.js', "$app/worker.js") or die "copy worker.js: $!";

# the declarations, checked from the user's side: a typed consumer, and the
# example's JSDoc types (// @ts-check)
append_to_file("$app/tsconfig.json", encode_json({
	compilerOptions => { strict => JSON::PP::true, noEmit => JSON::PP::true, module => 'nodenext',
		moduleResolution => 'nodenext', target => 'es2022', skipLibCheck => JSON::PP::false,
		allowJs => JSON::PP::true, checkJs => JSON::PP::true },
	files => [ 'consumer.ts', 'worker.js' ] }));
my $consumer = <<'TS';
import { Worker, TaskError, reaction, SQLSTATE, type Task, type StepClass } from 'pgdurable';

interface Order { id: number; amount: number }
const cls: StepClass = 'idempotent';
const worker = new Worker({ connectionString: 'postgres:///app', queue: 'orders', name: 'ts-1', pooled: true,
  lookup: async (step: string, key: string) => (step === 'charge' ? { id: key } : null) });
await worker.run(async (task: Task<Order>) => {
  const reserved: { ok: boolean } = await task.step('reserve', cls, { order: task.payload.id }, async () => ({ ok: true }));
  const paid = await task.await<{ amount: number }>('paid', `payment:${task.payload.id}`, { timeout: '3 days' });
  if (paid.status === 'timed_out') throw new TaskError('never paid', 'permanent');
  const child: string = await task.spawn('label', 'labels', { order: task.payload.id });
  const { children } = await task.join('labels', { children: ['label'] });
  await task.sleep('cool-off', '1 hour');
  task.atCommit(async (client) => { await client.query('SELECT 1'); });
  return { reserved: reserved.ok, paid: paid.payload.amount, child, states: children.map((c) => c.state) };
});
const n: number = worker.stats.completed + worker.stats.lookedUp;
console.log(n, reaction(new Error('x')) === 'fail', SQLSTATE.staleFence);
TS
append_to_file("$app/consumer.ts", $consumer);
my ($tsc_out, $tsc_err) = ('', '');
ok(IPC::Run::run([ 'node', $tsc, '-p', $app ], '>', \$tsc_out, '2>', \$tsc_err),
	'tsc checks a typed consumer and the example worker against the installed declarations') or diag($tsc_out . $tsc_err);
(my $wrong = $consumer) =~ s/'idempotent'/'maybe'/;
unlink("$app/consumer.ts");
append_to_file("$app/consumer.ts", $wrong);
ok(!IPC::Run::run([ 'node', $tsc, '-p', $app ], '>', \$tsc_out, '2>', \$tsc_err)
	  && $tsc_out =~ /"maybe".*StepClass/,
	'... and refuses a step class that does not exist') or diag($tsc_out . $tsc_err);
unlink("$app/consumer.ts");

# ---- the worker against a real server ----

my $node = DurableWorkerScenarios::new_node('client_ts');
my $user = $node->safe_psql('postgres', 'SELECT current_user');
my ($host, $port) = ($node->host, $node->port);
my $db = "postgresql://$user\@localhost:$port/postgres?host=$host";
my $service = "postgresql://$user\@localhost:$port/service?host=$host";
my $w = { name => 'js', cmd => [ 'node', "$app/worker.js" ], db => $db, service => $service };

# 1.-4. the crash scenarios every example worker runs
DurableWorkerScenarios::run($node, $w);

# 5. the SQLSTATE table against a real server.  The worker is held in the
# middle of its first step deterministically: its service call waits for a
# lock of the service's effects table that a session of the test holds.
sub hold_effects
{
	my $holder = $node->background_psql('service');
	$holder->query_safe('BEGIN');
	$holder->query_safe('LOCK TABLE effects IN SHARE ROW EXCLUSIVE MODE');
	return $holder;
}

sub waits_on_lock
{
	my ($db, $name) = @_;
	$node->poll_query_until('postgres', qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE datname = '$db' AND application_name = '$name' AND wait_event_type = 'Lock'})
	  or die "$name does not wait on a lock in $db";
}

# 55U01: an operator ends the lease of a task the worker holds
my $queue = 'fenced';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 hour', retry_base => 1, retry_cap => 1);
	SELECT durable_enqueue('$queue', '{"steps": [["reserve", "idempotent"], ["ship", "idempotent"]]}');
});
my $effects_lock = hold_effects();
my $fenced = start_worker($w, $queue, 'fenced', {}, '--idle-exit', '3');
waits_on_lock('service', 'fenced');
is($node->safe_psql('postgres',
		"SELECT durable_expire_lease(task_id, 'a hung worker') FROM durable.tasks WHERE queue_name = '$queue'"),
	'retry_same_activity', 'durable_expire_lease on a task the worker holds: its step in doubt is retried');
$effects_lock->query_safe('COMMIT');
$fenced->{h}->finish;
is($fenced->{h}->full_result(0), 0, 'the worker went on') or diag($fenced->{err});
like($fenced->{err}, qr/task \d+ lost: fencing token \d+ is stale/,
	'... its receipt under the old fence refused with 55U01: it dropped the task');
is(tasks_of($node, $queue, "state || ' attempt ' || attempt"), 'completed attempt 2',
	'... and finished it when it came back');
is(effects_of($node, $queue), '2 2', '... the step it was in resent under its key, every effect once');

# 57014: a statement cancelled (pg_cancel_backend) runs again
$queue = 'cancelled';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 hour');
	SELECT durable_enqueue('$queue', '{"steps": [["reserve", "idempotent"], ["ship", "idempotent"]]}');
});
$effects_lock = hold_effects();
my $cancelled = start_worker($w, $queue, 'cancelled', {}, '--idle-exit', '1');
waits_on_lock('service', 'cancelled');
# its receipt will wait for the task's row
my $task_lock = $node->background_psql('postgres');
$task_lock->query_safe('BEGIN');
$task_lock->query_safe("SELECT 1 FROM durable.live_tasks WHERE queue_name = '$queue' FOR UPDATE");
$effects_lock->query_safe('COMMIT');
waits_on_lock('postgres', 'cancelled');
$node->safe_psql('postgres', q{
	SELECT pg_cancel_backend(pid) FROM pg_stat_activity
	WHERE datname = 'postgres' AND application_name = 'cancelled'});
waits_on_lock('postgres', 'cancelled');
$task_lock->query_safe('COMMIT');
$cancelled->{h}->finish;
is($cancelled->{h}->full_result(0), 0, 'a worker whose statement was cancelled went on')
  or diag($cancelled->{err});
like($cancelled->{err}, qr/canceling statement due to user request \(57014\); retrying the statement/,
	'... running it again (57014), the statement it was');
is(tasks_of($node, $queue, "state || ' attempt ' || attempt") . ' / ' . steps_of($node, $queue, 'max(s.attempt)'),
	'completed attempt 1 / 1', '... with no attempt of the task or a step lost to it');
is(effects_of($node, $queue), '2 2', '... every effect once');
$task_lock->quit;
$effects_lock->quit;

# 40P01: the worker's receipt (which locks the task's row, then the step's)
# deadlocks with a session that locks them the other way round; that
# session's deadlock_timeout is long, so the worker's backend is the one
# that finds the deadlock, and its statement the one rolled back
$queue = 'deadlocked';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 hour');
	SELECT durable_enqueue('$queue', '{"steps": [["reserve", "idempotent"], ["ship", "idempotent"]]}');
});
$effects_lock = hold_effects();
my $deadlocked = start_worker($w, $queue, 'deadlocked', {}, '--idle-exit', '1');
waits_on_lock('service', 'deadlocked');
my $other_way = $node->background_psql('postgres');
$other_way->query_safe('BEGIN');
$other_way->query_safe("SET LOCAL deadlock_timeout = '1h'");
my $other_pid = $other_way->query_safe('SELECT pg_backend_pid()');
$other_way->query_safe(qq{
	SELECT 1 FROM durable.live_steps s JOIN durable.live_tasks t USING (partition_key, task_id)
	WHERE t.queue_name = '$queue' AND s.step = 'reserve' FOR UPDATE OF s});
$effects_lock->query_safe('COMMIT');
waits_on_lock('postgres', 'deadlocked');
$other_way->query_until(qr/locking the task/, qq{\\echo locking the task
	SELECT 1 FROM durable.live_tasks WHERE queue_name = '$queue' FOR UPDATE;
});
# the worker lost the deadlock, and waits again, now for the task's row,
# which the session holds without waiting
$node->poll_query_until('postgres', qq{
	SELECT count(*) = 1 FROM pg_stat_activity
	WHERE datname = 'postgres' AND application_name = 'deadlocked' AND wait_event_type = 'Lock'
	  AND (SELECT wait_event_type FROM pg_stat_activity WHERE pid = $other_pid) IS DISTINCT FROM 'Lock'})
  or die 'the worker did not wait again';
$other_way->query_safe('COMMIT');
$deadlocked->{h}->finish;
is($deadlocked->{h}->full_result(0), 0, 'a worker whose statement lost a deadlock went on')
  or diag($deadlocked->{err});
like($deadlocked->{err}, qr/deadlock detected \(40P01\); retrying/, '... running it again (40P01)');
is(tasks_of($node, $queue, "state || ' attempt ' || attempt") . ' / ' . steps_of($node, $queue, 'max(s.attempt)'),
	'completed attempt 1 / 1', '... with no attempt of the task or a step lost to it');
is(effects_of($node, $queue), '2 2', '... every effect once');
$other_way->quit;
$effects_lock->quit;

# 6. a user's own test of a worker: it dies in the middle of a step under
# the queue's lease of an hour, and the task comes back at once through
# durable_expire_lease, for a second worker behind a pooler
$queue = 'own';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 hour', retry_base => 1, retry_cap => 1);
	SELECT count(durable_enqueue('$queue', '$DurableWorkerScenarios::retry_safe')) FROM generate_series(1, 3);
});
my $doomed = run_worker($w, $queue, 'own-doomed', { DURABLE_CRASH_AT => 'after_call:idempotent' },
	'--batch', '1', '--idle-exit', '0');
is($doomed->{h}->full_result(0) & 127, 9, 'a worker died with SIGKILL right after a call')
  or diag($doomed->{err});
is(tasks_of($node, $queue, "count(*) FILTER (WHERE state = 'running' AND lease_until > now() + interval '59 minutes')"),
	'1', "... holding its task under the queue's lease of an hour (no --lease: not 30 s)");
is($node->safe_psql('postgres', qq{
	SELECT durable_expire_lease(task_id, 'test') FROM durable.tasks
	WHERE queue_name = '$queue' AND state = 'running'}),
	'retry_same_activity', 'durable_expire_lease settles it at once');
is($node->safe_psql('postgres', qq{
	SELECT e.actor || ' ' || (e.detail->>'reason') || ' ' || (e.detail->>'expired_by')
	FROM durable.events e JOIN durable.tasks t USING (partition_key, task_id)
	WHERE t.queue_name = '$queue' AND e.kind = 'lease_expired'}),
	"$user test $user", "... with a 'lease_expired' event naming the caller and the reason");
my $second = run_worker($w, $queue, 'own-second', {}, '--pooled', '--idle-exit', '3');
is($second->{h}->full_result(0), 0, 'a second worker behind a pooler stopped by itself')
  or diag($second->{err});
is(scalar(() = $second->{err} =~ /pooled: no LISTEN/g), 1, '... saying once that it polls');
is(tasks_of($node, $queue, "string_agg(DISTINCT state::text, ',')"), 'completed',
	'... and finished every task, the dead worker\'s too');
is(effects_of($node, $queue), '6 6', '... every effect once');

# 7. in session mode the worker LISTENs: an idle worker that polls every
# ten minutes takes a task of a queue with notify as soon as it is enqueued
$queue = 'notified';
$node->safe_psql('postgres', "SELECT durable_create_queue('$queue', notify => true)");
append_to_file("$app/listener.js", <<"JS");
import { Worker } from 'pgdurable';
const worker = new Worker({ connectionString: '$db', queue: '$queue', name: 'listener', pollMs: 600000 });
await worker.run(async (task) => { worker.stop(); return { woken: true }; });
JS
my %listener = (out => '', err => '');
$listener{h} = IPC::Run::start([ 'node', "$app/listener.js" ], '>', \$listener{out}, '2>', \$listener{err},
	IPC::Run::timeout(120));
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	WHERE application_name = 'listener' AND state = 'idle' AND query LIKE '%durable_claim%'})
  or die 'the listener never went idle';
$node->safe_psql('postgres', "SELECT durable_enqueue('$queue', '{}')");
ok(eval { $listener{h}->finish }, 'an idle worker woke on durable_ready (LISTEN) and took the task')
  or diag($@ . $listener{err});
is(tasks_of($node, $queue, "state || ' ' || (result->>'woken')"), 'completed true', '... and completed it');

# ---- across everything: nothing lost, nothing done twice, every row agrees ----
DurableWorkerScenarios::check_everything($node);

# 8. handlers that do what handlers do: catch errors, fail on their own, and
# meet a look-up that fails.  probe.js is a worker of its own per case; its
# calls are counted in probe_calls.
$node->safe_psql('postgres', 'CREATE TABLE probe_calls (queue text, step text)');
append_to_file("$app/probe.js", <<'JS');
import net from 'node:net';
import pg from 'pg';
import { Worker } from 'pgdurable';
const [mode, db, queue] = process.argv.slice(2);
const own = new pg.Client({ connectionString: db }); // the application's own client
own.on('error', () => {});
await own.connect();
const called = (step) => own.query('INSERT INTO probe_calls VALUES ($1, $2)', [queue, step]);
const fallible = async (step) => { await called(step); throw new Error(`${step}: no answer`); };
let runs = 0;
const worker = new Worker({ connectionString: db, queue, name: `probe-${mode}`, pollMs: 100,
  idleExit: mode === 'apperror' ? -1 : 1,
  lookup: async () => { throw new Error('the payments API is down'); } });
const handlers = {
  async stopping(task) { // a worker asked to stop while a handler catches everything
    await task.step('first', 'idempotent', {}, async () => { await called('first'); worker.stop(); return 1; });
    try { await task.step('second', 'idempotent', {}, () => called('second')); } catch (e) { console.error(`caught ${e.name}`); }
    return { fallback: true };
  },
  async doubt(task) { // an unsafe call with no answer, then another side effect
    try { await task.step('charge', 'unsafe', {}, () => fallible('charge')); } catch (e) { console.error(`caught ${e.name}`); }
    await task.step('email', 'idempotent', {}, () => called('email')).catch((e) => console.error(`caught ${e.name}`));
    return { fallback: true };
  },
  async apperror(task) { // the handler's own connections fail: the handler's failure
    runs++;
    await task.step('a', 'idempotent', {}, () => called('a'));
    if (task.attempt === 1)
      await new Promise((_, reject) => net.connect(1, '127.0.0.1').on('error', reject)); // ECONNREFUSED
    const mine = new pg.Client({ connectionString: db });
    mine.on('error', () => {});
    await mine.connect();
    await mine.query('SELECT pg_terminate_backend(pg_backend_pid())'); // 57P01
  },
  async streams(task) { // a model's tokens, read live by another process
    await task.stream('tokens', 'a');
    await new Promise((resolve) => setTimeout(resolve, 300));
    await task.stream('tokens', { b: 2 });
    return { end: await task.closeStream('tokens') };
  },
  async rolledback(task) { // the handler's own statement rolled back (40001)
    runs++;
    await task.step('a', 'idempotent', {}, () => called('a'));
    if (runs < 3) await own.query("DO $$ BEGIN RAISE EXCEPTION 'could not serialize' USING ERRCODE = '40001'; END $$");
    return { runs };
  },
};
await worker.run(handlers[mode] ?? (async () => {}));
await own.end();
console.error(`probe stopped: ${JSON.stringify(worker.stats)}`);
JS

sub probe
{
	my ($mode, $queue, $env) = @_;
	my %run = (out => '', err => '');
	local %ENV = (%ENV, %{ $env // {} });
	$run{h} = IPC::Run::start([ 'node', "$app/probe.js", $mode, $db, $queue ],
		'>', \$run{out}, '2>', \$run{err}, IPC::Run::timeout(300));
	return \%run;
}

sub calls_of
{
	my ($queue) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(step || ' ' || n, ', ' ORDER BY step), '')"
		  . " FROM (SELECT step, count(*) n FROM probe_calls WHERE queue = '$queue' GROUP BY step) c");
}

# a handler that catches Stopping and returns a fallback: nothing committed,
# the task given back at once
$queue = 'stopping';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 hour');
	SELECT durable_enqueue('$queue', '{}');
});
my $probe = probe('stopping', $queue);
$probe->{h}->finish;
is($probe->{h}->full_result(0), 0, 'a handler that caught Stopping: the worker stopped') or diag($probe->{err});
like($probe->{err}, qr/caught Stopping/, '... the handler caught it');
is(tasks_of($node, $queue, "state || ' attempt ' || attempt || ' ' || coalesce(result::text, 'no result')"),
	'ready attempt 0 no result', '... and its fallback was not committed: the task was given back');
is(calls_of($queue), 'first 1', '... no step after the stop was called');

# a handler that catches LeaveToRecovery (an unsafe call in doubt) and goes
# on: no later step is called, nothing is committed
$queue = 'doubt';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 hour');
	SELECT durable_enqueue('$queue', '{}');
});
$probe = probe('doubt', $queue);
$probe->{h}->finish;
is($probe->{h}->full_result(0), 0, 'a handler that caught LeaveToRecovery: the worker went on') or diag($probe->{err});
like($probe->{err}, qr/caught LeaveToRecovery.*caught LeaveToRecovery/s, '... the handler caught it, twice');
is(calls_of($queue), 'charge 1', '... no side effect after the one in doubt');
is(steps_of($node, $queue, "string_agg(s.step || ' ' || s.state, ', ')") . ' / ' . tasks_of($node, $queue, 'state'),
	'charge unknown / running', '... and nothing committed: the task is left to its lease and recovery');

# errors of the handler's own connections (ECONNREFUSED, 57P01 of its own pg
# client) fail the task; the worker's connection is not lost, nothing is
# given back, and the task ends at max_attempts
$queue = 'apperror';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 hour', max_attempts => 2, retry_base => 1, retry_cap => 1);
	SELECT durable_enqueue('$queue', '{}');
});
my $released = "SELECT count(*) FROM durable.events e JOIN durable.tasks t USING (partition_key, task_id)"
  . " WHERE t.queue_name = '$queue' AND e.kind = 'released'";
$probe = probe('apperror', $queue);
$node->poll_query_until('postgres', qq{
	SELECT (SELECT state FROM durable.tasks WHERE queue_name = '$queue') = 'failed' OR ($released) >= 2})
  or die 'the task neither failed nor was given back';
$probe->{h}->signal('TERM');
$probe->{h}->finish;
is($node->safe_psql('postgres', $released) . ' / ' . tasks_of($node, $queue, "state || ' attempt ' || attempt"),
	'0 / failed attempt 2',
	'errors of the handler\'s own connections failed the task at max_attempts, nothing given back')
  or diag($probe->{err});
unlike($probe->{err}, qr/reconnecting/, '... the worker never took them for its own lost connection');
like($probe->{err}, qr/ECONNREFUSED.*terminating connection due to administrator command/s,
	'... both errors recorded as the handler\'s failures');

# a look-up that fails in the reconcile path: logged, the task left to its
# lease, the worker goes on
$queue = 'lookup';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 hour');
	SELECT durable_enqueue('$queue', '{}');
	SELECT durable_step_start(c.task_id, c.fence, 'charge',
		(SELECT version FROM durable_step(c.task_id, c.fence, 'charge', 'queryable', '{}')))
	FROM durable_claim('$queue', 'gone', NULL, 1) c;
});
is($node->safe_psql('postgres',
		"SELECT durable_expire_lease(task_id, 'test') FROM durable.tasks WHERE queue_name = '$queue'"),
	'reconcile', 'a queryable step in doubt waits for a reconcile handler');
$probe = probe('lookup', $queue);
$probe->{h}->finish;
is($probe->{h}->full_result(0), 0, 'a reconcile handler whose look-up failed went on') or diag($probe->{err});
like($probe->{err}, qr/lookup of step charge of task \d+ failed: the payments API is down; left to its lease/,
	'... saying so');
is(steps_of($node, $queue, "s.state || ' ' || coalesce(s.receipt, 'no receipt')"), 'unknown no receipt',
	'... and recorded nothing for the step');

# a handler's own statement rolled back (40001): the handler runs again from
# the top, its committed steps not called again, no attempt used
$queue = 'rolledback';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 hour');
	SELECT durable_enqueue('$queue', '{}');
});
$probe = probe('rolledback', $queue);
$probe->{h}->finish;
is(scalar(() = $probe->{err} =~ /could not serialize \(40001\); running the handler again/g), 2,
	'a handler whose statement was rolled back (40001) ran again, twice') or diag($probe->{err});
is(tasks_of($node, $queue, "state || ' attempt ' || attempt || ' ' || result"), 'completed attempt 1 {"runs": 3}',
	'... and completed at its first attempt');
is(calls_of($queue), 'a 1', '... its committed step not called again');

# the heartbeat hangs (its statement waits for the task's row, which a
# session of the test holds) while the worker is in a call: once the lease
# is out the worker takes the task for lost itself, before it sends anything
# more for it, instead of waiting on the hung statement's fate
$queue = 'watchdog';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '3 s', retry_base => 1, retry_cap => 1);
	SELECT durable_enqueue('$queue', '{"steps": [["reserve", "idempotent"], ["ship", "idempotent"]]}');
});
$effects_lock = hold_effects();
my $watched = start_worker($w, $queue, 'watchdog', {});
waits_on_lock('service', 'watchdog');
my $row_lock = $node->background_psql('postgres');
$row_lock->query_safe('BEGIN');
$row_lock->query_safe("SELECT 1 FROM durable.live_tasks WHERE queue_name = '$queue' FOR UPDATE");
$node->poll_query_until('postgres',
	"SELECT lease_until < now() FROM durable.tasks WHERE queue_name = '$queue'")
  or die 'the lease never ran out';
$effects_lock->query_safe('COMMIT');
# the call returns; the worker either knows the task is lost, or sends its
# receipt, which waits for the task's row
my $worker_waits = "SELECT count(*) FROM pg_stat_activity WHERE datname = 'postgres'"
  . " AND application_name = 'watchdog' AND wait_event_type = 'Lock'";
until ($watched->{err} =~ /task \d+ lost/ || $node->safe_psql('postgres', $worker_waits) ne '0')
{
	$watched->{h}->pump_nb;
	usleep(100_000);
}
like($watched->{err}, qr/task \d+ lost: no lease renewal for \d+ ms of its \d+ ms lease/,
	'a worker whose heartbeat hung took its task for lost once the lease was out') or diag($watched->{err});
like($watched->{err}, qr/heartbeat: .*; reconnecting/, '... its beats timed out instead of waiting for good');
$row_lock->query_safe('COMMIT');
$row_lock->quit;
$effects_lock->quit;
$node->poll_query_until('postgres',
	"SELECT state = 'completed' FROM durable.tasks WHERE queue_name = '$queue'")
  or die 'the task was never completed';
$watched->{h}->signal('TERM');
$watched->{h}->finish;
is(effects_of($node, $queue), '2 2', '... and finished it when it came back, every effect once');

# 9. a stream: a handler appends to it and closes it; a reader started
# before the task runs reads it as it is written (woken by LISTEN) until its
# end, and one started after a position reads the rest
append_to_file("$app/reader.js", <<'JS');
import { readStream } from 'pgdurable';
const [db, taskId, after] = process.argv.slice(2);
const seen = [];
for await (const c of readStream(db, taskId, 'tokens', { after: Number(after), poll: 60000 })) seen.push([c.seq, c.chunk]);
console.log(JSON.stringify(seen));
JS
$queue = 'streams';
my $task = $node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 hour');
	SELECT durable_enqueue('$queue', '{}');
});
$task = (split /\n/, $task)[-1];
my %reader = (out => '', err => '');
$reader{h} = IPC::Run::start([ 'node', "$app/reader.js", $db, $task, 0 ],
	'>', \$reader{out}, '2>', \$reader{err}, IPC::Run::timeout(60));
$probe = probe('streams', $queue);
$probe->{h}->finish;
$reader{h}->finish;
is($reader{out}, qq{[[1,"a"],[2,{"b":2}]]\n}, 'a reader read the stream as the handler wrote it, to its end')
  or diag($reader{err});
is(tasks_of($node, $queue, 'result::text'), '{"end": 3}', '... which the handler closed at position 3');
my ($rest, $rest_err) = ('', '');
IPC::Run::run([ 'node', "$app/reader.js", $db, $task, 1 ], '>', \$rest, '2>', \$rest_err);
is($rest, qq{[[2,{"b":2}]]\n}, '... and one that resumed after position 1 read the rest') or diag($rest_err);

is($node->safe_psql('postgres', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() reports nothing after the handlers\' cases');

$node->stop;
done_testing();
