/*-------------------------------------------------------------------------
 *
 * stream.c
 *	  Streams: what a running task tells its readers as it goes, a chunk
 *	  at a time, each at the next position of its stream.
 *
 * Only the holder of a task's fence appends to its streams or closes
 * them: the append locks the task's row FOR SHARE under the fence and the
 * running state, so that the fence cannot change (a lease expired, a
 * second worker claiming) between the check and the commit of the chunk.
 * The stream's head row gives each chunk its position; appends of one
 * stream queue behind its row.  A close is a chunk too, a NULL one at
 * the end, so that a reader that reads in order learns of it in order; a
 * stream still open when its task finishes ends there all the same, as
 * the reader is told (nothing can append once the task is not running).
 * A reader needs the enqueue or the work grant of the task's queue; each
 * append and close notifies durable_stream with the task's id at commit,
 * so that a reader can wait for the next chunk without polling.  A
 * stream goes with its task's history (maintain_history) or its queue
 * (drop.c).  On Citus a stream lives with its task, and a reader hears of
 * the appends made through the node it is connected to (the others it
 * finds when it reads again).  The SQL functions are api/streams.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "core/sql.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* what an append or a close did, and the queue of the task */
enum
{
	APPENDED_QUEUE,
	APPENDED_RESTRICTED,
	APPENDED_SEQ,
	APPENDED_CLOSED,
	APPENDED_NCOLUMNS
};

static const DurableColumn appended_columns[APPENDED_NCOLUMNS] = {
	[APPENDED_QUEUE] = {"queue_name", TEXTOID},
	[APPENDED_RESTRICTED] = {"restricted", BOOLOID},
	[APPENDED_SEQ] = {"last_seq", INT8OID},
	[APPENDED_CLOSED] = {"closed", BOOLOID},
};

enum
{
	APPEND_PARTITION,
	APPEND_TASK_ID,
	APPEND_FENCE,
	APPEND_STREAM,
	APPEND_CHUNK,
	APPEND_CLOSING,
	APPEND_NOW,
	APPEND_NPARAMS
};

static const DurableParam stream_append_params[APPEND_NPARAMS] = {
	[APPEND_PARTITION] = {"partition", INT4OID},
	[APPEND_TASK_ID] = {"task_id", INT8OID},
	[APPEND_FENCE] = {"fence", INT8OID},
	[APPEND_STREAM] = {"stream", TEXTOID},
	[APPEND_CHUNK] = {"chunk", JSONBOID},
	[APPEND_CLOSING] = {"closing", BOOLOID},
	[APPEND_NOW] = {"now", TIMESTAMPTZOID},
};

/*
 * An append or a close, as one statement.  The head moves on while the
 * stream is open, and the chunk goes in at the head's position: an append
 * to a closed stream finds that position taken by the end (closed, in the
 * result), and the caller raises an error, which takes back whatever the
 * statement wrote.  A second close finds the same and leaves it.  On
 * Citus the node of the task's partition runs it (delegated.c).
 */
DurableStatement DurableStreamAppendStatement = {
	.name = "stream_append",
	.sql = "WITH t AS (SELECT t.queue_name, q.restricted FROM durable.live_tasks t"
	"  LEFT JOIN durable.queues q ON q.queue_name = t.queue_name"
	"  WHERE t.partition_key = $partition AND t.task_id = $task_id"
	"  AND t.fence = $fence AND t.state = 'running'"
	"  FOR SHARE OF t),"
	" h AS (INSERT INTO durable.streams AS s (partition_key, task_id, stream,"
	"  queue_name, last_seq, created_at, appended_at, closed_at)"
	"  SELECT $partition, $task_id, $stream, t.queue_name, 1, $now, $now,"
	"  CASE WHEN $closing THEN $now END FROM t"
	"  ON CONFLICT (partition_key, task_id, stream) DO UPDATE"
	"  SET last_seq = s.last_seq + CASE WHEN s.closed_at IS NULL THEN 1 ELSE 0 END,"
	"  appended_at = CASE WHEN s.closed_at IS NULL THEN $now ELSE s.appended_at END,"
	"  closed_at = COALESCE(s.closed_at, CASE WHEN $closing THEN $now END)"
	"  RETURNING s.last_seq, s.closed_at IS NOT NULL AS closed),"
	" c AS (INSERT INTO durable.stream_chunks (partition_key, task_id, stream, seq, chunk, at)"
	"  SELECT $partition, $task_id, $stream, h.last_seq, $chunk, $now FROM h"
	"  ON CONFLICT DO NOTHING RETURNING seq)"
	" SELECT t.queue_name, t.restricted, h.last_seq,"
	" h.closed AND NOT EXISTS (SELECT FROM c) AS closed FROM t, h",
	DURABLE_PARAMS(stream_append_params),
	DURABLE_COLUMNS(appended_columns),
	.by_partition = true,
	.delegated = true,
};

/*
 * append_or_close
 *		Append chunk to the stream of a task held under fence, or close the
 *		stream (closing, chunk NULL).  Returns the position written, or
 *		for a stream closed before, its end.
 */
static int64
append_or_close(int64 task_id, int64 fence, const char *stream, Jsonb *chunk,
				bool closing)
{
	DurableResult res;
	Datum		args[APPEND_NPARAMS];
	char		nulls[APPEND_NPARAMS] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int64		seq;
	char		payload[32];

	args[APPEND_PARTITION] = Int32GetDatum(DURABLE_TASK_PARTITION(task_id));
	args[APPEND_TASK_ID] = Int64GetDatum(task_id);
	args[APPEND_FENCE] = Int64GetDatum(fence);
	args[APPEND_STREAM] = CStringGetTextDatum(stream);
	args[APPEND_CHUNK] = PointerGetDatum(chunk);
	nulls[APPEND_CHUNK] = chunk ? ' ' : 'n';
	args[APPEND_CLOSING] = BoolGetDatum(closing);
	args[APPEND_NOW] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	res = DurableRun(&DurableStreamAppendStatement, args, nulls, SPI_OK_SELECT, 0);
	DurableCheckFencedWrite(res, task_id, fence, APPENDED_QUEUE, APPENDED_RESTRICTED);
	seq = DurableGetInt64(res, 0, APPENDED_SEQ);
	if (DurableGetBool(res, 0, APPENDED_CLOSED) && !closing)
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("stream \"%s\" of task %lld is closed", stream,
					   (long long) task_id),
				errdetail("It ends at position %lld.", (long long) seq));
	snprintf(payload, sizeof(payload), INT64_FORMAT, task_id);
	Async_Notify(DURABLE_STREAM_CHANNEL, payload);
	return seq;
}

/*
 * DurableStreamAppend
 *		Append chunk to a stream of a task held under fence; returns its
 *		position.  55U01 for a stale fence or a task not running, 42501
 *		without the queue's work grant, 55000 for a closed stream.
 */
int64
DurableStreamAppend(int64 task_id, int64 fence, const char *stream, Jsonb *chunk)
{
	return append_or_close(task_id, fence, stream, chunk, false);
}

/*
 * DurableStreamClose
 *		Close a stream of a task held under fence, made empty if it does
 *		not exist; returns the position of its end.  A second close returns
 *		the same.
 */
int64
DurableStreamClose(int64 task_id, int64 fence, const char *stream)
{
	return append_or_close(task_id, fence, stream, NULL, true);
}

/* the chunks of a stream after a position */
enum
{
	CHUNK_SEQ,
	CHUNK_CHUNK,
	CHUNK_AT,
	CHUNK_NCOLUMNS
};

static const DurableColumn chunk_columns[CHUNK_NCOLUMNS] = {
	[CHUNK_SEQ] = {"seq", INT8OID},
	[CHUNK_CHUNK] = {"chunk", JSONBOID},
	[CHUNK_AT] = {"at", TIMESTAMPTZOID},
};

enum
{
	READ_PARTITION,
	READ_TASK_ID,
	READ_STREAM,
	READ_AFTER,
	READ_MAX,
	READ_NPARAMS
};

static const DurableParam stream_read_params[READ_NPARAMS] = {
	[READ_PARTITION] = {"partition", INT4OID},
	[READ_TASK_ID] = {"task_id", INT8OID},
	[READ_STREAM] = {"stream", TEXTOID},
	[READ_AFTER] = {"after", INT8OID},
	[READ_MAX] = {"max", INT4OID},
};

static DurableStatement stream_read = {
	.name = "stream_read",
	.sql = "SELECT seq, chunk, at FROM durable.stream_chunks"
	" WHERE partition_key = $partition AND task_id = $task_id"
	" AND stream = $stream AND seq > $after"
	" ORDER BY seq LIMIT $max",
	DURABLE_PARAMS(stream_read_params),
	DURABLE_COLUMNS(chunk_columns),
	.by_partition = true,
};

/* where a finished task's stream ends: its last position, and when */
enum
{
	END_LAST_SEQ,
	END_FINISHED_AT,
	END_NCOLUMNS
};

static const DurableColumn end_columns[END_NCOLUMNS] = {
	[END_LAST_SEQ] = {"last_seq", INT8OID},
	[END_FINISHED_AT] = {"finished_at", TIMESTAMPTZOID},
};

enum
{
	END_PARTITION,
	END_TASK_ID,
	END_STREAM,
	END_NPARAMS
};

static const DurableParam stream_end_params[END_NPARAMS] = {
	[END_PARTITION] = {"partition", INT4OID},
	[END_TASK_ID] = {"task_id", INT8OID},
	[END_STREAM] = {"stream", TEXTOID},
};

static DurableStatement stream_end = {
	.name = "stream_end",
	.sql = "SELECT s.last_seq, h.finished_at FROM durable.task_history h"
	" LEFT JOIN durable.streams s ON s.partition_key = h.partition_key"
	" AND s.task_id = h.task_id AND s.stream = $stream"
	" WHERE h.partition_key = $partition AND h.task_id = $task_id",
	DURABLE_PARAMS(stream_end_params),
	DURABLE_COLUMNS(end_columns),
	.by_partition = true,
};

/*
 * DurableStreamRead
 *		Put into store (of tupdesc) up to max chunks of a task's stream
 *		after a position, in order.  Once a reader has all there is of a
 *		stream that will not grow (its task finished without closing it),
 *		it is given the end a close would have written, one position on.
 *		42704 for an unknown task, 42501 for a role without the enqueue or
 *		the work grant of its queue, where it is restricted.
 */
void
DurableStreamRead(int64 task_id, const char *stream, int64 after, int32 max,
				  Tuplestorestate *store, TupleDesc tupdesc)
{
	DurableTask task;
	DurableResult res;
	Datum		args[READ_NPARAMS];
	bool		ended = false;

	/*
	 * The task is read first: if it has finished, every chunk of the
	 * stream was committed before, and the read of the chunks sees them.
	 */
	if (!DurableTaskFetch(task_id, false, &task))
		DurableReportUnknownTask(task_id);
	DurableCheckTaskReadable(task_id, task.queue, task.restricted);

	args[READ_PARTITION] = Int32GetDatum(task.partition);
	args[READ_TASK_ID] = Int64GetDatum(task_id);
	args[READ_STREAM] = CStringGetTextDatum(stream);
	args[READ_AFTER] = Int64GetDatum(after);
	args[READ_MAX] = Int32GetDatum(max);
	res = DurableRun(&stream_read, args, NULL, SPI_OK_SELECT, 0);
	for (uint64 row = 0; row < res.rows; row++)
	{
		tuplestore_puttuple(store, DurableGetRow(res, row));
		ended = DurableGetIsNull(res, row, CHUNK_CHUNK);
	}
	if (!ended && res.rows < (uint64) max && DurableTaskIsTerminal(task.state))
	{
		Datum		end_args[END_NPARAMS];
		DurableResult end;
		int64		last;
		Datum		values[CHUNK_NCOLUMNS];
		bool		isnull[CHUNK_NCOLUMNS] = {false, true, false};

		end_args[END_PARTITION] = args[READ_PARTITION];
		end_args[END_TASK_ID] = args[READ_TASK_ID];
		end_args[END_STREAM] = args[READ_STREAM];
		end = DurableRun(&stream_end, end_args, NULL, SPI_OK_SELECT, 1);
		/* none when a replay has just taken the task out of history */
		if (end.rows == 0)
			return;
		last = DurableGetIsNull(end, 0, END_LAST_SEQ) ? 0 :
			DurableGetInt64(end, 0, END_LAST_SEQ);
		if (last + 1 > after)
		{
			values[CHUNK_SEQ] = Int64GetDatum(last + 1);
			values[CHUNK_CHUNK] = (Datum) 0;
			values[CHUNK_AT] = DurableGetDatum(end, 0, END_FINISHED_AT, &isnull[CHUNK_AT]);
			tuplestore_putvalues(store, tupdesc, values, isnull);
		}
	}
}
