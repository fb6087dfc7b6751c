--
-- The row of a task and of a step, as the library knows it (src/core/row.h),
-- is checked against the tables themselves before the first statement that
-- restates it runs in a backend, and again after a table changes: a table
-- whose columns are not the library's is 55000, naming the table and the
-- first column that differs, and nothing is written.  The tables are
-- changed as superuser inside a transaction that rolls back.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 20000) AS first_id_counter;
SELECT durable_create_queue('row_shape', lease => '1 hour');
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT durable_enqueue('row_shape', '{"n": 1}') AS t1 \gset
SELECT durable_enqueue('row_shape', '{"n": 2}') AS t2 \gset
SELECT fence AS f1 FROM durable_claim('row_shape', 'w-1') WHERE task_id = :t1 \gset
SELECT fence AS f2 FROM durable_claim('row_shape', 'w-1') WHERE task_id = :t2 \gset

-- this file's backend has finished no task yet: a column added to
-- durable.live_tasks is found before the first finish runs
BEGIN;
ALTER TABLE durable.live_tasks ADD COLUMN row_shape_extra int;
SELECT durable_commit(:t1, :f1);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT state, fence = :f1 AS same_fence FROM durable.tasks WHERE task_id = :t1;

-- the tables as they are: the commit goes through
SELECT durable_commit(:t1, :f1);
SELECT state FROM durable.tasks WHERE task_id = :t1;

-- checked once, a table is checked again after it changes: a column added
-- to durable.step_history, then one to durable.live_steps
BEGIN;
ALTER TABLE durable.step_history ADD COLUMN row_shape_extra text;
SELECT durable_commit(:t2, :f2);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
ALTER TABLE durable.live_steps ADD COLUMN row_shape_extra jsonb;
SELECT durable_commit(:t2, :f2);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- a column renamed: its place and type are right, its name is not
BEGIN;
ALTER TABLE durable.live_tasks RENAME COLUMN progress TO row_shape_progress;
SELECT durable_commit(:t2, :f2);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT state, fence = :f2 AS same_fence FROM durable.tasks WHERE task_id = :t2;

-- a task's row in history is checked as well: the replay of a failed
-- task moves it back from there
SELECT durable_fail(:t2, :f2, 'permanent', '{"why": "row shape"}');
BEGIN;
ALTER TABLE durable.task_history ADD COLUMN row_shape_extra int;
SELECT action FROM durable_replay_dead_letters('row_shape');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT state FROM durable.tasks WHERE task_id = :t2;
SELECT action FROM durable_replay_dead_letters('row_shape');
SELECT state FROM durable.tasks WHERE task_id = :t2;

-- a state the library does not know, read from a row, is an internal
-- error (XX000), not a guess: the labels of the types renamed in a
-- rolled-back transaction
SELECT fence AS f2 FROM durable_claim('row_shape', 'w-2') WHERE task_id = :t2 \gset
SELECT state FROM durable_step(:t2, :f2, 'charge', 'idempotent', '{"amount": 1}');
SELECT durable_step_start(:t2, :f2, 'charge', 1) AS v;
BEGIN;
ALTER TYPE durable.task_state RENAME VALUE 'running' TO 'row_shape_running';
SELECT durable_cancel(:t2, 'row shape');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
ALTER TYPE durable.step_state RENAME VALUE 'started' TO 'row_shape_started';
SELECT state FROM durable_step(:t2, :f2, 'charge', 'idempotent', '{"amount": 1}');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT state FROM durable_step(:t2, :f2, 'charge', 'idempotent', '{"amount": 1}');
SELECT durable_commit(:t2, :f2, step => 'charge', expected_version => 2);
SELECT durable_commit(:t2, :f2);
SELECT state FROM durable.tasks WHERE task_id = :t2;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'row_shape'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
