/*-------------------------------------------------------------------------
 *
 * nodes.c
 *	  The SQL function one node calls on another on Citus: a statement of
 *	  one partition, run on the node of its shards (store/delegate.c says
 *	  when and why, core/delegated.c which statements).  Not part of the
 *	  API: only durable's owner may call it.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "funcapi.h"
#include "utils/builtins.h"

/*
 * durable.execute_in_partition(partition int, statement text, args bytea[],
 *								expected int) RETURNS SETOF record
 *
 * Runs the named statement in partition with the values of args, each in
 * its type's binary send format, checks that SPI returned expected, and
 * returns the statement's rows, declared by the caller's column list.
 */
PG_FUNCTION_INFO_V1(durable_execute_in_partition);
Datum
durable_execute_in_partition(PG_FUNCTION_ARGS)
{
	int32		partition = PG_GETARG_INT32(0);
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	ArrayType  *sent = PG_GETARG_ARRAYTYPE_P(2);
	int32		expected = PG_GETARG_INT32(3);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	SPI_connect();
	DurableRunDelegated(name, partition, sent, expected, rsinfo->setResult,
						rsinfo->setDesc);
	SPI_finish();
	return (Datum) 0;
}

