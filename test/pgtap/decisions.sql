-- SQLSTATE contracts, signatures and labels of the pure functions.
BEGIN;
SELECT plan(20);

SELECT has_function('durable_retry_delay', ARRAY['text', 'integer', 'integer', 'integer']);
SELECT function_returns('durable_retry_delay', ARRAY['text', 'integer', 'integer', 'integer'], 'integer');
SELECT volatility_is('durable_retry_delay', ARRAY['text', 'integer', 'integer', 'integer'], 'immutable');
SELECT isnt_strict('durable_retry_delay', ARRAY['text', 'integer', 'integer', 'integer']);
SELECT has_function('durable_next_action', ARRAY['integer', 'integer', 'interval', 'interval', 'text', 'interval']);
SELECT volatility_is('durable_next_action', ARRAY['integer', 'integer', 'interval', 'interval', 'text', 'interval'], 'immutable');
SELECT has_function('durable_recovery_action', ARRAY['boolean', 'text', 'boolean', 'integer', 'integer', 'boolean']);
SELECT volatility_is('durable_recovery_action', ARRAY['boolean', 'text', 'boolean', 'integer', 'integer', 'boolean'], 'immutable');
SELECT function_returns('durable_request_hash', ARRAY['jsonb'], 'bytea');
SELECT function_returns('durable_idempotency_key', ARRAY['text[]'], 'text');

SELECT is(proparallel, 's', proname || ' is parallel safe')
FROM pg_proc
WHERE proname IN ('durable_retry_delay', 'durable_next_action', 'durable_recovery_action',
                  'durable_request_hash', 'durable_idempotency_key')
ORDER BY proname;

SELECT throws_ok($$SELECT durable_retry_delay('a', 0)$$, '22023');
SELECT throws_ok($$SELECT durable_next_action(1, 3, '1 s', NULL, 'sometimes')$$, '22023',
                 'unknown error class "sometimes"');
SELECT throws_ok($$SELECT durable_next_action(1, 3, '1 s', NULL, NULL)$$, '22004');
SELECT throws_ok($$SELECT durable_recovery_action(true, 'perhaps', true, 1, 3)$$, '22023',
                 'unknown receipt "perhaps"');
SELECT throws_ok($$SELECT durable_idempotency_key('a', NULL)$$, '22004');

SELECT * FROM finish();
ROLLBACK;
