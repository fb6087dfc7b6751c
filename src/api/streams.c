/*-------------------------------------------------------------------------
 *
 * streams.c
 *	  The streams of running tasks (README, "Streams"):
 *	  durable_stream_append, durable_stream_close and durable_stream_read.
 *
 * Each checks its arguments, connects to SPI and calls the core
 * (core/stream.c).
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "funcapi.h"

/*
 * durable_stream_append(task_id bigint, fence bigint, stream text,
 *						 chunk jsonb) RETURNS bigint
 *
 * The position of the chunk appended to the stream of a task held under
 * fence: 1, 2, ...  A chunk is limited as a payload is
 * (durable.max_payload_size).
 */
PG_FUNCTION_INFO_V1(durable_stream_append);
Datum
durable_stream_append(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	char	   *stream = DurableNameArg(fcinfo, 2, "stream name");
	Jsonb	   *chunk;
	int64		seq;

	DurableRequireArg(fcinfo, 3, "chunk");
	chunk = DurableJsonbArg(fcinfo, 3, "chunk");

	SPI_connect();
	seq = DurableStreamAppend(task_id, fence, stream, chunk);
	SPI_finish();
	PG_RETURN_INT64(seq);
}

/*
 * durable_stream_close(task_id bigint, fence bigint, stream text)
 *		RETURNS bigint
 *
 * The position of the end of the stream, closed now or before.
 */
PG_FUNCTION_INFO_V1(durable_stream_close);
Datum
durable_stream_close(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	int64		fence = DurableFenceArg(fcinfo, 1);
	char	   *stream = DurableNameArg(fcinfo, 2, "stream name");
	int64		seq;

	SPI_connect();
	seq = DurableStreamClose(task_id, fence, stream);
	SPI_finish();
	PG_RETURN_INT64(seq);
}

/*
 * durable_stream_read(task_id bigint, stream text, after bigint = 0,
 *					   max int = 1000)
 *		RETURNS TABLE(seq bigint, chunk jsonb, at timestamptz)
 *
 * Up to max chunks of the stream after position after, in order; a NULL
 * chunk is its end.
 */
PG_FUNCTION_INFO_V1(durable_stream_read);
Datum
durable_stream_read(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	char	   *stream = DurableNameArg(fcinfo, 1, "stream name");
	int64		after;
	int32		max;

	DurableRequireArg(fcinfo, 2, "after");
	after = PG_GETARG_INT64(2);
	if (after < 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("after must not be negative"),
				errdetail("The value given was %lld.", (long long) after));
	max = DurableIntArgAtLeast(fcinfo, 3, "max", 1);
	if (max > DURABLE_MAX_BATCH)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("max must be at most %d", DURABLE_MAX_BATCH),
				errdetail("The value given was %d.", max));

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	DurableStreamRead(task_id, stream, after, max, rsinfo->setResult,
					  rsinfo->setDesc);
	SPI_finish();
	return (Datum) 0;
}
