--
-- Limits: every free-form text and every result is held to
-- durable.max_payload_size (54000), a step name leaves room for its
-- compensation step, and a name cut short in a message is cut between
-- characters.
--
SELECT setval('durable.task_seq', 9000) AS first_id_counter;
SET durable.max_payload_size = 1;
SELECT repeat('x', 2000) AS big \gset
SELECT durable_create_queue('limits', retry_base => 1, retry_cap => 1);
SELECT durable_enqueue('limits', '{}', workflow_version => :'big');
SELECT durable_enqueue('limits', '{}', workflow_version => 'v1') AS t \gset
SELECT fence AS f FROM durable_claim('limits', 'w') \gset
SELECT durable_step(:t, :f, 's', 'idempotent', target => :'big');
SELECT version AS v FROM durable_step(:t, :f, 's', 'queryable') \gset
SELECT durable_step_start(:t, :f, 's', :v) AS v \gset
SELECT durable_step_unknown(:t, :f, 's', :v, reason => :'big');
SELECT durable_step_unknown(:t, :f, 's', :v) AS v \gset
SELECT durable_record_receipt(:t, :f, 's', 'succeeded', effect_id => :'big');
SELECT durable_commit_batch(ARRAY[:t], ARRAY[:f], ARRAY[jsonb_build_object('r', :'big')]);
SELECT durable_cancel(:t, :'big');
SELECT durable_outbox_emit('limits', 'limits', '{}', key => :'big');
SELECT fence AS rf FROM durable_idempotent_begin('limits', 'limits', 'k', '{}') \gset
SELECT durable_idempotent_advance('limits', 'limits', 'k', :rf, :'big');
-- nothing of that was written
SELECT state, workflow_version FROM durable.tasks WHERE task_id = :t;
SELECT step, state, effect_id FROM durable.steps WHERE task_id = :t;
SELECT count(*) AS outbox FROM durable.outbox WHERE topic = 'limits';
SELECT recovery_point FROM durable.idempotency_keys WHERE scope = 'limits';
RESET durable.max_payload_size;

-- a step name has room for "compensate:" in front of it
SELECT durable_step(:t, :f, repeat('n', 53), 'idempotent');
SELECT version AS v FROM durable_step(:t, :f, repeat('n', 52), 'idempotent') \gset
SELECT durable_step_start(:t, :f, repeat('n', 52), :v) AS v \gset
SELECT durable_commit(:t, :f, '{}', step => repeat('n', 52), expected_version => :v);
SELECT durable_record_receipt(:t, :f, 's', 'succeeded');
SELECT length(step) AS len, compensates = repeat('n', 52) AS of_long_step, version AS cv
FROM durable_compensate(:t, :f) WHERE compensates <> 's' \gset
\echo :len :of_long_step
SELECT durable_step_start(:t, :f, 'compensate:' || repeat('n', 52), :cv) AS cv \gset
SELECT durable_commit(:t, :f, '{}', step => 'compensate:' || repeat('n', 52), expected_version => :cv);
SELECT state FROM durable.steps WHERE task_id = :t AND step = repeat('n', 52);

-- a long name is cut between characters in the message
SELECT durable_create_queue('a' || repeat(chr(233), 40));
SELECT durable_step(:t, :f, 'b' || repeat(chr(233), 30), 'idempotent');
-- a client in LATIN1 gets that error, not one about converting the message
SET client_encoding = 'LATIN1';
\set VERBOSITY sqlstate
SELECT durable_create_queue('a' || repeat(chr(233), 40));
\set VERBOSITY default
RESET client_encoding;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'a,limits'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
