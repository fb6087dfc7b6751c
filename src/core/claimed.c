/*-------------------------------------------------------------------------
 *
 * claimed.c
 *	  What a claim of ready tasks returns: the columns of durable_claim's
 *	  result, and the rows a claim took into the caller's tuplestore.
 *
 *-------------------------------------------------------------------------
 */
#include "core/claim.h"

#include "catalog/pg_type.h"
#include "utils/timestamp.h"

/* the columns of durable_claim's result (core.h), then run_at */
const DurableColumn DurableClaimedColumns[DURABLE_CLAIMED_NCOLUMNS] = {
	DURABLE_CLAIMED_COLUMNS
};

/*
 * DurableClaimPut
 *		The tasks a claim took (rows of DurableClaimedColumns) into store,
 *		as desc has them (without run_at), each one's wait observed.
 */
void
DurableClaimPut(DurableResult res, const char *queue, TimestampTz now,
				Tuplestorestate *store, TupleDesc desc)
{
	for (uint64 row = 0; row < res.rows; row++)
	{
		Datum		values[DURABLE_CLAIMED_NCOLUMNS];
		bool		isnull[DURABLE_CLAIMED_NCOLUMNS];

		heap_deform_tuple(DurableGetRow(res, row), res.tuptable->tupdesc,
						  values, isnull);
		DurableObserve(queue, DURABLE_HIST_QUEUE_LATENCY,
					   now - DatumGetTimestampTz(values[DURABLE_CLAIMED_RUN_AT]));
		tuplestore_putvalues(store, desc, values, isnull);
	}
}
