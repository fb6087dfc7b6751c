--
-- Request hashes and idempotency keys.
--

-- key order and white space do not change the hash; values do
SELECT durable_request_hash('{"a": 1, "b": [1, 2]}') =
       durable_request_hash('{ "b":[1,2],"a":1 }') AS same_request,
       durable_request_hash('{"a": 1}') = durable_request_hash('{"a": 2}') AS different_request,
       length(durable_request_hash('{}')) AS bytes;

-- SHA-256 of the canonical text, so anyone can recompute it
SELECT durable_request_hash('{"b":2,  "a":1}') =
       sha256(convert_to('{"a": 1, "b": 2}', 'UTF8')) AS is_sha256_of_canonical_text;
SELECT encode(durable_request_hash('{"amount": 100, "currency": "EUR"}'), 'hex') AS hash;

-- keys: stable, 64 hex digits, unambiguous over part boundaries
SELECT durable_idempotency_key('42', 'charge', 'stripe') AS key;
SELECT durable_idempotency_key('a', 'bc') <> durable_idempotency_key('ab', 'c') AS split_differs,
       durable_idempotency_key('a', '') <> durable_idempotency_key('a') AS empty_part_differs,
       durable_idempotency_key(VARIADIC ARRAY['x', 'y']) = durable_idempotency_key('x', 'y') AS variadic_same,
       length(durable_idempotency_key('x')) AS hex_digits;

-- bad input
SELECT durable_idempotency_key('42', NULL, 'stripe');
SELECT durable_idempotency_key(VARIADIC ARRAY[]::text[]);
SELECT durable_idempotency_key(VARIADIC ARRAY[['a', 'b'], ['c', 'd']]);
SELECT durable_idempotency_key(VARIADIC NULL::text[]) IS NULL AS null_array;
SELECT durable_request_hash(NULL);
