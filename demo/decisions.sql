-- What durable's decision functions do with 1,000 activities that all failed
-- at the same instant: when each one retries, and why none of them wakes up
-- together.  Part of tools/demo.
\pset footer off

\echo
\echo '1,000 activities failed at 12:00:00 with a transient error. A fixed backoff'
\echo 'would wake all of them at the same second. durable_retry_delay(activity, attempt)'
\echo 'spreads each attempt over [50%, 100%] of min(60 s, 2 s * 2^(attempt-1)),'
\echo 'with jitter from SHA-256 of the activity id, so a replay computes the same plan.'
\echo
\echo 'Wake-ups of attempt 5 (ceiling 32 s), one bar per second:'
SELECT lpad(delay || ' s', 5) AS "after",
       lpad(count(*)::text, 4) AS "tasks",
       repeat('#', (count(*) / 2)::int) AS "histogram (# = 2 tasks)"
FROM (SELECT durable_retry_delay('payment-' || i, 5) AS delay
      FROM generate_series(1, 1000) AS i) AS plan
GROUP BY delay ORDER BY delay;

\echo
\echo 'The whole retry plan of five of them (seconds after each failure):'
SELECT 'payment-' || i AS activity,
       string_agg(lpad(durable_retry_delay('payment-' || i, a)::text, 3), ' ' ORDER BY a) AS "attempts 1..8"
FROM generate_series(1, 5) AS i, generate_series(1, 8) AS a
GROUP BY i ORDER BY i;

\echo
\echo 'Peak wake-ups in any one second, per attempt (1,000 tasks):'
SELECT attempt,
       least(60, 2 * 2 ^ (attempt - 1))::int AS "ceiling s",
       max(n) AS "busiest second",
       count(*) AS "distinct seconds"
FROM (SELECT a AS attempt, durable_retry_delay('payment-' || i, a) AS d, count(*) AS n
      FROM generate_series(1, 1000) AS i, generate_series(1, 8) AS a
      GROUP BY 1, 2) AS per_second
GROUP BY attempt ORDER BY attempt;

\echo
\echo 'After a failure, the retry budget decides (durable_next_action):'
SELECT error_class, attempts || '/3' AS attempts, elapsed, deadline,
       durable_next_action(attempts, 3, elapsed, deadline, error_class) AS decision
FROM (VALUES ('transient', 1, interval '5 s', interval '30 s'),
             ('transient', 3, '5 s', '30 s'),
             ('transient', 1, '31 s', '30 s'),
             ('permanent', 1, '5 s', '30 s'),
             ('unknown', 1, '5 s', '30 s')) AS e(error_class, attempts, elapsed, deadline);

\echo
\echo 'A worker vanished mid-activity. What the recovery table does with each kind of evidence'
\echo '(durable_recovery_action): a timeout is not a failure, and an unknown outcome is never retried blindly.'
SELECT evidence, durable_recovery_action(expired, receipt, retry_safe, attempts, 3, queryable) AS action
FROM (VALUES ('lease still running', false, NULL, true, 1, false),
             ('receipt says it succeeded', true, 'succeeded', false, 1, false),
             ('receipt says it failed for good', true, 'failed_permanent', false, 1, false),
             ('queryable call, no receipt yet', true, NULL, false, 1, true),
             ('lookup proved it never ran', true, 'not_executed', false, 1, true),
             ('unsafe call, outcome unknown', true, NULL, false, 1, false),
             ('idempotent call, attempts left', true, NULL, true, 1, false),
             ('idempotent call, 3 of 3 used', true, NULL, true, 3, false))
     AS v(evidence, expired, receipt, retry_safe, attempts, queryable);
