--
-- The request hash is over the canonical text with numbers trimmed: equal
-- jsonb values are one request.
--
SELECT '{"a": 1}'::jsonb = '{"a": 1.0}'::jsonb AS equal_as_jsonb,
       durable_request_hash('{"a": 1}') = durable_request_hash('{"a": 1.0}') AS same_hash,
       durable_request_hash('[1.50, -0.0, 1e2]') = durable_request_hash('[1.5, 0, 100]') AS same_array,
       durable_request_hash('2.000') = durable_request_hash('2') AS same_scalar,
       durable_request_hash('{"a": "1.0"}') = durable_request_hash('{"a": "1"}') AS strings_kept,
       durable_request_hash('{"a": 1.01}') = durable_request_hash('{"a": 1.1}') AS different_numbers;

-- the canonical text, so anyone can recompute it
SELECT durable_request_hash('{"b": [2.50, {"c": 0.000}], "a": 1.0}') =
       sha256(convert_to('{"a": 1, "b": [2.5, {"c": 0}]}', 'UTF8')) AS is_sha256_of_canonical_text;
SELECT durable_request_hash('"x"') = sha256(convert_to('"x"', 'UTF8')) AS scalar_text;
-- integers hash as before (the reference vector of 0.1.0)
SELECT encode(durable_request_hash('{"amount": 100, "currency": "EUR"}'), 'hex') AS hash;

-- a hash that 0.1.0 stored, of the untrimmed text, still matches its request
-- (written as 0.1.0 wrote it, here in the partition of its queue)
SELECT durable_create_queue('legacy');
INSERT INTO durable.inbox (partition_key, queue_name, consumer, message_id, payload_hash, received_at)
SELECT partition_base, 'legacy', 'legacy', 'm-1', sha256(convert_to('{"amount": 1.0}', 'UTF8')), now()
FROM durable.queues WHERE queue_name = 'legacy';
SELECT durable_inbox_receive('legacy', 'legacy', 'm-1', '{"amount": 1.0}') AS first_again;
SELECT durable_inbox_receive('legacy', 'legacy', 'm-1', '{"amount": 2}');

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'legacy'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
