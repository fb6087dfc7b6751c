-- The worked example of README "Workflows that wait": an order that
-- charges, waits for the payment webhook (at most three days), fans out
-- shipping labels to child tasks, joins them, and sends a reminder a day
-- later.  Each pass of the worker runs the workflow from the top: what is
-- done comes back as it was, and each wait either returns its outcome or
-- ends the lease.
SELECT durable_create_queue('shop');
SELECT durable_create_queue('parcels');
SELECT durable_enqueue('shop', '{"order": 7, "parcels": 2}') AS order_id \gset

-- pass 1: charge, then wait for the webhook
SELECT fence FROM durable_claim('shop', 'worker-1') \gset
SELECT version FROM durable_step(:order_id, :fence, 'charge', 'queryable', '{"amount": 4200}') \gset
SELECT durable_step_start(:order_id, :fence, 'charge', :version) AS version \gset
--   payments.charge(amount => 4200, idempotency_key => ...) returns ch_7
SELECT durable_commit(:order_id, :fence, '{"charge": "ch_7"}', step => 'charge', expected_version => :version);
SELECT status FROM durable_await(:order_id, :fence, 'paid', 'payment:ch_7', timeout => '3 days');
-- the lease is over: the task waits, holding nothing
SELECT wait_name, kind, event_queue, event, until - since AS timeout FROM durable.waiting_tasks WHERE task_id = :order_id;

-- the payment provider's webhook, in the web handler's own transaction
SELECT durable_emit('shop', 'payment:ch_7', '{"status": "succeeded"}');

-- pass 2: the charge is done, the webhook is in; fan out the labels
SELECT fence FROM durable_claim('shop', 'worker-2') \gset
SELECT state, result FROM durable_step(:order_id, :fence, 'charge', 'queryable', '{"amount": 4200}');
SELECT status, payload FROM durable_await(:order_id, :fence, 'paid', 'payment:ch_7', timeout => '3 days');
SELECT durable_spawn(:order_id, :fence, 'label-1', 'parcels', '{"order": 7, "parcel": 1}') AS label_1,
       durable_spawn(:order_id, :fence, 'label-2', 'parcels', '{"order": 7, "parcel": 2}') AS label_2 \gset
SELECT status FROM durable_join(:order_id, :fence, 'labels');

-- the label workers
SELECT task_id = :label_1 AS first, fence FROM durable_claim('parcels', 'printer') \gset label_
SELECT durable_commit(:label_1, :label_fence, '{"tracking": "1Z-1"}');
SELECT task_id = :label_2 AS second, fence FROM durable_claim('parcels', 'printer') \gset label_
SELECT durable_commit(:label_2, :label_fence, '{"tracking": "1Z-2"}');

-- pass 3: the same calls again, now with outcomes; then the reminder
SELECT fence FROM durable_claim('shop', 'worker-3') \gset
SELECT status FROM durable_await(:order_id, :fence, 'paid', 'payment:ch_7', timeout => '3 days');
SELECT durable_spawn(:order_id, :fence, 'label-1', 'parcels', '{"order": 7, "parcel": 1}') = :label_1 AS same_label;
SELECT status, jsonb_path_query_array(children, '$[*].result.tracking') AS tracking
FROM durable_join(:order_id, :fence, 'labels');
SELECT durable_sleep(:order_id, :fence, 'reminder', duration => '1 day');
SELECT wait_name, kind, until - since AS sleeps FROM durable.waiting_tasks WHERE task_id = :order_id;

-- what the order went through
SELECT seq, kind, state, detail ->> 'wait' AS wait, actor FROM durable.events
WHERE task_id = :order_id ORDER BY seq;
SELECT * FROM durable_verify();

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'parcels,shop'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
