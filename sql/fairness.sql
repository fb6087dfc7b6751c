--
-- Fairness between keys (docs/flow-control.md): within a priority, claims
-- serve the keys of a fair queue that have ready work in turn, in
-- proportion to their weights, however many tasks one key enqueued first.
-- Each queue has one partition, so that the claims' order is the queue's.
--
CREATE FUNCTION pg_temp.claim_keys(queue text, n int) RETURNS TABLE (key text, claims bigint)
LANGUAGE plpgsql AS $$
DECLARE
    got text[] := '{}';
    k text;
BEGIN
    FOR i IN 1..n LOOP
        SELECT c.payload->>'k' INTO k FROM durable_claim(queue, 'w') c;
        got := got || k;
    END LOOP;
    RETURN QUERY SELECT g, count(*) FROM unnest(got) g GROUP BY g ORDER BY g;
END
$$;

-- 600 tasks of one key before 20 each of two others: the first 60
-- claims serve the three in turn
SELECT durable_create_queue('fair_three', partitions => 1);
SELECT count(durable_enqueue('fair_three', '{"k": "a"}', fairness_key => 'a')) FROM generate_series(1, 600);
SELECT count(durable_enqueue('fair_three', '{"k": "b"}', fairness_key => 'b')) FROM generate_series(1, 20);
SELECT count(durable_enqueue('fair_three', '{"k": "c"}', fairness_key => 'c')) FROM generate_series(1, 20);
SELECT fair FROM durable.queues WHERE queue_name = 'fair_three';
SELECT * FROM pg_temp.claim_keys('fair_three', 60);

-- weights 3 and 1: about 3 to 1
SELECT durable_create_queue('fair_weights', partitions => 1);
SELECT durable_set_fairness('fair_weights', 'heavy', 3);
SELECT count(durable_enqueue('fair_weights', '{"k": "heavy"}', fairness_key => 'heavy')) FROM generate_series(1, 200);
SELECT count(durable_enqueue('fair_weights', '{"k": "light"}', fairness_key => 'light')) FROM generate_series(1, 200);
SELECT * FROM pg_temp.claim_keys('fair_weights', 80);
SELECT queue_name, fairness_key, weight FROM durable.fairness_weights WHERE queue_name = 'fair_weights';

-- a key that was idle comes back at the head, without a burst: b's 50
-- new tasks take turns with a's backlog
SELECT durable_create_queue('fair_idle', partitions => 1);
SELECT count(durable_enqueue('fair_idle', '{"k": "a"}', fairness_key => 'a')) FROM generate_series(1, 100);
SELECT count(durable_enqueue('fair_idle', '{"k": "b"}', fairness_key => 'b')) FROM generate_series(1, 5);
SELECT * FROM pg_temp.claim_keys('fair_idle', 40);
SELECT count(durable_enqueue('fair_idle', '{"k": "b"}', fairness_key => 'b')) FROM generate_series(1, 50);
SELECT * FROM pg_temp.claim_keys('fair_idle', 20);

-- the tasks without a key are one key of their own; a higher priority
-- still goes first
SELECT durable_create_queue('fair_keyless', partitions => 1);
SELECT count(durable_enqueue('fair_keyless', '{"k": "none"}')) FROM generate_series(1, 100);
SELECT count(durable_enqueue('fair_keyless', '{"k": "x"}', fairness_key => 'x')) FROM generate_series(1, 10);
SELECT durable_enqueue('fair_keyless', '{"k": "urgent"}', priority => 5, fairness_key => 'x') > 0 AS urgent;
SELECT * FROM pg_temp.claim_keys('fair_keyless', 1);
SELECT * FROM pg_temp.claim_keys('fair_keyless', 20);

-- a queue without fairness: no pass, claims in due order
SELECT durable_create_queue('fair_not', partitions => 1);
SELECT count(durable_enqueue('fair_not', jsonb_build_object('k', n::text))) FROM generate_series(1, 3) n;
SELECT fair FROM durable.queues WHERE queue_name = 'fair_not';
SELECT count(*) FILTER (WHERE fair_pass IS NULL) AS without_pass FROM durable.live_tasks WHERE queue_name = 'fair_not';
-- made fair by a weight: its tasks wait for their passes, which the
-- reconciler gives them
SELECT durable_set_fairness('fair_not', 'k');
SELECT count(*) FILTER (WHERE fair_pass = 'Infinity') AS waiting FROM durable.live_tasks WHERE queue_name = 'fair_not';
SELECT count(*) >= 0 AS reconciled FROM durable_reconcile();
SELECT payload->>'k' AS k, fair_pass FROM durable.live_tasks WHERE queue_name = 'fair_not' ORDER BY fair_pass;

-- a task enqueued for later, and one released, wait for their passes
-- until due; the reconciler admits them after the key's last
SELECT durable_create_queue('fair_later', partitions => 1);
SELECT durable_enqueue('fair_later', '{"k": "later"}', run_at => now() + interval '1 hour', fairness_key => 'a') AS later \gset
SELECT count(durable_enqueue('fair_later', '{"k": "a"}', fairness_key => 'a')) FROM generate_series(1, 2);
SELECT fairness_key, fair_pass FROM durable.live_tasks WHERE task_id = :later;
SELECT task_id AS released, fence FROM durable_claim('fair_later', 'w') \gset
SELECT durable_release(:released, :fence);
SELECT fair_pass FROM durable.live_tasks WHERE task_id = :released;
UPDATE durable.live_tasks SET run_at = now() - interval '1 hour' WHERE task_id = :later;
SELECT count(*) >= 0 AS reconciled FROM durable_reconcile();
SELECT payload->>'k' AS k, fair_pass, task_id = :released AS released
FROM durable.live_tasks WHERE queue_name = 'fair_later' ORDER BY fair_pass, task_id;

-- a debounced task in a fair queue: due, it has its pass; delayed by a
-- later call past now, it waits for its pass again until due
SELECT durable_debounce('fair_later', 'd', '{"k": "debounced"}', '0 seconds') AS debounced \gset
SELECT fair_pass < 'Infinity' AS admitted FROM durable.live_tasks WHERE task_id = :debounced;
SELECT durable_debounce('fair_later', 'd', '{"k": "debounced"}', '1 hour') = :debounced AS same_task;
SELECT fair_pass FROM durable.live_tasks WHERE task_id = :debounced;

-- a batch with its keys
SELECT durable_create_queue('fair_batch', partitions => 1);
SELECT cardinality(durable_enqueue_batch('fair_batch',
    ARRAY['{"k": "a"}', '{"k": "a"}', '{"k": "a"}', '{"k": "b"}', '{"k": null}']::jsonb[],
    fairness_keys => ARRAY['a', 'a', 'a', 'b', NULL])) AS enqueued;
SELECT fairness_key, fair_pass FROM durable.live_tasks WHERE queue_name = 'fair_batch' ORDER BY fair_pass, task_id;
SELECT fairness_key, count(*) FROM durable.tasks WHERE queue_name = 'fair_batch' GROUP BY 1 ORDER BY 1;

-- seen by operators: each key's backlog, and the metrics of the queue
SELECT fairness_key, weight, ready, running, unadmitted, oldest_ready_age_seconds >= 0 AS aged
FROM durable.fairness_keys WHERE queue_name = 'fair_batch' ORDER BY ready DESC, fairness_key;
SELECT count(*) AS keys_with_a_weight FROM durable.fairness_keys
WHERE queue_name = 'fair_weights' AND weight <> 1;
SELECT m[1] AS series FROM regexp_matches(durable_metrics_prometheus(),
    '^(durable_fairness_[a-z_]+\{queue="fair_batch"\} [0-9]+)$', 'gm') m
WHERE m[1] NOT LIKE '%age_seconds%' ORDER BY 1;

-- bad calls: nothing is written
\set VERBOSITY sqlstate
SELECT durable_set_fairness('fair_batch', 'a', 0);
SELECT durable_set_fairness('fair_batch', 'a', -1);
SELECT durable_set_fairness('fair_batch', 'a', 'NaN');
SELECT durable_set_fairness('fair_batch', 'a', 'Infinity');
SELECT durable_set_fairness('fair_batch', 'a', 2000000);
SELECT durable_set_fairness('fair_batch', 'a', NULL);
SELECT durable_set_fairness('fair_batch', NULL, 1);
SELECT durable_set_fairness('fair_batch', '', 1);
SELECT durable_set_fairness('fair_nowhere', 'a', 1);
SELECT durable_enqueue('fair_batch', '{}', fairness_key => '');
SELECT durable_enqueue('fair_batch', '{}', fairness_key => repeat('k', 256));
SELECT durable_enqueue_batch('fair_batch', ARRAY['{}']::jsonb[], fairness_keys => ARRAY['a', 'b']);
SELECT durable_enqueue_batch('fair_batch', ARRAY['{}']::jsonb[], fairness_keys => ARRAY['']);
\set VERBOSITY default
SELECT count(*) AS weights FROM durable.fairness_weights WHERE queue_name = 'fair_batch';
SELECT count(*) AS tasks FROM durable.live_tasks WHERE queue_name = 'fair_batch';

-- leave nothing behind: dropping the queues drops their weights
\set cleanup_queues 'fair_three,fair_weights,fair_idle,fair_keyless,fair_not,fair_later,fair_batch'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
SELECT count(*) AS weights_left FROM durable.fairness_weights WHERE queue_name LIKE 'fair\_%';
