--
-- Rows read by their primary key, without a statement (store/direct.c):
-- a queue's settings, which every claim reads, and whether a finished
-- task has steps to move to history.  What they read is what a statement
-- would read.
--
SELECT setval('durable.task_seq', 90000) AS first_id_counter;

-- a queue created earlier in the transaction is read by a claim
BEGIN;
SELECT durable_create_queue('qread_new');
SELECT durable_enqueue('qread_new', '{"n": 1}') > 0 AS enqueued;
SELECT count(*) AS claimed FROM durable_claim('qread_new', 'w');
ROLLBACK;
SELECT count(*) AS queues FROM durable.queues WHERE queue_name = 'qread_new';

-- and one that does not exist, or no longer, is refused
SELECT * FROM durable_claim('qread_none', 'w');
SELECT durable_create_queue('qread_gone');
SELECT count(*) AS claimed FROM durable_claim('qread_gone', 'w');
SELECT durable_drop_queue('qread_gone');
SELECT * FROM durable_claim('qread_gone', 'w');

-- the numbers of the columns read are found again when the table changes
-- in this backend: after its column "paused" is replaced by one whose
-- default pauses every queue, a claim reads the new one and takes nothing
SELECT durable_create_queue('qread_moved');
SELECT durable_enqueue('qread_moved', '{"n": 2}') > 0 AS enqueued;
BEGIN;
SELECT count(*) AS claimed_before FROM durable_claim('qread_moved', 'w');
ROLLBACK;
BEGIN;
ALTER TABLE durable.queues RENAME COLUMN paused TO paused_before;
ALTER TABLE durable.queues ADD COLUMN paused bool NOT NULL DEFAULT true;
SELECT count(*) AS claimed_paused FROM durable_claim('qread_moved', 'w');
ROLLBACK;
-- and again after the change rolled back
SELECT count(durable_commit(task_id, fence)) AS claimed_after
FROM durable_claim('qread_moved', 'w');

-- a column of another type than the library reads is an error naming it,
-- with the SQLSTATE of a table that is not as the library expects (one no
-- view shows, or the view would keep it from changing)
BEGIN;
ALTER TABLE durable.queues ALTER COLUMN notify TYPE int USING notify::int;
SAVEPOINT typed;
SELECT * FROM durable_claim('qread_moved', 'w');
ROLLBACK TO typed;
\set VERBOSITY sqlstate
SELECT * FROM durable_claim('qread_moved', 'w');
\set VERBOSITY default
ROLLBACK;

SELECT durable_drop_queue('qread_moved');

-- a task finishes with its steps: all of them move to history, at the
-- finish's time; a task without steps moves none, and leaves the others'
SELECT durable_create_queue('qread_steps');
SELECT durable_enqueue('qread_steps', '{"n": 3}') AS with_steps \gset
SELECT durable_enqueue('qread_steps', '{"n": 4}') AS without_steps \gset
SELECT count(*) AS claimed FROM durable_claim('qread_steps', 'w', batch => 2);
SELECT fence AS f1 FROM durable.live_tasks WHERE task_id = :with_steps \gset
SELECT fence AS f2 FROM durable.live_tasks WHERE task_id = :without_steps \gset
SELECT state FROM durable_step(:with_steps, :f1, 'first', 'idempotent', '{}');
SELECT state FROM durable_step(:with_steps, :f1, 'second', 'pure', '{}');
SELECT durable_step_start(:with_steps, :f1, 'first', 1) AS v \gset
SELECT durable_commit(:with_steps, :f1, '{"ok": true}', step => 'first', expected_version => :v);
SELECT durable_commit(:without_steps, :f2);
SELECT count(*) AS steps_still_live FROM durable.live_steps WHERE task_id = :with_steps;
SELECT durable_commit(:with_steps, :f1);
SELECT count(*) AS steps_live FROM durable.live_steps WHERE task_id = :with_steps;
SELECT s.step, s.state, s.finished_at = t.finished_at AS at_finish
FROM durable.step_history s JOIN durable.task_history t USING (partition_key, task_id)
WHERE s.task_id = :with_steps ORDER BY s.step;
SELECT count(*) AS steps_of_without FROM durable.step_history WHERE task_id = :without_steps;
