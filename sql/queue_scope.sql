-- The views' scope (docs/security.md, "Operators of some queues") under a
-- parallel plan: a session's first read of durable.tasks, planned in
-- parallel, answers as a serial one would, for an operator of every queue
-- and for a queue operator (the scope functions run in the leader: a
-- parallel worker cannot read the scope, and a parallel operation can take
-- no snapshot for it).
SELECT durable_create_queue('scope_open');
SELECT durable_create_queue('scope_closed');
SELECT durable_grant_queue('scope_closed', 'durable_producer', 'enqueue');
SELECT count(durable_enqueue(q, jsonb_build_object('n', n)))
FROM unnest(ARRAY['scope_open', 'scope_closed']) q, generate_series(1, 15000) n;
ANALYZE durable.live_tasks;
CREATE ROLE scope_oper IN ROLE durable_operator;
CREATE ROLE scope_op IN ROLE durable_queue_operator;
\c
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET ROLE scope_oper;
SELECT queue_name, count(*) FROM durable.tasks
WHERE queue_name LIKE 'scope\_%' GROUP BY 1 ORDER BY 1;
\c
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET ROLE scope_op;
SELECT queue_name, count(*) FROM durable.tasks
WHERE queue_name LIKE 'scope\_%' GROUP BY 1 ORDER BY 1;
SELECT count(*) AS events FROM durable.events e JOIN durable.tasks t USING (partition_key, task_id)
WHERE t.queue_name = 'scope_closed';
RESET ROLE;
DROP ROLE scope_oper, scope_op;
SELECT count(durable_cancel(task_id, 'done')) FROM durable.tasks WHERE queue_name LIKE 'scope\_%';
SELECT durable_drop_queue('scope_open');
SELECT durable_drop_queue('scope_closed');
