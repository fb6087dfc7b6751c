--
-- Streams (src/core/stream.c): what a running task tells its readers as it
-- goes (a model's tokens, a tool's progress), a chunk at a time, each at
-- the next position of its stream.  A stream belongs to its task: only
-- the holder of the task's fence appends to it or closes it, readers need
-- a grant on the task's queue, and the stream goes when the task's
-- history does.  The head holds the last position and says whether the
-- stream is closed; a close is also a chunk, a NULL one at the end, so
-- that a reader learns of it in order.  On Citus both are distributed
-- with their task.
--
CREATE TABLE durable.streams (
    partition_key int NOT NULL,
    task_id       bigint NOT NULL,
    stream        text COLLATE "C" NOT NULL,
    queue_name    text COLLATE "C" NOT NULL,
    last_seq      bigint NOT NULL,
    created_at    timestamptz NOT NULL,
    appended_at   timestamptz NOT NULL,
    closed_at     timestamptz,
    PRIMARY KEY (partition_key, task_id, stream)
);
CREATE INDEX streams_appended ON durable.streams (appended_at);
COMMENT ON TABLE durable.streams IS 'the streams of tasks (durable_stream_append): the last position of each, and when it was closed';
COMMENT ON COLUMN durable.streams.queue_name IS 'the queue of the stream''s task, whose grants say who may read it';
SELECT pg_catalog.pg_extension_config_dump('durable.streams', '');
REVOKE ALL ON durable.streams FROM PUBLIC;
GRANT SELECT ON durable.streams TO durable_operator;

CREATE TABLE durable.stream_chunks (
    partition_key int NOT NULL,
    task_id       bigint NOT NULL,
    stream        text COLLATE "C" NOT NULL,
    seq           bigint NOT NULL,
    chunk         jsonb,
    at            timestamptz NOT NULL,
    PRIMARY KEY (partition_key, task_id, stream, seq)
);
COMMENT ON TABLE durable.stream_chunks IS 'the chunks of the streams of tasks, by position; a NULL chunk ends a closed stream';
SELECT pg_catalog.pg_extension_config_dump('durable.stream_chunks', '');
REVOKE ALL ON durable.stream_chunks FROM PUBLIC;
GRANT SELECT ON durable.stream_chunks TO durable_operator;
