-- Every (from, to) pair of the step state machine, driven through the API:
-- the pairs in durable.step_transitions succeed, every other raises 55U04.
BEGIN;
SELECT plan(39);

SELECT durable_create_queue('walk', lease => '1 hour');

-- a fresh task holding step 's' in the given state
CREATE FUNCTION pg_temp.step_in(from_state text, OUT task bigint, OUT f bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v int;
BEGIN
    task := durable_enqueue('walk', jsonb_build_object('from', from_state));
    SELECT c.fence INTO f FROM durable_claim('walk', 'walker') c;
    PERFORM durable_step(task, f, 's', 'idempotent');
    IF from_state = 'planned' THEN RETURN; END IF;
    v := durable_step_start(task, f, 's', 1);
    IF from_state = 'started' THEN RETURN; END IF;
    IF from_state IN ('unknown', 'failed') THEN
        v := durable_step_unknown(task, f, 's', v);
        IF from_state = 'failed' THEN
            PERFORM durable_record_receipt(task, f, 's', 'failed_permanent');
        END IF;
        RETURN;
    END IF;
    PERFORM durable_commit(task, f, step => 's', expected_version => v);
    IF from_state = 'compensated' THEN
        PERFORM durable_compensate(task, f);
        PERFORM durable_step_start(task, f, 'compensate:s', 1);
        PERFORM durable_commit(task, f, step => 'compensate:s', expected_version => 2);
    END IF;
END
$$;

-- try to move step 's' from from_state to to_state with the call that
-- makes that move; 'ok' when the step ends there, else the SQLSTATE
CREATE FUNCTION pg_temp.try_move(from_state text, to_state text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    h record;
    v int;
    state text;
BEGIN
    h := pg_temp.step_in(from_state);
    SELECT s.version INTO v FROM durable.steps s WHERE s.task_id = h.task AND s.step = 's';
    BEGIN
        CASE to_state
            WHEN 'planned' THEN
                IF from_state = 'started' THEN
                    PERFORM durable_fail(h.task, h.f, 'transient', step => 's');
                ELSE
                    PERFORM durable_record_receipt(h.task, h.f, 's', 'not_executed');
                END IF;
            WHEN 'started' THEN
                PERFORM durable_step_start(h.task, h.f, 's', v);
            WHEN 'committed' THEN
                IF from_state = 'unknown' THEN
                    PERFORM durable_record_receipt(h.task, h.f, 's', 'succeeded');
                ELSE
                    PERFORM durable_commit(h.task, h.f, step => 's', expected_version => v);
                END IF;
            WHEN 'failed' THEN
                IF from_state = 'unknown' THEN
                    PERFORM durable_record_receipt(h.task, h.f, 's', 'failed_permanent');
                ELSE
                    PERFORM durable_fail(h.task, h.f, 'permanent', step => 's');
                END IF;
            WHEN 'unknown' THEN
                PERFORM durable_step_unknown(h.task, h.f, 's', v);
            WHEN 'compensated' THEN
                PERFORM durable_compensate(h.task, h.f);
                SELECT s.version INTO v FROM durable.steps s
                WHERE s.task_id = h.task AND s.step = 'compensate:s';
                IF v = 1 THEN
                    v := durable_step_start(h.task, h.f, 'compensate:s', v);
                END IF;
                PERFORM durable_commit(h.task, h.f, step => 'compensate:s', expected_version => coalesce(v, 1));
        END CASE;
    EXCEPTION WHEN OTHERS THEN
        RETURN SQLSTATE;
    END;
    SELECT s.state INTO state FROM durable.steps s WHERE s.task_id = h.task AND s.step = 's';
    RETURN CASE WHEN state = to_state THEN 'ok' ELSE 'ended in ' || state END;
END
$$;

-- the 36 pairs; compensation only exists for committed steps, so a step in
-- any other state has no compensation to commit (42704)
SELECT is(pg_temp.try_move(f, t),
          CASE WHEN EXISTS (SELECT FROM durable.step_transitions tr
                            WHERE tr.from_state::text = f AND tr.to_state::text = t) THEN 'ok'
               WHEN t = 'compensated' AND f NOT IN ('committed', 'compensated') THEN '42704'
               ELSE '55U04' END,
          f || ' -> ' || t)
FROM unnest(ARRAY['planned', 'started', 'committed', 'failed', 'unknown', 'compensated']) f,
     unnest(ARRAY['planned', 'started', 'committed', 'failed', 'unknown', 'compensated']) t
ORDER BY array_position(ARRAY['planned', 'started', 'committed', 'failed', 'unknown', 'compensated'], f),
         array_position(ARRAY['planned', 'started', 'committed', 'failed', 'unknown', 'compensated'], t);

-- the CAS and its code
SELECT throws_ok($$SELECT durable_step_start(h.task, h.f, 's', 7) FROM pg_temp.step_in('planned') h$$,
                 '55U02', NULL, 'a version that is not current is 55U02');
SELECT is((SELECT count(*) FROM durable.step_transitions), 9::bigint, 'nine allowed moves');
SELECT throws_ok($$SELECT durable_step(h.task, h.f, 's', 'idempotent', '{"other": true}') FROM pg_temp.step_in('planned') h$$,
                 '55U03', NULL, 'a replay with another request is 55U03');

SELECT * FROM finish();
ROLLBACK;
