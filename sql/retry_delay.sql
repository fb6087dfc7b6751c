--
-- durable_retry_delay: the reference vectors of docs/design.md section 3, the cap,
-- overflow at huge attempts, and every bad argument.
--
SELECT attempt,
       durable_retry_delay('flight-1', attempt) AS "flight-1",
       durable_retry_delay('flight-2', attempt) AS "flight-2"
FROM generate_series(1, 6) AS attempt;

-- the ceiling never passes the cap, and the jitter keeps at least half of it
SELECT bool_and(d BETWEEN 30 AND 60) AS within_cap
FROM (SELECT durable_retry_delay('act-' || i, 12) AS d
      FROM generate_series(1, 1000) AS i) AS delays;

-- no overflow for any attempt, up to the largest int
SELECT durable_retry_delay('flight-1', 32) BETWEEN 30 AND 60 AS attempt_32,
       durable_retry_delay('flight-1', 2147483647) BETWEEN 30 AND 60 AS attempt_max,
       durable_retry_delay('flight-1', 40, 2147483647, 2147483647) >= 1073741823 AS huge_base;

-- a delay is never below one second
SELECT min(durable_retry_delay('x' || i, 1, 1, 1)) AS smallest
FROM generate_series(1, 200) AS i;

-- deterministic: the same activity and attempt give the same delay
SELECT durable_retry_delay('flight-1', 5, 3, 100) = durable_retry_delay('flight-1', 5, 3, 100) AS stable;

-- immutable and parallel safe; not strict: a NULL is 22004
SELECT provolatile, proisstrict, proparallel
FROM pg_proc WHERE proname = 'durable_retry_delay';
SELECT durable_retry_delay(NULL, 1);
SELECT durable_retry_delay('flight-1', NULL);

-- bad arguments
SELECT durable_retry_delay('flight-1', 0);
SELECT durable_retry_delay('flight-1', -5);
SELECT durable_retry_delay('flight-1', 1, 0);
SELECT durable_retry_delay('flight-1', 1, 2, 0);
