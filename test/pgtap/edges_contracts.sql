-- SQLSTATE contracts of the edges: NULL arguments, what pg_monitor may read.
BEGIN;
SELECT plan(20);

SELECT throws_ok($$SELECT durable_pause(NULL)$$, '22004', NULL, 'durable_pause(NULL) is 22004');
SELECT throws_ok($$SELECT durable_resume(NULL)$$, '22004', NULL, 'durable_resume(NULL) is 22004');
SELECT throws_ok($$SELECT durable_drop_queue(NULL)$$, '22004', NULL, 'durable_drop_queue(NULL) is 22004');
SELECT throws_ok($$SELECT durable_retry_delay(NULL, 1)$$, '22004', NULL, 'durable_retry_delay(NULL, 1) is 22004');
SELECT throws_ok($$SELECT durable_request_hash(NULL)$$, '22004', NULL, 'durable_request_hash(NULL) is 22004');

-- pg_monitor reads the aggregate views, and no view that lists tasks or
-- schedules (privileges.sql compares every column it reads with a list)
SET LOCAL ROLE pg_monitor;
SELECT lives_ok($$SELECT count(*) FROM durable.metrics$$, 'pg_monitor reads durable.metrics');
SELECT lives_ok($$SELECT count(*) FROM durable.history_metrics$$, 'pg_monitor reads durable.history_metrics');
SELECT lives_ok($$SELECT count(*) FROM durable.queue_stats$$, 'pg_monitor reads durable.queue_stats');
SELECT lives_ok($$SELECT count(*) FROM durable.wait_stats$$, 'pg_monitor reads durable.wait_stats');
SELECT lives_ok($$SELECT count(*) FROM durable.schedule_stats$$, 'pg_monitor reads durable.schedule_stats');
SELECT throws_ok($$SELECT count(*) FROM durable.stuck_tasks$$, '42501', NULL, 'pg_monitor does not read durable.stuck_tasks');
SELECT throws_ok($$SELECT count(*) FROM durable.review_queue$$, '42501', NULL, 'pg_monitor does not read durable.review_queue');
SELECT throws_ok($$SELECT count(*) FROM durable.waiting_tasks$$, '42501', NULL, 'pg_monitor does not read durable.waiting_tasks');
SELECT throws_ok($$SELECT count(*) FROM durable.schedule_list$$, '42501', NULL, 'pg_monitor does not read durable.schedule_list');
SELECT throws_ok($$SELECT count(*) FROM durable.tasks$$, '42501', NULL, 'pg_monitor does not read durable.tasks');
RESET ROLE;

-- a queue's schedules go with it: 2BP01 while they target it, cascade drops them
SELECT durable_create_queue('scheduled');
SELECT durable_schedule('scheduled_nightly', '0 3 * * *', 'scheduled');
SELECT throws_ok($$SELECT durable_drop_queue('scheduled')$$, '2BP01', NULL,
                 'durable_drop_queue of a queue with schedules is 2BP01');
SELECT lives_ok($$SELECT durable_drop_queue('scheduled', cascade => true)$$,
                'durable_drop_queue(cascade => true) drops the queue with its schedules');

-- a mixed-sign lease is refused, a refill rate out of range too
SELECT throws_ok($$SELECT durable_create_queue('m', lease => '-10 mon 300 days 1 second')$$, '22023', NULL,
                 'a lease with parts of different signs is 22023');
SELECT throws_ok($$SELECT durable_create_queue('m', retry_refill_rate => 1e-300)$$, '22023', NULL,
                 'a refill rate below the range is 22023');

-- unique text keys compare bytewise, whatever the database's collation
SELECT is((SELECT array_agg(k ORDER BY k) FROM (
           SELECT a.attrelid::regclass::text || '.' || a.attname || ' ' || coalesce(c.collname, '-') AS k
           FROM pg_attribute a LEFT JOIN pg_collation c ON c.oid = a.attcollation
           WHERE (a.attrelid, a.attname) IN (('durable.queues'::regclass, 'queue_name'),
                                             ('durable.tasks'::regclass, 'queue_name'),
                                             ('durable.tasks'::regclass, 'idempotency_key'),
                                             ('durable.steps'::regclass, 'step'),
                                             ('durable.inbox'::regclass, 'consumer'),
                                             ('durable.inbox'::regclass, 'message_id'),
                                             ('durable.idempotency_keys'::regclass, 'scope'),
                                             ('durable.idempotency_keys'::regclass, 'key'))) keys),
          ARRAY['durable.idempotency_keys.key C', 'durable.idempotency_keys.scope C',
                'durable.inbox.consumer C', 'durable.inbox.message_id C',
                'durable.queues.queue_name C', 'durable.steps.step C',
                'durable.tasks.idempotency_key C', 'durable.tasks.queue_name C'],
          'unique text keys use COLLATE "C"');

SELECT * FROM finish();
ROLLBACK;
