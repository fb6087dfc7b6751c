--
-- A queue's settings read by its primary key, without a statement
-- (store/direct.c): what a claim reads is what a statement would read.
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

-- a column of another type than the library reads is an error naming it
BEGIN;
ALTER TABLE durable.queues ALTER COLUMN partitions TYPE bigint;
SELECT * FROM durable_claim('qread_moved', 'w');
ROLLBACK;

SELECT durable_drop_queue('qread_moved');
