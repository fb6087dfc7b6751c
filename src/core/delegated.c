/*-------------------------------------------------------------------------
 *
 * delegated.c
 *	  The statements one node runs for another on Citus, and running one:
 *	  the other side of store/delegate.c.
 *
 * Only the statements listed here run for another node, each by the name
 * it carries, so that the call can run nothing else.  Each is of one
 * partition (by_partition) and is marked delegated where it is declared;
 * one without text (run_here) is C that runs on this node.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "utils/builtins.h"

static DurableStatement *const delegated_statements[] = {
	&DurableEnqueueStatement,
	&DurableClaimOneStatement,
	&DurableTransitionStatement,
	&DurableFinishStatement,
	&DurableStreamAppendStatement,
	&DurableClaimInNodeStatement,
};

/*
 * DurableRunDelegated
 *		Run the statement named name for another node, with the values of
 *		its parameters as delegate.c sends them (the first the partition,
 *		which must be partition), and put its rows into store, as desc
 *		declares them: the statement's columns.  The statement runs on this
 *		node and reaches no other (DurableRunHere).
 */
void
DurableRunDelegated(const char *name, int32 partition, ArrayType *sent,
					int expected, Tuplestorestate *store, TupleDesc desc)
{
	DurableStatement *stmt = NULL;
	Datum		values[DURABLE_MAX_ARGS];
	char		nulls[DURABLE_MAX_ARGS];
	DurableResult res;

	for (int i = 0; i < (int) lengthof(delegated_statements); i++)
		if (strcmp(delegated_statements[i]->name, name) == 0)
			stmt = delegated_statements[i];
	if (stmt == NULL)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("durable statement \"%s\" does not run for another node",
					   name));
	if (desc->natts != stmt->ncolumns)
		ereport(ERROR,
				errcode(ERRCODE_DATATYPE_MISMATCH),
				errmsg("statement \"%s\" returns %d columns, not %d",
					   name, stmt->ncolumns, desc->natts));
	for (int c = 0; c < desc->natts; c++)
		if (TupleDescAttr(desc, c)->atttypid != stmt->columns[c].type)
			ereport(ERROR,
					errcode(ERRCODE_DATATYPE_MISMATCH),
					errmsg("column %d of statement \"%s\" is of type %s",
						   c + 1, name, format_type_be(stmt->columns[c].type)));

	DurableResolveParameters(stmt);	/* its parameter types */
	DurableReceiveValues(stmt, sent, values, nulls);
	if (nulls[0] == 'n' || DatumGetInt32(values[0]) != partition)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("statement \"%s\" is of partition %d, not of its first value",
					   name, partition));
	if (stmt->run_here != NULL)
	{
		stmt->run_here(values, nulls, store, desc);
		return;
	}
	res = DurableRunHere(stmt, values, nulls, expected);
	for (uint64 row = 0; row < res.rows; row++)
		tuplestore_puttuple(store, res.tuptable->vals[row]);
}
