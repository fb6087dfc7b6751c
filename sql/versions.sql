--
-- Versions as a contract (docs/design.md section 15): a task is pinned to the
-- versions it started under, handed only to a worker that runs them,
-- moved to others only by an explicit migration, and sent to review when
-- no worker runs them any more.  Times are compared, never printed.
--
SELECT setval('durable.task_seq', 15000) AS first_id_counter;
SELECT durable_create_queue('ver', lease => '1 minute', version_timeout => '10 minutes');
\set VERBOSITY default

-- pinned at enqueue by workflow_version; unpinned without
SELECT durable_enqueue('ver', '{"n": 1}', workflow_version => '2') AS t2 \gset
SELECT durable_enqueue('ver', '{"n": 2}') AS tfree \gset
SELECT task_id = :t2 AS t2, versions, workflow_version FROM durable.tasks
WHERE queue_name = 'ver' ORDER BY task_id;
SELECT kind, detail FROM durable.events WHERE task_id = :t2;

-- a worker that runs workflow 3 only never gets the task of workflow 2;
-- it takes the unpinned one and pins it to what it starts work under
SELECT task_id = :tfree AS unpinned_one, versions
FROM durable_claim('ver', 'w3', batch => 10, versions => '{"workflow": "3"}');
SELECT count(*) AS nothing_for_w3 FROM durable_claim('ver', 'w3', versions => '{"workflow": ["3"]}');
SELECT versions, workflow_version FROM durable.tasks WHERE task_id = :tfree;

-- a worker that runs 2 and 3 (and a model) takes it, and pins the names
-- the task was not pinned to yet (the last of a list: what it starts under)
SELECT task_id = :t2 AS is_t2, fence AS f2, versions
FROM durable_claim('ver', 'w23', versions => '{"workflow": ["2", "3"], "model": ["m-1", "m-2"]}') \gset
SELECT :'is_t2' AS is_t2, :'versions' AS versions;
SELECT durable_commit(:t2, :f2);
SELECT kind FROM durable.events WHERE task_id = :t2 ORDER BY seq;

-- a claim that pinned is a claim all the same
SELECT durable_create_queue('ver_count');
SELECT durable_enqueue('ver_count', '{}') AS tc \gset
SELECT durable_commit(task_id, fence) FROM durable_claim('ver_count', 'w3', versions => '{"workflow": "3"}');
SELECT kind FROM durable.events WHERE task_id = :tc ORDER BY seq;
SELECT tasks, claims_per_task FROM durable.history_metrics WHERE queue_name = 'ver_count';

-- a claim that says nothing claims as before, whatever a task is pinned to
SELECT durable_enqueue('ver', '{"n": 3}', workflow_version => '9') AS t9 \gset
SELECT task_id = :t9 AS t9, versions FROM durable_claim('ver', 'anyone');

-- what workers said they run, and when they last claimed
SELECT worker, versions, role = current_user AS role, alive,
       last_claim_at >= first_claim_at AS ordered
FROM durable.workers WHERE queue_name = 'ver' ORDER BY worker;

-- the filter, as a function
SELECT durable.versions_run('{"workflow": "2"}', '{"workflow": ["2", "3"]}') AS runs_2,
       durable.versions_run('{"workflow": "2"}', '{"workflow": "3"}') AS runs_3_only,
       durable.versions_run('{"workflow": "2", "model": "a"}', '{"workflow": "2"}') AS no_model,
       durable.versions_run('{"workflow": "2"}', '{"workflow": "2", "model": "a"}') AS more_names;

-- what a worker says it runs must be names to a version or a list
SELECT * FROM durable_claim('ver', 'w', versions => '[]');
SELECT * FROM durable_claim('ver', 'w', versions => '{}');
SELECT * FROM durable_claim('ver', 'w', versions => '{"workflow": []}');
SELECT * FROM durable_claim('ver', 'w', versions => '{"workflow": 3}');
SELECT * FROM durable_claim('ver', 'w', versions => '{"workflow": {"v": "3"}}');
SELECT * FROM durable_claim('ver', 'w', versions => '{"": "3"}');
SELECT * FROM durable_claim('ver', 'w', versions => '{"workflow": ""}');

--
-- Migration: explicit, recorded, refused while a step is in doubt.
--
SELECT durable_enqueue('ver', '{"n": 4}', workflow_version => '2') AS m1 \gset
SELECT durable_enqueue('ver', '{"n": 5}', workflow_version => '2') AS m2 \gset
SELECT durable_enqueue('ver', '{"n": 6}', workflow_version => '1') AS m3 \gset

-- a dry run says what would move and moves nothing
SELECT task_id IN (:m1, :m2) AS from_2, state, from_versions, to_versions, action
FROM durable_migrate('ver', '{"workflow": "2"}', '{"workflow": "3"}', 'ops', '{"ticket": "T-1"}',
                     dry_run => true);
SELECT count(*) AS still_2 FROM durable.tasks WHERE task_id IN (:m1, :m2) AND versions = '{"workflow": "2"}';

-- a running task of workflow 2 with a step in doubt
SELECT fence AS f1 FROM durable_claim('ver', 'w2', versions => '{"workflow": "2"}') \gset
SELECT state FROM durable_step(:m1, :f1, 'charge', 'idempotent');
SELECT durable_step_start(:m1, :f1, 'charge', 1);
SELECT * FROM durable_migrate(:m1, '{"workflow": "2"}', '{"workflow": "3"}', 'ops', '{}');
-- in a queue's migration it is reported and left
SELECT task_id = :m1 AS m1, task_id = :m2 AS m2, state, to_versions, action
FROM durable_migrate('ver', '{"workflow": "2"}', '{"workflow": "3"}', 'ops', '{"ticket": "T-1"}')
ORDER BY task_id;
SELECT task_id = :m1 AS m1, state, versions FROM durable.tasks WHERE task_id IN (:m1, :m2) ORDER BY task_id;
SELECT kind, actor, detail FROM durable.events WHERE task_id = :m2 ORDER BY seq DESC LIMIT 1;

-- once the step is settled, the running task migrates: its lease ends (the
-- worker runs the old code), the attempt is given back, fence + 1
SELECT durable_commit(:m1, :f1, '{"ok": true}', step => 'charge', expected_version => 2);
SELECT task_id, state, action FROM durable_migrate(:m1, '{"workflow": "2"}', '{"workflow": "3"}', 'ops', '{"ticket": "T-1"}') \gset m1_
SELECT :'m1_state' AS state, :'m1_action' AS action;
SELECT state, fence = :f1 + 1 AS fenced, attempt, versions FROM durable.tasks WHERE task_id = :m1;
SELECT durable_commit(:m1, :f1);
-- and only a worker of workflow 3 takes it now, with its committed step
SELECT count(*) AS not_for_2 FROM durable_claim('ver', 'w2', versions => '{"workflow": "2"}');
SELECT bool_or(task_id = :m1) AS m1_among_them
FROM durable_claim('ver', 'w3', batch => 10, versions => '{"workflow": "3"}');
SELECT state, owner FROM durable.tasks WHERE task_id = :m1;

-- a migration names versions the task is pinned to (55U02), of a live task
SELECT * FROM durable_migrate(:m3, '{"workflow": "2"}', '{"workflow": "3"}', 'ops', '{}');
SELECT * FROM durable_migrate(:t2, '{}', '{"workflow": "3"}', 'ops', '{}');
SELECT * FROM durable_migrate(-1, '{}', '{"workflow": "3"}', 'ops', '{}');
SELECT * FROM durable_migrate(:m3, '{}', '{"workflow": 3}', 'ops', '{}');
SELECT * FROM durable_migrate(:m3, '{}', '{}', 'ops', '{}');
SELECT * FROM durable_migrate(:m3, '{}', '{"workflow": "3"}', NULL, '{}');
SELECT * FROM durable_migrate('nope', '{}', '{"workflow": "3"}', 'ops', '{}');
-- '{}' migrates from any versions, unpinned included
SELECT task_id = :m3 AS m3, to_versions, action
FROM durable_migrate(:m3, '{}', '{"workflow": "3", "model": "m-2"}', 'ops', '{"why": "all on 3"}');

--
-- Review when no worker runs a task's versions for the queue's
-- version_timeout.  Workers' last claims and the task's due time are set
-- back instead of waiting.
--
SELECT durable_create_queue('ver_dead', version_timeout => '10 minutes');
SELECT durable_enqueue('ver_dead', '{"n": 1}', workflow_version => '1') AS d1 \gset
SELECT durable_enqueue('ver_dead', '{"n": 2}', workflow_version => '2') AS d2 \gset
SELECT task_id = :d2 AS d2, durable_release(task_id, fence) AS given_back
FROM durable_claim('ver_dead', 'w2', versions => '{"workflow": "2"}');
UPDATE durable.live_tasks SET run_at = now() - interval '11 minutes' WHERE task_id IN (:d1, :d2);
-- a worker of workflow 2 claimed a moment ago: only the task of 1 goes
SELECT task_id = :d1 AS d1, action FROM durable_reconcile() WHERE action = 'version_unavailable';
SELECT task_id = :d1 AS d1, state, stop_code FROM durable.tasks WHERE queue_name = 'ver_dead' ORDER BY task_id;
SELECT kind, actor, detail FROM durable.events WHERE task_id = :d1 ORDER BY seq DESC LIMIT 1;
SELECT durable_recovery_package(:d1) -> 'versions' AS versions,
       durable_recovery_package(:d1) -> 'recommended_action' ->> 'action' AS action;
SELECT step, reason FROM durable.review_queue WHERE task_id = :d1;
-- a worker whose last claim recorded is half a second past the timeout may
-- have claimed since (a claim is recorded a second apart at most): it
-- still counts, and the task of 2 stays
UPDATE durable.workers_seen SET last_claim_at = now() - interval '10 minutes 0.5 seconds'
WHERE queue_name = 'ver_dead';
SELECT count(*) AS none_early FROM durable_reconcile() WHERE action = 'version_unavailable';
-- and once the worker of 2 is gone too, the task of 2 goes
UPDATE durable.workers_seen SET last_claim_at = now() - interval '11 minutes' WHERE queue_name = 'ver_dead';
SELECT task_id = :d2 AS d2, action FROM durable_reconcile() WHERE action = 'version_unavailable';
-- a worker that does not say what it runs takes anything: nothing goes
SELECT durable_enqueue('ver_dead', '{"n": 3}', workflow_version => '3') AS d3 \gset
UPDATE durable.live_tasks SET run_at = now() - interval '11 minutes' WHERE task_id = :d3;
SELECT task_id = :d3 AS d3, durable_release(task_id, fence) AS given_back
FROM durable_claim('ver_dead', 'old-worker');
SELECT count(*) AS none FROM durable_reconcile() WHERE action = 'version_unavailable';
-- the operator migrates the task of 1: it is ready again, for workers of 3
SELECT state, action FROM durable_migrate(:d1, '{"workflow": "1"}', '{"workflow": "3"}', 'ops', '{"deployed": "3"}');
SELECT state, stop_code, versions FROM durable.tasks WHERE task_id = :d1;
-- or cancels the other
SELECT durable_resolve(:d2, 'cancel', 'ops', '{"why": "workflow 2 is retired"}');
-- a paused queue sends nothing to review: nobody claims there
SELECT durable_pause('ver_dead');
UPDATE durable.live_tasks SET run_at = now() - interval '11 minutes' WHERE task_id = :d1;
SELECT count(*) AS none_paused FROM durable_reconcile() WHERE action = 'version_unavailable';
SELECT durable_resume('ver_dead');

-- the setting: positive, cleared by name
SELECT durable_alter_queue('ver_dead', version_timeout => '0 s');
SELECT durable_alter_queue('ver_dead', clear => ARRAY['version_timeout']);
SELECT version_timeout FROM durable.queues WHERE queue_name = 'ver_dead';

SELECT * FROM durable_verify();

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'ver,ver_count,ver_dead'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
