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
#    and resumed after a position;
# 10. producers (producer.js): enqueue in the caller's own transaction (one
#    rolled back leaves no task, one committed does, an error leaves the
#    transaction to the caller), every option of durable_enqueue passed by
#    name, enqueueBatch, debounce, throttle, emit, schedule, and durable's
#    errors as classes by SQLSTATE; result and waitForResult of a task
#    completed, failed, cancelled, never taken (a timeout), unknown;
# 11. durable_begin: a worker killed in its first handler spends that
#    task's attempt only, not those of the rest of its batch; a claimed
#    task taken back before it began is dropped on 55U01, then finished;
# 12. concurrency: N handlers at once on N connections (each waits until
#    all N have arrived), one at a time by default, and lanes whose
#    connections the server closes;
# 13. a worker that cannot connect at start (nothing listens, a role that
#    does not exist): a few attempts, then run() rejects with the reason;
# 14. behind PgBouncer: in transaction mode a worker not told so finds out,
#    says so once, polls and completes its tasks, and a producer enqueues
#    and waits through it; in session mode a worker finds it may LISTEN.
#
# npm needs the registry for pg's metadata (the cache is the test's own;
# the TypeScript compiler is the one tools/test installed in clients/ts).
use strict;
use warnings;
use Cwd qw(getcwd);
use File::Copy qw(copy);
use File::Path qw(make_path);
use IPC::Run;
use Encode qw(encode);
use JSON::PP;
use Time::HiRes qw(usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DurablePgBouncer;
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
import pg from 'pg';
import {
  Worker, TaskError, reaction, SQLSTATE, type Task, type StepClass,
  enqueue, enqueueBatch, debounce, throttle, emit, schedule, unschedule, result, waitForResult,
  DurableError, IdempotencyConflictError, UnknownObjectError, TaskFailedError, TaskCancelledError, TimeoutError,
  type EnqueueOptions, type TaskState,
} from 'pgdurable';

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

// a producer, on a pool's client in its own transaction, and on the pool
const pool = new pg.Pool({ connectionString: 'postgres:///app' });
const c = await pool.connect();
await c.query('BEGIN');
const options: EnqueueOptions = { idempotencyKey: 'order-1', runAt: new Date(), priority: 1, class: 'unsafe',
  maxAttempts: 3, deadline: '1 day', workflowVersion: 'v2', metadata: { by: 'web' }, concurrencyKey: 'c',
  fairnessKey: 'f', rateLimits: { llm: 1 }, budgets: ['llm'], spendLimit: '2.50' };
const id: string = await enqueue(c, 'orders', { id: 1 }, options);
await c.query('COMMIT');
c.release();
const ids: string[] = await enqueueBatch(pool, 'orders', [{ id: 2 }, { id: 3 }], { idempotencyKeys: ['k2', null] });
const later: string = await debounce(pool, 'orders', 'user:1', {}, '5 seconds', { maxWait: '1 minute', mode: 'leading' });
const once: string = await throttle(pool, 'orders', 'user:1', {}, '1 hour');
const emitted: boolean = await emit(pool, 'orders', 'paid:1', { amount: 5 });
const next: Date = await schedule(pool, 'nightly', '0 3 * * *', 'orders', {}, { timezone: 'Europe/Paris' });
const removed: boolean = await unschedule(pool, 'nightly');
const state: TaskState = (await result(pool, ids[0])).state;
try {
  const paid = await waitForResult<{ charge: string }>(pool, id, { timeoutMs: 60_000, maxPollMs: 500 });
  console.log(paid.charge.toUpperCase(), later, once, emitted, next.getTime(), removed, state);
} catch (e) {
  if (e instanceof TaskFailedError) console.log(e.taskId, e.error);
  else if (e instanceof TaskCancelledError) console.log(e.finishedAt);
  else if (e instanceof TimeoutError) console.log(e.state);
  else if (e instanceof IdempotencyConflictError || e instanceof UnknownObjectError) console.log(e.code, e.detail);
  else if (e instanceof DurableError) console.log(e.code, e.cause);
}
new Worker({ connectionString: 'postgres:///app', queue: 'orders', name: 'ts-2', concurrency: 4 });
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
like($listener{err}, qr/not pooled: LISTEN durable_ready \(no pooler: backend \d+ is the one the server gave at connect\)/,
	'... having found at start, not told, that no pooler is in the way');

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
  async crash() { // dies in its handler before any step: of the tasks it holds, only this one began
    process.kill(process.pid, 'SIGKILL');
    await new Promise(() => {});
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

# 10. producers: the caller's own client, in the caller's own transaction
# (the library never begins or commits), every option of durable_enqueue
# passed by name, and durable's errors as classes
$node->safe_psql('postgres', q{
	CREATE TABLE orders (name text);
	CREATE ROLE outsider LOGIN;
	SELECT durable_create_queue('producer');
	SELECT durable_create_queue('fences', lease => '1 hour');
	SELECT durable_set_rate_limit('llm', 10, '1 minute');
	SELECT durable_create_budget('llm', 100);
	SELECT durable_create_budget('tiny', 1);
});
append_to_file("$app/producer.js", <<'JS');
import pg from 'pg';
import {
  enqueue, enqueueBatch, debounce, throttle, emit, schedule, unschedule, result, waitForResult, asDurableError,
  Worker, TaskError, DurableError, TaskFailedError, TaskCancelledError, TimeoutError,
} from 'pgdurable';
const [mode, db, ...args] = process.argv.slice(2);
const client = new pg.Client({ connectionString: db });
await client.connect();
const out = {};
/** what a call threw: its class, code, and whether the pg error is its cause */
const caught = async (f) => {
  try {
    return { returned: await f() };
  } catch (e) {
    return { name: e.name, code: e.code, durable: e instanceof DurableError,
      cause: e.cause instanceof pg.DatabaseError && e.cause.code === e.code, detail: e.detail ?? null };
  }
};
const sql = async (text, values) => (await client.query(text, values)).rows[0];
if (mode === 'transactions') {
  await client.query('BEGIN');
  out.rolledBack = await enqueue(client, 'producer', { order: 'rolled back' });
  await client.query("INSERT INTO orders VALUES ('rolled back')");
  await client.query('ROLLBACK');
  out.unknown = await caught(() => result(client, out.rolledBack));
  await client.query('BEGIN');
  out.committed = await enqueue(client, 'producer', { order: 'committed' });
  await client.query("INSERT INTO orders VALUES ('committed')");
  out.inside = (await result(client, out.committed)).state; // the transaction sees its own task
  out.waitInside = await caught(() => waitForResult(client, out.committed, { timeoutMs: 1000 }));
  await client.query('COMMIT');
  // an error in the caller's transaction leaves it to the caller: still open, aborted
  await client.query('BEGIN');
  out.missing = await caught(() => enqueue(client, 'no such queue', {}));
  out.after = await caught(() => client.query('SELECT 1'));
  await client.query('ROLLBACK');
} else if (mode === 'options') {
  const options = { idempotencyKey: 'order-7', runAt: new Date(Date.UTC(2031, 0, 2, 3, 4, 5)), priority: 7,
    class: 'unsafe', maxAttempts: 5, deadline: '2 days', workflowVersion: 'v2', metadata: { by: 'web' },
    concurrencyKey: 'customer:7', fairnessKey: 'tenant:7', rateLimits: { llm: 2 }, budgets: ['llm'],
    spendLimit: '12.50' };
  out.id = await enqueue(client, 'producer', { order: 7 }, options);
  out.again = await enqueue(client, 'producer', { order: 7 }, options);
  out.conflict = await caught(() => enqueue(client, 'producer', { order: 8 }, options));
  out.plain = await enqueue(client, 'producer'); // no payload, no option: the function's defaults
  const payloads = [{ q: 'say "hi"\\\\ {x, y}' }, ['a', null, 1.5], 'ünïcödé \u{1F600}', null];
  out.batch = await enqueueBatch(client, 'producer', payloads,
    { idempotencyKeys: ['b1', null, 'b3', 'b4'], priority: 3, fairnessKeys: ['f1', 'f1', null, 'f2'] });
  out.batchAgain = await enqueueBatch(client, 'producer', payloads.slice(0, 1), { idempotencyKeys: ['b1'] });
  out.debounced = [await debounce(client, 'producer', 'user:1', { n: 1 }, '1 hour'),
    await debounce(client, 'producer', 'user:1', { n: 2 }, '1 hour', { maxWait: '2 hours' })];
  out.throttled = [await throttle(client, 'producer', 'user:1', { n: 1 }, '1 hour'),
    await throttle(client, 'producer', 'user:1', { n: 2 }, '1 hour')];
  out.emitted = [await emit(client, 'producer', 'paid:7', { amount: 5 }),
    await emit(client, 'producer', 'paid:7', { amount: 5 })];
  out.emitConflict = await caught(() => emit(client, 'producer', 'paid:7', { amount: 6 }));
  const next = await schedule(client, 'nightly', '0 3 * * *', 'producer', { report: true }, { timezone: 'Europe/Paris' });
  out.scheduled = next instanceof Date && next > new Date();
  out.unscheduled = [await unschedule(client, 'nightly'), await unschedule(client, 'nightly')];
  out.badCron = await caught(() => schedule(client, 'bad', 'not a cron', 'producer'));
  out.badClass = await caught(() => enqueue(client, 'producer', {}, { class: 'maybe' }));
  out.unknownQueue = await caught(() => enqueue(client, 'no such queue', {}));
  const outsider = new pg.Client({ connectionString: args[0] });
  await outsider.connect();
  out.denied = await caught(() => enqueue(outsider, 'producer', {}));
  await outsider.end();
  // durable's own refusals of a worker's calls, as asDurableError classes them
  const id = await enqueue(client, 'fences', {}, { budgets: ['tiny'] });
  const { fence } = await sql("SELECT fence FROM durable_claim('fences', 'x')");
  const call = (text, values) => caught(async () => {
    try { return await client.query(text, values); } catch (e) { throw asDurableError(e); }
  });
  out.staleFence = await call('SELECT durable_heartbeat($1, $2)', [id, fence - 1]);
  const { version } = await sql("SELECT version FROM durable_step($1, $2, 's', 'idempotent')", [id, fence]);
  out.versionConflict = await call("SELECT durable_step_start($1, $2, 's', $3)", [id, fence, version + 5]);
  out.budgetExhausted = await call("SELECT durable_step_start($1, $2, 's', $3, reserve => 5)", [id, fence, version]);
  await sql("SELECT durable_step_start($1, $2, 's', $3)", [id, fence, version]);
  out.invalidTransition = await call("SELECT durable_release($1, $2, 'test')", [id, fence]);
} else if (mode === 'results') {
  const [queue, parked] = args;
  const pool = new pg.Pool({ connectionString: db, max: 2 });
  const ids = { ok: await enqueue(pool, queue, { outcome: 'ok' }), failing: await enqueue(pool, queue, { outcome: 'fail' }),
    cancelled: await enqueue(pool, parked, {}), waiting: await enqueue(pool, parked, {}) };
  await pool.query("SELECT durable_cancel($1, 'not needed')", [ids.cancelled]);
  const worker = new Worker({ connectionString: db, queue, name: 'results', pollMs: 50, handleSignals: false });
  const running = worker.run(async (task) => {
    if (task.payload.outcome === 'fail') throw new TaskError('card declined', 'permanent');
    return { echo: task.payload };
  });
  const settled = async (f) => {
    try { return { resolved: await f() }; } catch (e) {
      return { name: e.name, taskId: e.taskId, error: e.error ?? null, state: e.state ?? null,
        finished: e.finishedAt instanceof Date, failed: e instanceof TaskFailedError,
        cancelled: e instanceof TaskCancelledError, timedOut: e instanceof TimeoutError, code: e.code ?? null };
    }
  };
  out.ids = ids;
  out.ok = await settled(() => waitForResult(pool, ids.ok, { timeoutMs: 120_000 }));
  out.failing = await settled(() => waitForResult(pool, BigInt(ids.failing), { timeoutMs: 120_000 }));
  out.cancelled = await settled(() => waitForResult(pool, ids.cancelled, { timeoutMs: 120_000 }));
  // a task no worker takes: the wait times out, whatever the machine's speed
  out.waiting = await settled(() => waitForResult(pool, ids.waiting, { timeoutMs: 300 }));
  out.unknown = await settled(() => result(pool, '999999999'));
  const ac = new AbortController();
  setTimeout(() => ac.abort(new Error('given up')), 100);
  out.aborted = await settled(() => waitForResult(pool, ids.waiting, { signal: ac.signal }));
  out.outcome = await result(pool, ids.ok);
  worker.stop();
  await running;
  await pool.end();
} else if (mode === 'enqueue') { // through a pooler: the caller's transaction on one backend
  await client.query('BEGIN');
  out.ids = await enqueueBatch(client, args[0], JSON.parse(args[1]));
  await client.query('COMMIT');
} else if (mode === 'wait') {
  out.results = [];
  for (const id of args.slice(1)) out.results.push(await waitForResult(client, id, { timeoutMs: Number(args[0]) }));
}
await client.end();
console.log(JSON.stringify(out));
JS

sub producer
{
	my ($mode, $dbs, @args) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ 'node', "$app/producer.js", $mode, $dbs, @args ], '>', \$out, '2>', \$err,
		IPC::Run::timeout(300));
	diag("producer.js $mode: $err") if !$ok;
	return (scalar(eval { decode_json($out) }) // {}, $err);
}

my ($p) = producer('transactions', $db);
is($node->safe_psql('postgres', q{
	SELECT string_agg(task_id || ' ' || (payload->>'order'), ',') FROM durable.tasks WHERE queue_name = 'producer'}),
	"$p->{committed} committed", 'producer: a task enqueued in a transaction that committed exists, with its payload');
is($node->safe_psql('postgres', 'SELECT string_agg(name, \',\') FROM orders'), 'committed',
	'... as the application\'s own write of that transaction does');
is_deeply($p->{unknown}, { name => 'UnknownObjectError', code => '42704', durable => JSON::PP::true,
		cause => JSON::PP::true, detail => $p->{unknown}{detail} },
	'... one enqueued in a transaction rolled back does not: result() of its id is an UnknownObjectError (42704)');
is($p->{inside}, 'ready', '... and the transaction that enqueued a task sees it (its own client\'s transaction)');
is($p->{waitInside}{name}, 'InTransactionError',
	'... but waitForResult refuses to wait in it: no worker could see the task before it ends');
is($p->{missing}{name} . ' ' . $p->{missing}{code}, 'UnknownObjectError 42704',
	'an enqueue that fails in the caller\'s transaction throws the class of its SQLSTATE');
is($p->{after}{code}, '25P02', '... and leaves the transaction to the caller: still open, aborted (no ROLLBACK of its own)');

my ($o, $o_err) = producer('options', $db,
	"postgresql://outsider\@localhost:$port/postgres?host=$host");
my $id = $o->{id} // 0;
is($node->safe_psql('postgres', qq{
	SELECT concat_ws(' | ', idempotency_key, run_at AT TIME ZONE 'UTC', priority, class, max_attempts, deadline,
		workflow_version, metadata, concurrency_key, fairness_key, rate_limits, budgets, payload)
	FROM durable.tasks WHERE task_id = $id}),
	'order-7 | 2031-01-02 03:04:05 | 7 | unsafe | 5 | 2 days | v2 | {"by": "web"} | customer:7 | tenant:7'
	  . ' | {"llm": 2} | {llm,task:' . $id . '} | {"order": 7}',
	'enqueue passes every option of durable_enqueue by name') or diag($o_err);
is($node->safe_psql('postgres', "SELECT amount FROM durable.budgets WHERE name = 'task:$id'"), '12.50',
	'... spendLimit too (the task\'s own budget)');
is($o->{again}, $id, '... the same key and payload return the first task\'s id');
is_deeply([ @{ $o->{conflict} }{qw(name code durable cause)} ],
	[ 'IdempotencyConflictError', '55U03', JSON::PP::true, JSON::PP::true ],
	'... another payload under the key: IdempotencyConflictError (55U03), a DurableError, the pg error its cause');
like($o->{conflict}{detail} // '', qr/Task $id .*another payload/, '... with the server\'s detail');
is($node->safe_psql('postgres', qq{
	SELECT concat_ws(' | ', payload, priority, class, metadata IS NULL, idempotency_key IS NULL)
	FROM durable.tasks WHERE task_id = $o->{plain}}), '{} | 0 | idempotent | t | t',
	'enqueue with no payload and no option: the function\'s defaults');
my $batch = join(',', @{ $o->{batch} // [] });
is($node->safe_psql('postgres', qq{
	SELECT string_agg(concat_ws(' ', payload, coalesce(idempotency_key, '-'), priority, coalesce(fairness_key, '-')), E'\\n' ORDER BY task_id)
	FROM durable.tasks WHERE task_id IN ($batch)}),
	join("\n", '{"q": "say \"hi\"\\\\\\\\ {x, y}"} b1 3 f1', '["a", null, 1.5] - 3 f1',
		encode('UTF-8', qq{"\x{fc}n\x{ef}c\x{f6}d\x{e9} \x{1F600}" b3 3 -}), 'null b4 3 f2'),
	'enqueueBatch: a task per payload, in order, each payload as it was (quotes, backslashes, braces, arrays, null)');
is(scalar(@{ $o->{batch} // [] }) . ' ' . ($o->{batchAgain}[0] // ''), "4 $o->{batch}[0]",
	'... its ids as strings, and a key given again returns its task');
is(join(' ', @{ $o->{debounced} // [] }) =~ /^(\d+) \1$/ && $node->safe_psql('postgres',
		"SELECT payload->>'n' FROM durable.tasks WHERE task_id = $o->{debounced}[0]"), '2',
	'debounce: the calls of a key make one task, with the last payload');
ok(join(' ', @{ $o->{throttled} // [] }) =~ /^(\d+) \1$/, 'throttle: a second call within the period returns the first task');
is(join(' ', map { $_ ? 'true' : 'false' } @{ $o->{emitted} // [] }) . ' ' . ($o->{emitConflict}{name} // ''),
	'true false IdempotencyConflictError', 'emit: true, then false for the same payload, 55U03 for another');
is(join(' ', map { $_ ? 'true' : 'false' } $o->{scheduled}, @{ $o->{unscheduled} // [] }), 'true true false',
	'schedule returns its next run (a Date); unschedule true, then false');
is(join(' ', map { "$o->{$_}{name} $o->{$_}{code}" } qw(badCron badClass unknownQueue denied)),
	'InvalidArgumentError 22023 InvalidArgumentError 22023 UnknownObjectError 42704 PermissionDeniedError 42501',
	'a bad cron or class is InvalidArgumentError, an unknown queue UnknownObjectError, a role without grant PermissionDeniedError');
is(join(' ', map { "$o->{$_}{name} $o->{$_}{code}" } qw(staleFence versionConflict budgetExhausted invalidTransition)),
	'StaleFenceError 55U01 VersionConflictError 55U02 BudgetExhaustedError 55U05 InvalidTransitionError 55U04',
	'asDurableError classes durable\'s refusals by SQLSTATE');

# result and waitForResult: a task completed, one failed, one cancelled, one
# no worker takes (the wait times out), an unknown one
$node->safe_psql('postgres', q{
	SELECT durable_create_queue('results', max_attempts => 1);
	SELECT durable_create_queue('parked');
});
my ($r, $r_err) = producer('results', $db, 'results', 'parked');
is_deeply($r->{ok}, { resolved => { echo => { outcome => 'ok' } } },
	'waitForResult resolves to what the handler returned') or diag($r_err);
is(join(' ', map { $r->{failing}{$_} // '' } qw(name taskId failed finished)) . ' ' . encode_json($r->{failing}{error} // {}),
	"TaskFailedError $r->{ids}{failing} 1 1 " . '{"error":"card declined"}',
	'... rejects with TaskFailedError for a failed task, with its error (its id given as a bigint)');
is(join(' ', map { $r->{cancelled}{$_} // '' } qw(name taskId cancelled)), "TaskCancelledError $r->{ids}{cancelled} 1",
	'... with TaskCancelledError for a cancelled one');
is(join(' ', map { $r->{waiting}{$_} // '' } qw(name state timedOut)), 'TimeoutError ready 1',
	'... with TimeoutError when the time is up first, saying the state it was in');
is($r->{aborted}{name}, 'Error', '... and with the signal\'s reason when aborted');
is(join(' ', map { $r->{unknown}{$_} // '' } qw(name code)), 'UnknownObjectError 42704',
	'result() of an unknown task: UnknownObjectError');
is(join(' ', $r->{outcome}{state} // '', encode_json($r->{outcome}{result} // {}), defined $r->{outcome}{finishedAt} ? 1 : 0),
	'completed {"echo":{"outcome":"ok"}} 1', 'result() reports the state, the result and when it finished');

# 11. begin: the worker says it begins each task right before its handler,
# so a crash costs only the tasks it began.  A worker that claimed three
# tasks dies in its first handler, before any step: that task's attempt is
# spent, the two it never began get theirs back.
$queue = 'unbegun';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 hour', retry_base => 1, retry_cap => 1);
	SELECT count(durable_enqueue('$queue', '{}')) FROM generate_series(1, 3);
});
$probe = probe('crash', $queue);
$probe->{h}->finish;
is($probe->{h}->full_result(0) & 127, 9, 'a worker that claimed three tasks died in its first handler');
is(tasks_of($node, $queue, "count(*) FILTER (WHERE state = 'running') || ' ' || count(*) FILTER (WHERE began_at IS NOT NULL)"),
	'3 1', '... holding the three, one of them begun (durable_begin: no step touched it)');
is($node->safe_psql('postgres', qq{
	SELECT string_agg(a, ' ' ORDER BY a) FROM (
		SELECT durable_expire_lease(task_id, 'test') a FROM durable.tasks WHERE queue_name = '$queue') x}),
	'not_begun not_begun retry_same_activity',
	'... their leases ended: the begun one is retried, the two never begun are not judged');
is(tasks_of($node, $queue, "string_agg(state || ' ' || attempt, ', ' ORDER BY state)"),
	'ready 0, ready 0, waiting 1', '... and have their attempts back');

# 55U01 from durable_begin: a claimed task an operator took back before the
# worker began it is dropped as lost, then claimed again and finished
$queue = 'begun';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 hour');
	SELECT count(durable_enqueue('$queue', '{"steps": [["reserve", "idempotent"]]}')) FROM generate_series(1, 2);
});
$effects_lock = hold_effects();
my $begun = start_worker($w, $queue, 'begun', {}, '--batch', '2', '--idle-exit', '1');
waits_on_lock('service', 'begun');
my $unbegun = $node->safe_psql('postgres',
	"SELECT task_id FROM durable.tasks t WHERE queue_name = '$queue' AND state = 'running'"
	  . ' AND NOT EXISTS (SELECT FROM durable.steps s WHERE s.task_id = t.task_id)');
is($node->safe_psql('postgres', "SELECT durable_expire_lease($unbegun, 'test')"), 'not_begun',
	'a task claimed with another, not begun yet, taken back by an operator');
$effects_lock->query_safe('COMMIT');
$begun->{h}->finish;
is($begun->{h}->full_result(0), 0, '... the worker went on') or diag($begun->{err});
like($begun->{err}, qr/task $unbegun lost: (fencing token \d+ is stale|the heartbeat found it gone)/,
	'... dropped it when it came to begin it (55U01, or its heartbeat found it first)');
is(tasks_of($node, $queue, "string_agg(state || ' attempt ' || attempt, ', ')"), 'completed attempt 1, completed attempt 1',
	'... claimed it again and finished both, no attempt spent on the one taken back');
is(effects_of($node, $queue), '2 2', '... every effect once');
$effects_lock->quit;

# 12. concurrency: one at a time by default (the tasks of a batch one after
# another); with concurrency N, N handlers at once, each lane on a
# connection of its own.  Each handler of the concurrent worker waits until
# all N have arrived: one at a time, the first would wait its 30 s out and
# say it met nobody.
append_to_file("$app/lanes.js", <<'JS');
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'pgdurable';
const [db, queue, concurrency, batch] = process.argv.slice(2);
let active = 0, most = 0, arrived = 0;
const backends = new Set();
const worker = new Worker({ connectionString: db, queue, name: `lanes-${concurrency}`, pollMs: 50, idleExit: 1,
  concurrency: concurrency === 'default' ? undefined : Number(concurrency), batch: Number(batch) });
await worker.run(async (task) => {
  await task.step('first', 'idempotent', {}, async () => 1);
  active++;
  most = Math.max(most, active);
  arrived++;
  const until = Date.now() + 30_000;
  while (arrived < (task.payload.meet ?? 0) && Date.now() < until) await sleep(20);
  const met = arrived;
  await sleep(50);
  active--;
  await task.step('second', 'idempotent', {}, async () => 2);
  task.atCommit(async (c) => { backends.add((await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid); });
  return { met };
});
console.log(JSON.stringify({ most, backends: backends.size, completed: worker.stats.completed }));
JS
$node->safe_psql('postgres', q{
	SELECT durable_create_queue('lanes', lease => '1 hour');
	SELECT count(durable_enqueue('lanes', '{"meet": 3}')) FROM generate_series(1, 3);
	SELECT durable_create_queue('one_lane', lease => '1 hour');
	SELECT count(durable_enqueue('one_lane', '{}')) FROM generate_series(1, 3);
});
my ($lanes, $lanes_err) = ('', '');
IPC::Run::run([ 'node', "$app/lanes.js", $db, 'lanes', 3, 1 ], '>', \$lanes, '2>', \$lanes_err, IPC::Run::timeout(300));
is($lanes, qq{{"most":3,"backends":3,"completed":3}\n},
	'concurrency 3: three handlers at once (claimed one a time as lanes freed), on three connections')
  or diag($lanes_err);
is(tasks_of($node, 'lanes', "string_agg(state || ' ' || (result->>'met'), ', ')"), 'completed 3, completed 3, completed 3',
	'... each met the two others');
like($lanes_err, qr/concurrency 3/, '... as its start line says');
IPC::Run::run([ 'node', "$app/lanes.js", $db, 'one_lane', 'default', 10 ], '>', \$lanes, '2>', \$lanes_err,
	IPC::Run::timeout(300));
is($lanes, qq{{"most":1,"backends":1,"completed":3}\n},
	'by default the handlers of a batch run one at a time, on the worker\'s connection') or diag($lanes_err);

# three lanes whose connections the server closes mid-run (all of the
# worker's: the lanes', the claims', the heartbeat's): the worker waits for
# its lanes, reconnects, gives back what it held, and finishes everything
$queue = 'lanes_reconnect';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 s', retry_base => 1, retry_cap => 1);
	SELECT count(durable_enqueue('$queue', '$DurableWorkerScenarios::retry_safe')) FROM generate_series(1, 12);
});
my $rec = start_worker($w, $queue, 'lanes-reconnect', { DURABLE_CALL_MS => 50 },
	'--lease', '1', '--batch', '2', '--concurrency', '3', '--idle-exit', '3');
$node->poll_query_until('postgres', qq{
	SELECT count(*) >= 3 FROM durable.tasks WHERE queue_name = '$queue' AND state = 'completed'})
  or die 'nothing completed';
$node->safe_psql('postgres', q{
	SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE 'lanes-reconnect%'});
$rec->{h}->finish;
is($rec->{h}->full_result(0), 0, 'a worker of three lanes whose connections were closed went on') or diag($rec->{err});
like($rec->{err}, qr/reconnecting/, '... saying it reconnected');
is(tasks_of($node, $queue, "count(*) FILTER (WHERE state = 'completed')"), '12', '... and finished every task')
  or diag($rec->{err});
is(effects_of($node, $queue), '24 24', '... every effect once');

# 13. fail loud at start: a worker that cannot connect (nothing listens; a
# role that does not exist) tries a few times, then run() rejects with why
append_to_file("$app/start.js", <<'JS');
import { Worker } from 'pgdurable';
const worker = new Worker({ connectionString: process.argv[2], queue: 'nowhere', name: 'no-start' });
try {
  await worker.run(async () => {});
  console.log('run() resolved');
} catch (e) {
  console.log(`run() rejected: ${e.message}`);
  process.exitCode = 3;
}
JS
my $closed = PostgreSQL::Test::Cluster::get_free_port();
my @starts = map {
	my %run = (out => '', err => '');
	$run{h} = IPC::Run::start([ 'node', "$app/start.js", $_ ], '>', \$run{out}, '2>', \$run{err},
		IPC::Run::timeout(120));
	\%run;
} ("postgresql://$user\@127.0.0.1:$closed/postgres", "postgresql://nobody\@localhost:$port/postgres?host=$host");
$_->{h}->finish for @starts;
is(join(' ', map { $_->{h}->full_result(0) >> 8 } @starts), '3 3',
	'a worker that cannot connect at start stops: run() rejects');
like($starts[0]{out}, qr/^run\(\) rejected: could not connect to durable's database \(4 attempts\): .*ECONNREFUSED/m,
	'... with the reason: nothing listens') or diag($starts[0]{out} . $starts[0]{err});
like($starts[1]{out}, qr/^run\(\) rejected: could not connect to durable's database \(4 attempts\): role "nobody" does not exist/m,
	'... or the login is refused') or diag($starts[1]{out} . $starts[1]{err});
is(scalar(() = $starts[1]{err} =~ /could not connect \(role "nobody" does not exist\); attempt [234] of 4 in [124] s/g), 3,
	'... after saying so at each of its attempts') or diag($starts[1]{err});

# 14. behind a transaction-mode PgBouncer, a worker not told so finds out
# (two of its connections share a backend), says so once, does not LISTEN,
# polls, and completes its tasks; a producer enqueues through the same
# pooler in its own transaction and waits for the results (polling)
my $bouncer = DurablePgBouncer->new($node, 'tx', pool_mode => 'transaction', default_pool_size => 2);
$queue = 'bounced';
$node->safe_psql('postgres', qq{SELECT durable_create_queue('$queue', lease => '1 hour', notify => true)});
my ($e) = producer('enqueue', $bouncer->url('postgres'), $queue,
	encode_json([ map { decode_json($DurableWorkerScenarios::retry_safe) } 1 .. 3 ]));
is(scalar(@{ $e->{ids} // [] }), 3, 'a producer enqueued three tasks in a transaction through a transaction-mode pooler');
my $bounced = start_worker({ %$w, db => $bouncer->url('postgres') }, $queue, 'bounced', {}, '--idle-exit', '3');
my ($waited, $waited_err) = producer('wait', $bouncer->url('postgres'), 120_000, @{ $e->{ids} // [] });
$bounced->{h}->finish;
is($bounced->{h}->full_result(0), 0, 'a worker given the pooler\'s connection string, not told it is pooled, stopped by itself')
  or diag($bounced->{err});
is(scalar(() = $bounced->{err} =~ /pooled: no LISTEN \(a transaction-mode pooler: [^)]*\); polling every \d+ ms/g), 1,
	'... saying once that it found a transaction-mode pooler and polls') or diag($bounced->{err});
is(tasks_of($node, $queue, "string_agg(DISTINCT state::text || ' by ' || (result->>'by'), ',')"), 'completed by bounced',
	'... and completed every task');
is(effects_of($node, $queue), '6 6', '... every effect once');
is(join(',', map { $_->{by} // '' } @{ $waited->{results} // [] }), 'bounced,bounced,bounced',
	'the producer waited for each result through the pooler (no LISTEN)') or diag($waited_err);
$bouncer->stop;

# behind a session-mode PgBouncer a worker not told anything keeps LISTEN:
# its connection keeps its backend, which another connection never gets
$bouncer = DurablePgBouncer->new($node, 'session', pool_mode => 'session', default_pool_size => 4);
$queue = 'sessions';
$node->safe_psql('postgres', qq{
	SELECT durable_create_queue('$queue', lease => '1 hour', notify => true);
	SELECT count(durable_enqueue('$queue', '$DurableWorkerScenarios::retry_safe')) FROM generate_series(1, 2);
});
my $session = run_worker({ %$w, db => $bouncer->url('postgres') }, $queue, 'session', {}, '--idle-exit', '1');
is($session->{h}->full_result(0), 0, 'a worker behind a session-mode pooler, not told anything, stopped by itself')
  or diag($session->{err});
like($session->{err}, qr/not pooled: LISTEN durable_ready \(no transaction-mode pooler: the connection kept backend \d+\)/,
	'... saying that it found no transaction-mode pooler, and listens');
is(tasks_of($node, $queue, "string_agg(DISTINCT state::text, ',')") . ' / ' . effects_of($node, $queue),
	'completed / 4 4', '... having completed its tasks, every effect once');
$bouncer->stop;

is($node->safe_psql('postgres', 'SELECT count(*) FROM durable_verify()'), '0',
	'durable_verify() reports nothing after the handlers\', producers\' and pooler\'s cases');

$node->stop;
done_testing();
