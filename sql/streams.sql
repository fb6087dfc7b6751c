--
-- Streams (docs/design.md §18): a running task appends chunks under its
-- fence, each at the next position; a reader reads after the last
-- position it saw; a close, or the task's end, is a NULL chunk at the
-- end.  Readers need a grant of the task's queue; streams go with their
-- queue and with their task's history.
--

-- the SQLSTATE and message of a call's error, task ids left out
CREATE FUNCTION pg_temp.fails(call text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'SELECT ' || call;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN regexp_replace(SQLSTATE || ': ' || SQLERRM, 'task -?[0-9]+', 'task N');
END
$$;

-- all a call's error says (message, detail, hint), task ids left out
CREATE FUNCTION pg_temp.denial(call text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    detail text;
    hint text;
BEGIN
    EXECUTE 'SELECT ' || call;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN regexp_replace(SQLSTATE || ': ' || SQLERRM || ' / ' || detail || ' / ' || hint,
                          'task -?[0-9]+', 'task N');
END
$$;

-- a stream as a reader sees it: position and chunk
CREATE FUNCTION pg_temp.chunks(id bigint, stream text, after bigint = 0, max int = 1000)
RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(seq || '=' || coalesce(chunk::text, 'END'), ' ' ORDER BY seq), '(none)')
    FROM durable_stream_read(id, stream, after, max)
$$;

SELECT durable_create_queue('st_talk', lease => '1 hour', retry_base => 1, retry_cap => 1);
SELECT durable_enqueue('st_talk', '{}') AS t \gset
SELECT durable_enqueue('st_talk', '{}') AS t_pending \gset
SELECT task_id = :t AS claimed, fence AS f FROM durable_claim('st_talk', 'w1') \gset

-- bad arguments: 22004, 22023, 54000; nothing written
SELECT pg_temp.fails(format('durable_stream_append(%s, %s, NULL, %L)', :t, :f, '"x"'));
SELECT pg_temp.fails(format('durable_stream_append(%s, %s, %L, NULL)', :t, :f, 'tokens'));
SELECT pg_temp.fails(format('durable_stream_append(%s, NULL, %L, %L)', :t, 'tokens', '"x"'));
SELECT pg_temp.fails(format('durable_stream_append(%s, %s, %L, %L)', :t, :f, '', '"x"'));
SELECT pg_temp.fails(format('durable_stream_append(%s, %s, %L, to_jsonb(repeat(%L, 1100000)))', :t, :f, 'tokens', 'x'));
SELECT pg_temp.fails(format('durable_stream_read(%s, %L, -1)', :t, 'tokens'));
SELECT pg_temp.fails(format('durable_stream_read(%s, %L, 0, 0)', :t, 'tokens'));
SELECT pg_temp.fails(format('durable_stream_read(%s, %L, 0, 10001)', :t, 'tokens'));
SELECT pg_temp.fails(format('durable_stream_read(%s, %L, NULL)', :t, 'tokens'));
SELECT pg_temp.fails(format('durable_stream_read(%s, NULL)', :t));
SELECT pg_temp.fails('durable_stream_read(-7, ''tokens'')');
SELECT count(*) AS streams FROM durable.streams WHERE queue_name = 'st_talk';

-- positions one after another; a reader reads after what it saw, a page at a time
SELECT durable_stream_append(:t, :f, 'tokens', '"Hel"') AS p1,
       durable_stream_append(:t, :f, 'tokens', '"lo"') AS p2,
       durable_stream_append(:t, :f, 'progress', '{"done": 0.5}') AS other_stream;
SELECT durable_stream_append(:t, :f, 'tokens', '[1, {"a": null}]') AS p3;
SELECT pg_temp.chunks(:t, 'tokens') AS all_of_it,
       pg_temp.chunks(:t, 'tokens', 1) AS after_1,
       pg_temp.chunks(:t, 'tokens', 0, 2) AS first_page,
       pg_temp.chunks(:t, 'tokens', 3) AS caught_up,
       pg_temp.chunks(:t, 'nothing') AS no_such_stream;
SELECT bool_and(at = (SELECT appended_at FROM durable.streams
                      WHERE task_id = :t AND stream = 'tokens') OR seq < 3) AS at_of_append
FROM durable_stream_read(:t, 'tokens');

-- an error later in the transaction takes the chunk back with it
BEGIN;
SELECT durable_stream_append(:t, :f, 'tokens', '"lost"') AS p4_taken_back;
SELECT pg_temp.fails('1/0');
ROLLBACK;
SELECT pg_temp.chunks(:t, 'tokens', 2) AS still_three;

-- only the holder of the fence appends or closes: 55U01 for a stale fence
-- or a task not running, 42704 for none
SELECT pg_temp.fails(format('durable_stream_append(%s, %s, %L, %L)', :t, :f + 1, 'tokens', '"x"'));
SELECT pg_temp.fails(format('durable_stream_close(%s, %s, %L)', :t, :f + 1, 'tokens'));
SELECT pg_temp.fails(format('durable_stream_append(%s, 1, %L, %L)', :t_pending, 'tokens', '"x"'));
SELECT pg_temp.fails('durable_stream_append(-7, 1, ''tokens'', ''"x"'')');
SELECT pg_temp.chunks(:t, 'tokens', 2) AS still_three;

-- a close ends the stream with a NULL chunk; a second close says the same;
-- an append after it is refused (55000) and writes nothing
SELECT durable_stream_close(:t, :f, 'tokens') AS end_at,
       durable_stream_close(:t, :f, 'tokens') AS end_again;
SELECT pg_temp.fails(format('durable_stream_append(%s, %s, %L, %L)', :t, :f, 'tokens', '"late"'));
SELECT pg_temp.chunks(:t, 'tokens', 2) AS closed, pg_temp.chunks(:t, 'tokens', 4) AS past_the_end;
SELECT last_seq, closed_at IS NOT NULL AS closed FROM durable.streams WHERE task_id = :t AND stream = 'tokens';
-- a stream closed before anything was appended ends at 1
SELECT durable_stream_close(:t, :f, 'empty') AS empty_end, pg_temp.chunks(:t, 'empty') AS empty;

-- a stream still open when its task finishes ends there, for every reader
SELECT pg_temp.chunks(:t, 'progress') AS open_while_running;
SELECT durable_commit(:t, :f, '{}');
SELECT pg_temp.chunks(:t, 'progress') AS ended_by_finish,
       pg_temp.chunks(:t, 'progress', 1) AS just_the_end,
       pg_temp.chunks(:t, 'progress', 2) AS past_the_end,
       pg_temp.chunks(:t, 'progress', 0, 1) AS page_before_the_end,
       pg_temp.chunks(:t, 'never') AS never_written,
       pg_temp.chunks(:t, 'tokens', 2) AS closed_ends_once;
SELECT pg_temp.fails(format('durable_stream_append(%s, %s, %L, %L)', :t, :f, 'progress', '"x"'));

-- readers need a grant of a restricted queue: enqueue or work (42501)
CREATE ROLE regress_st_app IN ROLE durable_producer, durable_worker;
CREATE ROLE regress_st_reader IN ROLE durable_producer;
CREATE ROLE regress_st_other IN ROLE durable_producer, durable_worker;
SELECT durable_create_queue('st_private', lease => '1 hour');
SELECT durable_grant_queue('st_private', 'regress_st_app', 'all');
SELECT durable_grant_queue('st_private', 'regress_st_reader', 'enqueue');
SET ROLE regress_st_app;
SELECT durable_enqueue('st_private', '{}') AS tp \gset
SELECT fence AS fp FROM durable_claim('st_private', 'w2') \gset
SELECT durable_stream_append(:tp, :fp, 'tokens', '"secret"') AS own_append;
SET ROLE regress_st_reader;
SELECT pg_temp.chunks(:tp, 'tokens') AS reader_with_enqueue;
SELECT pg_temp.fails(format('durable_stream_append(%s, %s, %L, %L)', :tp, :fp, 'tokens', '"x"'));
SET ROLE regress_st_other;
SELECT pg_temp.fails(format('durable_stream_read(%s, %L)', :tp, 'tokens'));
SELECT pg_temp.fails('durable_stream_read(12345, ''tokens'')') AS unknown_task;
-- and nothing of the refusal tells that the one task exists
SELECT pg_temp.denial(format('durable_stream_read(%s, %L)', :tp, 'tokens'))
       = pg_temp.denial('durable_stream_read(12345, ''tokens'')') AS same_refusal;
SELECT pg_temp.fails(format('durable_stream_append(%s, %s, %L, %L)', :tp, :fp, 'tokens', '"x"'));
SELECT pg_temp.fails(format('durable_stream_close(%s, %s, %L)', :tp, :fp, 'tokens'));
RESET ROLE;
SELECT pg_temp.chunks(:tp, 'tokens') AS unchanged;

-- a queue dropped takes its streams
SELECT durable_cancel(:tp, 'done');
SELECT durable_drop_queue('st_private', cascade => true);
SELECT count(*) AS streams FROM durable.streams WHERE queue_name = 'st_private';
SELECT count(*) AS chunks FROM durable.stream_chunks WHERE task_id = :tp;
DROP ROLE regress_st_app, regress_st_reader, regress_st_other;

-- streams go with their task's history: kept while history has the task,
-- removed once it is gone (here its rows are removed as a dropped day's
-- would be: the task, its steps and its events)
UPDATE durable.streams SET appended_at = '2000-01-01 00:00+00' WHERE task_id = :t;
SELECT count(*) AS failed FROM durable.maintain_history(now(), '7 days', 100)
WHERE action = 'failed';
SELECT count(*) AS kept FROM durable.streams WHERE task_id = :t;
DELETE FROM durable.task_history WHERE task_id = :t;
DELETE FROM durable.step_history WHERE task_id = :t;
DELETE FROM durable.event_log WHERE task_id = :t;
SELECT count(*) AS failed FROM durable.maintain_history(now(), '7 days', 100) WHERE action = 'failed';
SELECT count(*) AS streams FROM durable.streams WHERE task_id = :t;
SELECT count(*) AS chunks FROM durable.stream_chunks WHERE task_id = :t;

SELECT durable_cancel(:t_pending, 'done');
SELECT count(*) AS disagreements FROM durable_verify();
SELECT durable_drop_queue('st_talk', cascade => true);
