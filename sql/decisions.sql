--
-- The decision tables of docs/design.md section 3: reference cases, every branch
-- and every bad argument.
--
\set VERBOSITY default

-- durable_recovery_action reference cases
SELECT durable_recovery_action(false, NULL, true, 1, 3) AS "(false,null,true,1,3)",
       durable_recovery_action(true, 'succeeded', true, 1, 3) AS "(true,succeeded,true,1,3)",
       durable_recovery_action(true, NULL, false, 1, 3) AS "(true,null,false,1,3)",
       durable_recovery_action(true, NULL, true, 1, 3) AS "(true,null,true,1,3)";

-- the remaining branches
SELECT durable_recovery_action(true, 'failed_permanent', false, 1, 3) AS failed_receipt,
       durable_recovery_action(true, NULL, true, 3, 3) AS exhausted,
       durable_recovery_action(true, NULL, false, 1, 3, true) AS queryable_no_receipt,
       durable_recovery_action(true, 'succeeded', false, 9, 3, true) AS queryable_succeeded,
       durable_recovery_action(true, 'not_executed', false, 1, 3, true) AS not_executed,
       durable_recovery_action(true, 'not_executed', false, 3, 3) AS not_executed_exhausted,
       durable_recovery_action(false, 'succeeded', false, 9, 3, true) AS lease_live;

-- durable_next_action reference cases
SELECT durable_next_action(1, 3, '5 s', '30 s', 'transient') AS "(1,3,5,30) transient",
       durable_next_action(3, 3, '5 s', '30 s', 'transient') AS "(3,3,5,30) transient",
       durable_next_action(1, 3, '31 s', '30 s', 'transient') AS "(1,3,31,30) transient",
       durable_next_action(1, 3, '5 s', '30 s', 'permanent') AS permanent,
       durable_next_action(1, 3, '5 s', '30 s', 'unknown') AS unknown;

-- the next retry would start after the deadline; a NULL deadline is none;
-- permanent and unknown errors do not consume budget
SELECT durable_next_action(1, 3, '25 s', '30 s', 'transient', '6 s') AS late_retry,
       durable_next_action(1, 3, '25 s', '30 s', 'transient', '5 s') AS just_in_time,
       durable_next_action(1, 3, '100 days', NULL, 'transient', '1 hour') AS no_deadline,
       durable_next_action(9, 3, '100 days', '1 s', 'permanent') AS permanent_over_budget,
       durable_next_action(9, 3, '100 days', '1 s', 'unknown') AS unknown_over_budget,
       durable_next_action(1, 3, '29 days', '1 mon', 'transient', '1 day') AS month_is_30_days;

-- bad arguments
SELECT durable_recovery_action(NULL, NULL, true, 1, 3);
SELECT durable_recovery_action(true, NULL, NULL, 1, 3);
SELECT durable_recovery_action(true, NULL, true, NULL, 3);
SELECT durable_recovery_action(true, 'maybe', true, 1, 3);
SELECT durable_recovery_action(true, NULL, true, -1, 3);
SELECT durable_recovery_action(true, NULL, true, 1, 0);
SELECT durable_next_action(1, 3, '5 s', '30 s', 'flaky');
SELECT durable_next_action(1, 3, '5 s', '30 s', NULL);
SELECT durable_next_action(NULL, 3, '5 s', '30 s', 'transient');
SELECT durable_next_action(1, NULL, '5 s', '30 s', 'transient');
SELECT durable_next_action(1, 3, NULL, '30 s', 'transient');
SELECT durable_next_action(1, 3, '5 s', '30 s', 'transient', NULL);
SELECT durable_next_action(-1, 3, '5 s', '30 s', 'transient');
SELECT durable_next_action(1, 0, '5 s', '30 s', 'transient');
SELECT durable_next_action(1, 3, '-5 s', '30 s', 'transient');
SELECT durable_next_action(1, 3, '5 s', '-30 s', 'transient');
SELECT durable_next_action(1, 3, '5 s', '30 s', 'transient', '-1 s');
-- parts of mixed signs last as long as the date they are added to says
SELECT durable_next_action(1, 3, '1 mon -29 days', '30 s', 'transient');
SELECT durable_next_action(1, 3, '5 s', '1 day -86399 s', 'transient');
SELECT durable_next_action(1, 3, '5 s', '30 s', 'transient', '-1 mon 31 days');
SELECT durable_next_action(1, 3, '5 s', '178000000 years', 'transient');
