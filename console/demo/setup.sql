-- The demo's queues, roles and schedule (tools/console, tools/console-test),
-- run as a superuser in the database the console shows.
-- psql variables: operator_password, monitor_password, worker_password,
-- shipping_password.
CREATE EXTENSION IF NOT EXISTS durable;

CREATE ROLE demo_producer LOGIN IN ROLE durable_producer;
CREATE ROLE demo_worker LOGIN IN ROLE durable_worker;
-- the console's logins: an operator, a pg_monitor-only login, a worker
CREATE ROLE console_operator LOGIN PASSWORD :'operator_password' IN ROLE durable_operator;
CREATE ROLE console_monitor LOGIN PASSWORD :'monitor_password' IN ROLE pg_monitor;
CREATE ROLE console_worker LOGIN PASSWORD :'worker_password' IN ROLE durable_worker;
-- the shipping team's on-call: an operator of its own queues only
CREATE ROLE console_shipping LOGIN PASSWORD :'shipping_password' IN ROLE durable_queue_operator;

SELECT durable_create_queue('orders', lease => '2 seconds', retry_base => 1, retry_cap => 3,
                            max_attempts => 3, partitions => 4);
SELECT durable_create_queue('emails', lease => '5 seconds');
SELECT durable_create_queue('shipments', lease => '5 seconds');
SELECT durable_create_queue('labels', lease => '5 seconds');
SELECT durable_create_queue('agents', lease => '5 seconds', version_timeout => '3 seconds');
SELECT durable_create_queue('reports', lease => '30 seconds');
-- the orders are the order team's, shipments and labels the shipping
-- team's: restricted to the demo's producer and worker, and the shipping
-- team's on-call granted its two
SELECT durable_grant_queue(q, r, 'all')
FROM unnest(ARRAY['orders', 'shipments', 'labels']) q, unnest(ARRAY['demo_producer', 'demo_worker']) r;
SELECT durable_grant_queue(q, 'console_shipping', 'all') FROM unnest(ARRAY['shipments', 'labels']) q;
SELECT durable_schedule('hourly-report', '0 * * * *', 'reports', '{"report": "hourly"}');
SELECT durable_schedule('nightly-report', '@daily', 'reports', '{"report": "nightly"}');
