--
-- Queues: create, alter, pause, resume, drop, and every bad setting.
--
-- task ids of this file start apart from the other files'
SELECT setval('durable.task_seq', 5000) AS first_id_counter;
SELECT durable_create_queue('queue_mail');
SELECT queue_name, partitions, lease, max_attempts, retry_base, retry_cap, deadline,
       retry_capacity, retry_refill_rate::numeric AS retry_refill_rate,
       retry_tokens::numeric AS retry_tokens, progress_timeout, notify, paused
FROM durable.queues WHERE queue_name = 'queue_mail';

SELECT durable_create_queue('queue_payments', lease => '2 minutes', max_attempts => 5,
                            retry_base => 1, retry_cap => 30, deadline => '1 hour',
                            retry_capacity => 10, retry_refill_rate => 2,
                            progress_timeout => '5 minutes', partitions => 4, notify => false);
SELECT queue_name, partitions, lease, max_attempts, retry_base, retry_cap, deadline,
       retry_capacity, retry_refill_rate::numeric AS retry_refill_rate,
       retry_tokens::numeric AS retry_tokens, progress_timeout, notify
FROM durable.queues WHERE queue_name = 'queue_payments';

-- the partitions of a queue are consecutive keys from a hash of its name
SELECT queue_name, partition_base BETWEEN 0 AND 32767 AS base_in_range
FROM durable.queues WHERE queue_name IN ('queue_mail', 'queue_payments') ORDER BY 1;

-- alter: NULL keeps a setting, clear removes optional ones
SELECT durable_alter_queue('queue_payments', lease => '45 seconds', notify => true);
SELECT durable_alter_queue('queue_payments', clear => ARRAY['deadline', 'retry_capacity']);
SELECT lease, deadline, retry_capacity, progress_timeout, notify
FROM durable.queues WHERE queue_name = 'queue_payments';
SELECT durable_alter_queue('queue_mail', retry_capacity => 3);
SELECT retry_capacity, retry_tokens::numeric AS retry_tokens FROM durable.queues WHERE queue_name = 'queue_mail';

-- pause and resume
SELECT durable_pause('queue_mail');
SELECT paused FROM durable.queues WHERE queue_name = 'queue_mail';
SELECT durable_resume('queue_mail');
SELECT paused FROM durable.queues WHERE queue_name = 'queue_mail';

-- bad settings
SELECT durable_create_queue('queue_mail');
SELECT durable_create_queue(NULL);
SELECT durable_create_queue('');
SELECT durable_create_queue(repeat('q', 64));
SELECT durable_create_queue(E'tab\there');
SELECT durable_create_queue('q', lease => '0 s');
SELECT durable_create_queue('q', lease => '-1 s');
SELECT durable_create_queue('q', lease => NULL);
SELECT durable_create_queue('q', max_attempts => 0);
SELECT durable_create_queue('q', retry_base => 0);
SELECT durable_create_queue('q', retry_cap => -1);
SELECT durable_create_queue('q', deadline => '0 s');
SELECT durable_create_queue('q', retry_capacity => 0);
SELECT durable_create_queue('q', retry_refill_rate => 0);
SELECT durable_create_queue('q', retry_refill_rate => 'infinity');
SELECT durable_create_queue('q', retry_refill_rate => 'NaN');
SELECT durable_create_queue('q', partitions => 0);
SELECT durable_create_queue('q', partitions => 257);
SELECT durable_create_queue('q', notify => NULL);
SELECT durable_alter_queue('nope', lease => '1 s');
SELECT durable_alter_queue('queue_mail', max_attempts => 0);
SELECT durable_alter_queue('queue_mail', clear => ARRAY['lease']);
SELECT durable_alter_queue('queue_mail', clear => ARRAY[['deadline'], ['retry_capacity']]);
SELECT durable_pause('nope');
SELECT durable_resume('nope');
SELECT count(*) AS queues FROM durable.queues WHERE queue_name IN ('queue_mail', 'queue_payments');

-- drop: refused while a task is unfinished; takes finished tasks and events along
SELECT durable_enqueue('queue_mail', '{"n": 1}') AS task \gset
SELECT durable_drop_queue('queue_mail');
SELECT durable_cancel(:task, 'not needed');
SELECT durable_drop_queue('queue_mail');
SELECT count(*) AS tasks, (SELECT count(*) FROM durable.events WHERE task_id = :task) AS events
FROM durable.tasks WHERE queue_name = 'queue_mail';
SELECT durable_drop_queue('queue_mail');
SELECT durable_drop_queue('queue_payments');

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'queue_mail,queue_payments'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
