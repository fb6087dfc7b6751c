--
-- A cascading cancel leaves doubt to a person (docs/design.md section 12):
-- cancelling a parent cancels its unfinished children, except a child with
-- a step started or unknown, which goes to NEEDS_REVIEW with an event that
-- names the parent and who cancelled it; a child already in review stays
-- there.  Once its doubt is settled, such a child is cancelled as its
-- parent was, never resumed.
--
SELECT setval('durable.task_seq', 15000) AS first_id_counter;
SELECT durable_create_queue('cc_parent');
SELECT durable_create_queue('cc_a');
SELECT durable_create_queue('cc_b');
SELECT durable_create_queue('cc_c', lease => '1 ms');
SELECT durable_create_queue('cc_d');
SELECT durable_create_queue('cc_e');
CREATE FUNCTION pg_temp.states(p bigint) RETURNS TABLE (child text, state text, steps_in_doubt int)
LANGUAGE sql AS $$
    SELECT w.key, t.state::text, t.steps_in_doubt
    FROM durable.tasks pt, jsonb_each(pt.waits) w
    JOIN durable.tasks t ON t.task_id = (w.value ->> 'task_id')::bigint
    WHERE pt.task_id = p ORDER BY w.key
$$;

SELECT durable_enqueue('cc_parent', '{"order": 1}') AS p \gset
SELECT fence AS pf FROM durable_claim('cc_parent', 'boss') \gset
SELECT durable_spawn(:p, :pf, 'a', 'cc_a') AS a,
       durable_spawn(:p, :pf, 'b', 'cc_b') AS b,
       durable_spawn(:p, :pf, 'c', 'cc_c') AS c,
       durable_spawn(:p, :pf, 'd', 'cc_d') AS d,
       durable_spawn(:p, :pf, 'e', 'cc_e') AS e \gset
SELECT status FROM durable_join(:p, :pf, 'all');

-- a: running, an unsafe step started (its worker is inside the call)
SELECT fence AS af FROM durable_claim('cc_a', 'wa', lease => '1 minute') \gset
SELECT state FROM durable_step(:a, :af, 'wire', 'unsafe', '{"amount": 10}');
SELECT durable_step_start(:a, :af, 'wire', 1) IS NOT NULL AS wire_started;
-- b: ready, never claimed
-- c: its lease expired with an unsafe step started: already in review
SELECT fence AS cf FROM durable_claim('cc_c', 'wc') \gset
SELECT state FROM durable_step(:c, :cf, 'wire', 'unsafe', '{"amount": 20}');
SELECT durable_step_start(:c, :cf, 'wire', 1) IS NOT NULL AS wire_started;
SELECT pg_sleep(0.01);
SELECT task_id = :c AS is_c, action FROM durable_reconcile(queue => 'cc_c');
-- d: running, its only step committed: nothing in doubt
SELECT fence AS df FROM durable_claim('cc_d', 'wd', lease => '1 minute') \gset
SELECT state FROM durable_step(:d, :df, 'mail', 'idempotent', '{"to": "d"}');
SELECT durable_step_start(:d, :df, 'mail', 1) AS v \gset
SELECT durable_commit(:d, :df, '{"sent": true}', step => 'mail', expected_version => :v);
-- e: running, an idempotent step started (retry-safe, but nobody knows
-- whether it took effect, and a cascade is no person's decision)
SELECT fence AS ef FROM durable_claim('cc_e', 'we', lease => '1 minute') \gset
SELECT state FROM durable_step(:e, :ef, 'mail', 'idempotent', '{"to": "e"}');
SELECT durable_step_start(:e, :ef, 'mail', 1) IS NOT NULL AS mail_started;
SELECT * FROM pg_temp.states(:p);

SET ROLE durable_operator;
SELECT durable_cancel(:p, 'order withdrawn');
RESET ROLE;
SELECT state FROM durable.tasks WHERE task_id = :p;
SELECT * FROM pg_temp.states(:p);
-- the steps nobody knows about are unknown now, the others as they were
SELECT t.child, s.step, s.state FROM pg_temp.states(:p) t
JOIN durable.steps s ON s.task_id = (SELECT (waits -> t.child ->> 'task_id')::bigint FROM durable.tasks WHERE task_id = :p)
ORDER BY 1, 2;
-- the event says which parent was cancelled and by whom
SELECT kind, state, actor, (detail ->> 'parent')::bigint = :p AS names_parent, detail ->> 'reason' AS reason,
       detail ->> 'cancelled_by' AS cancelled_by, detail ->> 'previous_state' AS previous_state,
       detail ->> 'action' AS action
FROM durable.events WHERE task_id IN (:a, :e) AND kind = 'parent_cancelled' ORDER BY task_id;
-- c's review is its own, as before
SELECT count(*) AS parent_events_of_c FROM durable.events WHERE task_id = :c AND kind = 'parent_cancelled';
-- a's worker lost its lease: its late commit writes nothing
SELECT durable_commit(:a, :af, '{"wired": true}', step => 'wire', expected_version => 2);
-- the review queue and the recovery package show why
SELECT task_id = :a AS is_a, step, step_state, reason, decided FROM durable.review_queue
WHERE task_id IN (:a, :e) ORDER BY task_id;
SELECT durable_recovery_package(:a) -> 'recommended_action' ->> 'action' AS recommended,
       jsonb_array_length(durable_recovery_package(:a) -> 'unknown_side_effects') AS unknown;
SELECT count(*) AS disagreements FROM durable_verify();

-- once a person settles the step, the child is cancelled as its parent
-- was: it never resumes for a parent that is gone
SELECT durable_resolve(:a, 'mark_committed', 'ops', '{"bank": "wired"}');
SELECT durable_resolve(:c, 'mark_not_executed', 'ops', '{"bank": "nothing"}');
SELECT durable_resolve(:e, 'mark_committed', 'ops', '{"mail": "sent"}');
SELECT * FROM pg_temp.states(:p);
SELECT detail ->> 'reason' AS reason, (detail ->> 'parent')::bigint = :p AS names_parent
FROM durable.events WHERE task_id = :a AND state = 'cancelled';
SELECT count(*) AS disagreements FROM durable_verify();

-- leave none of this file's tasks behind
SELECT durable_drop_queue(q) FROM unnest(ARRAY['cc_parent', 'cc_a', 'cc_b', 'cc_c', 'cc_d', 'cc_e']) q;
SELECT count(*) AS left_behind FROM durable.tasks
WHERE queue_name IN ('cc_parent', 'cc_a', 'cc_b', 'cc_c', 'cc_d', 'cc_e');

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'cc_a,cc_b,cc_c,cc_d,cc_e,cc_parent'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
