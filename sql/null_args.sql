--
-- A NULL argument is 22004, never a NULL result that looks like success.
--
\set VERBOSITY default
SELECT durable_pause(NULL);
SELECT durable_resume(NULL);
SELECT durable_drop_queue(NULL);
SELECT durable_request_hash(NULL);
SELECT proname, proisstrict FROM pg_proc
WHERE proname IN ('durable_pause', 'durable_resume', 'durable_drop_queue',
                  'durable_retry_delay', 'durable_request_hash')
ORDER BY proname;
