// Capture the SQL that pg-boss and graphile-worker issue to fetch and to
// complete jobs, by running each library against the benchmark's server and
// recording every query its pg client sends.  The libraries also create their
// own schemas here (pg-boss start(), graphile-worker migrate()).
//
// Writes, into the directory given as the first argument, one pgbench script
// per library and mode (single: fetch one, complete it; batch: fetch 100,
// complete them) that sends the captured statements unchanged.  Only the way
// parameters are bound differs: pgbench binds variables, so where a library
// binds an array built from the fetched jobs, the script builds the same
// array from the fetched rows.  A batch fetch returns many rows, which
// pgbench cannot keep; it runs inside a PL/pgSQL function (plan cached)
// that hands the rows back as jsonb, and the arrays are aggregated from them.
//
// Usage: node capture.mjs OUTDIR   (connection from PGHOST, PGPORT, PGUSER,
// PGDATABASE; the benchmark installs the libraries into a folder and runs
// this script from there)

import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { run, makeWorkerUtils } from 'graphile-worker';

const outdir = process.argv[2];
const BATCH = 100;
const connection = {
	host: process.env.PGHOST, port: Number(process.env.PGPORT),
	user: process.env.PGUSER, database: process.env.PGDATABASE,
};
const connectionString = `postgres://${connection.user}@/${connection.database}` +
	`?host=${encodeURIComponent(connection.host)}&port=${connection.port}`;

// every query any pg client sends, in order
let sent = [];
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (config, values) {
	if (config && typeof config === 'object' && config.text)
		sent.push({ text: config.text, values: config.values ?? values ?? [] });
	else if (typeof config === 'string')
		sent.push({ text: config, values: Array.isArray(values) ? values : [] });
	return query.apply(this, arguments);
};
const lastSent = (pattern) => {
	const found = sent.filter((q) => pattern.test(q.text));
	if (!found.length)
		throw new Error(`no query matching ${pattern} was sent`);
	return found[found.length - 1];
};
const sameValues = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const versionOf = (pkg) => JSON.parse(fs.readFileSync(
	new URL(`node_modules/${pkg}/package.json`, import.meta.url))).version;

const server = new pg.Client(connection);
await server.connect();

// the types the server gives a statement's parameters, for the batch wrapper
async function parameterTypes(text) {
	await server.query(`PREPARE peer_probe AS ${text}`);
	const { rows } = await server.query(
		`SELECT parameter_types::text[] AS types FROM pg_prepared_statements WHERE name = 'peer_probe'`);
	await server.query('DEALLOCATE peer_probe');
	return rows[0].types;
}

// pgbench refers to a variable as :name; with -M prepared it binds it
const dollar = (text, fn) => text.replace(/\$(\d+)/g, (_, n) => fn(Number(n)));

function writeScript(name, lines, defines, source) {
	const terminated = lines.map((l, i) => i === lines.length - 1 && !l.endsWith(';') ? l + ';' : l);
	fs.writeFileSync(path.join(outdir, `${name}.pgbench`), terminated.join('\n') + '\n');
	// one pgbench argument per line
	fs.writeFileSync(path.join(outdir, `${name}.args`),
		Object.entries(defines).map(([k, v]) => `--define=${k}=${v}`).join('\n') + '\n');
	fs.appendFileSync(path.join(outdir, 'SOURCES'), `${name}: ${source}\n`);
}

// psql script that empties a library's jobs and adds :n ready ones; the
// relations its jobs live in, for their size
function writeFill(name, relations, lines) {
	fs.writeFileSync(path.join(outdir, `${name}_fill.sql`), lines.join('\n') + '\n');
	fs.writeFileSync(path.join(outdir, `${name}.relations`), relations.join(' ') + '\n');
}

// A function that runs a batch fetch unchanged and returns its rows as jsonb.
async function batchWrapper(name, text) {
	const types = await parameterTypes(text);
	const args = types.map((t, i) => `p${i + 1} ${t}`).join(', ');
	await server.query(`CREATE OR REPLACE FUNCTION ${name}(${args}) RETURNS SETOF jsonb
LANGUAGE plpgsql AS $peer$
DECLARE r record;
BEGIN
	FOR r IN ${text}
	LOOP
		RETURN NEXT to_jsonb(r);
	END LOOP;
END
$peer$`);
}

async function pgBoss() {
	const boss = new PgBoss(connection);
	boss.on('error', (e) => console.error(e));
	await boss.start();
	await boss.createQueue('bench');
	sent = [];
	await boss.insert('bench', Array.from({ length: BATCH + 1 }, (_, n) => ({ data: { n } })));
	const insert = lastSent(/json_to_recordset\(\$1/);
	if (insert.values.length !== 1)
		throw new Error('pg-boss inserts differently than this script expects');
	// fill through the library's own insert, the recordset generated server-side
	writeFill('pgboss', ['pgboss.job_common'], [
		'TRUNCATE pgboss.job_common;',
		dollar(insert.text.trim(), () =>
			"(SELECT json_agg(json_build_object('data', json_build_object('n', i)))::text FROM generate_series(1, :n) i)") + ';',
	]);

	const source = `pg-boss ${versionOf('pg-boss')}, dist/manager.js fetch() and complete() ` +
		'(SQL from dist/plans.js fetchNextJob and completeJobs)';
	const result = { ok: true };
	const output = JSON.stringify(result);  // what pg makes of it

	// single: fetch() one job, complete() it as work() does, fenced to its attempt
	sent = [];
	const [job] = await boss.fetch('bench');
	const fetch1 = lastSent(/FOR UPDATE OF j SKIP LOCKED/);
	await boss.complete('bench', { id: job.id, retryCount: job.retryCount }, result);
	const complete1 = lastSent(/completed_on =/);
	if (fetch1.values.length || !sameValues(complete1.values,
		['bench', [job.id], result, [`${job.id}:${job.retryCount}`]]))
		throw new Error('pg-boss binds its parameters differently than this script expects');
	writeScript('pgboss_single', [
		`${fetch1.text.trim()} \\gset`,
		dollar(complete1.text.trim(), (n) => [':queue', 'ARRAY[:id]',
			':output', "ARRAY[:id || ':' || :retryCount]"][n - 1]),
	], { queue: 'bench', output }, source);

	// batch: fetch() 100, complete() them together
	sent = [];
	const jobs = await boss.fetch('bench', { batchSize: BATCH });
	const fetchN = lastSent(/FOR UPDATE OF j SKIP LOCKED/);
	await boss.complete('bench', jobs.map((j) => ({ id: j.id, retryCount: j.retryCount })), result);
	const completeN = lastSent(/completed_on =/);
	if (jobs.length !== BATCH || fetchN.values.length || !sameValues(completeN.values,
		['bench', jobs.map((j) => j.id), result, jobs.map((j) => `${j.id}:${j.retryCount}`)]))
		throw new Error('pg-boss batches differently than this script expects');
	await batchWrapper('pgboss_fetch_batch', fetchN.text.trim());
	writeScript('pgboss_batch', [
		"SELECT array_agg(j->>'id') AS ids, array_agg((j->>'id') || ':' || (j->>'retryCount')) AS attempts",
		'FROM pgboss_fetch_batch() j \\gset',
		dollar(completeN.text.trim(), (n) => [':queue', ':ids', ':output', ':attempts'][n - 1]),
	], { queue: 'bench', output }, source);
	await boss.stop({ graceful: false, wait: true });
	return versionOf('pg-boss');
}

async function graphileWorker() {
	const utils = await makeWorkerUtils({ connectionString });
	await utils.migrate();
	// fill through the library's own add_jobs()
	writeFill('graphile', ['graphile_worker._private_jobs'], [
		'TRUNCATE graphile_worker._private_jobs;',
		'SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(',
		"  SELECT ROW('bench', json_build_object('n', i), NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec",
		'  FROM generate_series(1, :n) i));',
	]);
	const source = `graphile-worker ${versionOf('graphile-worker')}, ` +
		'dist/sql/getJobs.js batchGetJobs and dist/sql/completeJobs.js batchCompleteJobs';

	// run the library's own worker until it has finished `count` jobs
	async function work(count, preset) {
		for (let n = 0; n < count; n++)
			await utils.addJob('bench', { n });
		let finished = 0, allDone;
		const done = new Promise((resolve) => { allDone = resolve; });
		sent = [];
		const runner = await run({
			connectionString, noHandleSignals: true, pollInterval: 100,
			preset: { worker: preset },
			taskList: { bench: async () => { if (++finished === count) setTimeout(allDone, 200); } },
		});
		await done;
		await runner.stop();
	}

	// single: the default worker, one job at a time
	await work(1, { concurrentJobs: 1 });
	const fetch1 = lastSent(/for update\s+skip locked/);
	const complete1 = lastSent(/^delete from .*_private_jobs/);
	const [taskId] = fetch1.values[1];
	if (fetch1.values.length !== 2 || complete1.values.length !== 1)
		throw new Error('graphile-worker binds its parameters differently than this script expects');
	writeScript('graphile_single', [
		`${dollar(fetch1.text.trim(), (n) => [':pool', ':tasks'][n - 1])} \\gset`,
		dollar(complete1.text.trim(), () => ':id'),
	], { pool: 'bench-pool', tasks: `{${taskId}}` }, source);

	// batch: a local queue of 100 and completions batched
	await work(BATCH, { concurrentJobs: BATCH, localQueue: { size: BATCH }, completeJobBatchDelay: 50 });
	const fetchN = lastSent(new RegExp(`limit ${BATCH}\\s+for update`));
	const completeN = lastSent(/unnest\(\$1::bigint\[\]\)/);
	await batchWrapper('graphile_fetch_batch', fetchN.text.trim());
	writeScript('graphile_batch', [
		"SELECT array_agg((j->>'id')::bigint) AS ids",
		'FROM graphile_fetch_batch(:pool, :tasks) j \\gset',
		dollar(completeN.text.trim(), () => ':ids'),
	], { pool: 'bench-pool', tasks: `{${taskId}}` }, source);
	await utils.release();
	return versionOf('graphile-worker');
}

fs.mkdirSync(outdir, { recursive: true });
fs.writeFileSync(path.join(outdir, 'SOURCES'), '');
const versions = { 'pg-boss': await pgBoss(), 'graphile-worker': await graphileWorker() };
fs.writeFileSync(path.join(outdir, 'VERSIONS'),
	Object.entries(versions).map(([k, v]) => `${k} ${v}`).join('\n') + '\n');
await server.end();
