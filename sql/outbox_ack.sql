--
-- An acknowledgement names each message once, however often it is listed.
-- (fences start from the clock; this file counts them from 100)
--
SELECT setval('durable.outbox_fence_seq', 100, false) AS fences_from_100 \gset
SELECT durable_create_queue('acks', partitions => 8);
SELECT durable_outbox_emit('acks', 'acks', '{"n": 1}', key => 'k-1') AS a \gset
SELECT durable_outbox_emit('acks', 'acks', '{"n": 2}', key => 'k-2') AS b \gset
SELECT (:a & 32767) <> (:b & 32767) AS two_partitions;
SELECT max(fence) AS f FROM durable_outbox_claim('acks', 'p') \gset
SELECT durable_outbox_ack('acks', ARRAY[:a, :a, :b], :f) AS acked;
SELECT count(*) AS unpublished FROM durable.outbox
WHERE message_id IN (:a, :b) AND published_at IS NULL;
-- listed twice under a fence that does not hold it: still 55U01
SELECT durable_outbox_emit('acks', 'acks', '{"n": 3}', key => 'k-3') AS c \gset
SELECT durable_outbox_ack('acks', ARRAY[:c, :c], :f);
-- the rows of a two-dimensional array are not a list of ids: 2202E, and
-- nothing marked
SELECT max(fence) AS g FROM durable_outbox_claim('acks', 'p') \gset
SELECT durable_outbox_ack('acks', ARRAY[[:c]], :g);
SELECT count(*) AS unpublished FROM durable.outbox
WHERE message_id = :c AND published_at IS NULL;

-- leave nothing behind: the files run in any order, in one database
\set cleanup_queues 'acks'
\getenv abs_srcdir PG_ABS_SRCDIR
\set cleanup_file :abs_srcdir '/test/regress/cleanup.sql'
\i :cleanup_file
