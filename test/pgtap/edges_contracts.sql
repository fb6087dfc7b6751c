-- SQLSTATE contracts of the edges: NULL arguments, what pg_monitor may read.
BEGIN;
SELECT plan(12);

SELECT throws_ok($$SELECT durable_pause(NULL)$$, '22004', NULL, 'durable_pause(NULL) is 22004');
SELECT throws_ok($$SELECT durable_resume(NULL)$$, '22004', NULL, 'durable_resume(NULL) is 22004');
SELECT throws_ok($$SELECT durable_drop_queue(NULL)$$, '22004', NULL, 'durable_drop_queue(NULL) is 22004');
SELECT throws_ok($$SELECT durable_retry_delay(NULL, 1)$$, '22004', NULL, 'durable_retry_delay(NULL, 1) is 22004');
SELECT throws_ok($$SELECT durable_request_hash(NULL)$$, '22004', NULL, 'durable_request_hash(NULL) is 22004');

-- pg_monitor reads the metrics views, and nothing else of durable
SET LOCAL ROLE pg_monitor;
SELECT lives_ok($$SELECT count(*) FROM durable.metrics$$, 'pg_monitor reads durable.metrics');
SELECT lives_ok($$SELECT count(*) FROM durable.queue_stats$$, 'pg_monitor reads durable.queue_stats');
SELECT lives_ok($$SELECT count(*) FROM durable.stuck_tasks$$, 'pg_monitor reads durable.stuck_tasks');
SELECT lives_ok($$SELECT count(*) FROM durable.review_queue$$, 'pg_monitor reads durable.review_queue');
SELECT throws_ok($$SELECT count(*) FROM durable.tasks$$, '42501', NULL, 'pg_monitor does not read durable.tasks');
RESET ROLE;

-- a mixed-sign lease is refused, a refill rate out of range too
SELECT throws_ok($$SELECT durable_create_queue('m', lease => '-10 mon 300 days 1 second')$$, '22023', NULL,
                 'a lease with parts of different signs is 22023');
SELECT throws_ok($$SELECT durable_create_queue('m', retry_refill_rate => 1e-300)$$, '22023', NULL,
                 'a refill rate below the range is 22023');

SELECT * FROM finish();
ROLLBACK;
