--
-- A receipt on a started step: the call returns the step's state afterwards.
-- succeeded and failed_permanent are kept as evidence and the step stays
-- started; not_executed plans it again.  On an assert-enabled server
-- (CLOBBER_FREED_MEMORY) a state string read after SPI_finish() freed it
-- comes back as garbage here instead of 'started'.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 7000) AS first_id_counter;
SELECT durable_create_queue('receipts', lease => '1 minute', retry_base => 1, retry_cap => 1);

-- succeeded: evidence, the step stays started
SELECT durable_enqueue('receipts', '{"pay": 1}') AS t1 \gset
SELECT fence AS f1 FROM durable_claim('receipts', 'w1') \gset
SELECT (durable_step(:t1, :f1, 'charge', 'queryable')).state;
SELECT durable_step_start(:t1, :f1, 'charge', 1) AS v1 \gset
SELECT durable_record_receipt(:t1, :f1, 'charge', 'succeeded', 'ch_1', '{"id": "ch_1"}');
SELECT state, receipt, effect_id, result FROM durable.steps WHERE task_id = :t1;

-- failed_permanent: evidence, the step stays started
SELECT durable_enqueue('receipts', '{"pay": 2}') AS t2 \gset
SELECT fence AS f2 FROM durable_claim('receipts', 'w2') \gset
SELECT (durable_step(:t2, :f2, 'charge', 'queryable')).state;
SELECT durable_step_start(:t2, :f2, 'charge', 1) AS v2 \gset
SELECT durable_record_receipt(:t2, :f2, 'charge', 'failed_permanent', evidence => '{"declined": true}');
SELECT state, receipt, effect_id, result FROM durable.steps WHERE task_id = :t2;

-- not_executed: the step is planned again at once
SELECT durable_enqueue('receipts', '{"pay": 3}') AS t3 \gset
SELECT fence AS f3 FROM durable_claim('receipts', 'w3') \gset
SELECT (durable_step(:t3, :f3, 'charge', 'queryable')).state;
SELECT durable_step_start(:t3, :f3, 'charge', 1) AS v3 \gset
SELECT durable_record_receipt(:t3, :f3, 'charge', 'not_executed');
SELECT state, receipt, effect_id, result FROM durable.steps WHERE task_id = :t3;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'receipts'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
