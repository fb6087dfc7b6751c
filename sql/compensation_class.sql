--
-- A compensation step takes a class as any step does: by default its
-- forward step's, or the one given for it.  An unsafe compensation whose
-- worker dies while it is started is never run again blindly: the task
-- goes to review, as for any unsafe step in doubt.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 19000) AS first_id_counter;
SELECT durable_create_queue('undo', lease => '1 hour');
\set VERBOSITY default

SELECT durable_enqueue('undo', '{}') AS t \gset
SELECT fence AS f FROM durable_claim('undo', 'w1') \gset
SELECT (durable_step(:t, :f, 'reserve', 'idempotent')).state,
       (durable_step(:t, :f, 'charge', 'queryable')).state,
       (durable_step(:t, :f, 'email', 'unsafe')).state;
SELECT durable_step_start(:t, :f, s, 1) FROM unnest(ARRAY['reserve', 'charge', 'email']) s;
SELECT durable_commit(:t, :f, step => s, expected_version => 2)
FROM unnest(ARRAY['reserve', 'charge', 'email']) s;

-- by default each compensation has its forward step's class
SELECT step, compensates, state FROM durable_compensate(:t, :f);
SELECT step, class FROM durable.steps WHERE task_id = :t AND compensates IS NOT NULL
ORDER BY ordinal;

-- the worker dies in the middle of undoing the e-mail: nobody knows
-- whether the retraction went out, so the task waits for a person
SELECT durable_step_start(:t, :f, 'compensate:email', 1);
SELECT durable_expire_lease(:t, 'worker died while compensating');
SELECT state FROM durable.tasks WHERE task_id = :t;
SELECT step, state FROM durable.steps WHERE task_id = :t AND state NOT IN ('committed', 'planned')
ORDER BY ordinal;

-- a class given for a step's compensation
SELECT durable_enqueue('undo', '{}') AS t2 \gset
SELECT fence AS f2 FROM durable_claim('undo', 'w2') \gset
SELECT (durable_step(:t2, :f2, 'book', 'unsafe')).state,
       (durable_step(:t2, :f2, 'pay', 'idempotent')).state;
SELECT durable_step_start(:t2, :f2, s, 1) FROM unnest(ARRAY['book', 'pay']) s;
SELECT durable_commit(:t2, :f2, step => s, expected_version => 2)
FROM unnest(ARRAY['book', 'pay']) s;
-- bad classes: nothing is planned
SELECT * FROM durable_compensate(:t2, :f2, classes => '["unsafe"]');
SELECT * FROM durable_compensate(:t2, :f2, classes => '{"book": "careful"}');
SELECT * FROM durable_compensate(:t2, :f2, classes => '{"book": 1}');
SELECT * FROM durable_compensate(:t2, :f2, classes => '{"flight": "unsafe"}');
SELECT count(*) AS compensation_steps FROM durable.steps WHERE task_id = :t2 AND compensates IS NOT NULL;
SELECT step, compensates, state FROM durable_compensate(:t2, :f2, classes => '{"book": "idempotent"}');
SELECT step, class FROM durable.steps WHERE task_id = :t2 AND compensates IS NOT NULL
ORDER BY ordinal;
-- planned again: the same classes, given or not; another one is refused
SELECT step FROM durable_compensate(:t2, :f2);
SELECT step FROM durable_compensate(:t2, :f2, classes => '{"pay": "unsafe"}');

SELECT count(durable_cancel(task_id, 'test')) FROM durable.live_tasks
WHERE queue_name = 'undo' AND state <> 'needs_review';
SELECT count(durable_resolve(task_id, 'cancel', 'test', '{}')) FROM durable.live_tasks
WHERE queue_name = 'undo' AND state = 'needs_review';
SELECT durable_drop_queue('undo');

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'undo'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
