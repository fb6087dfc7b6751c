/*-------------------------------------------------------------------------
 *
 * claim_node.c
 *	  On Citus, the usual claim (one task, a worker that does not say what
 *	  it runs) of a queue's partitions on another node: one call there that
 *	  looks at all of them, instead of a read of each and a claim.
 *
 * A claim's walk (sharded.c) takes a node's partitions one after another.
 * From a node that does not hold them (the coordinator, or a worker once
 * its own partitions are empty) each read was a statement Citus sent and
 * the other node planned again from its text, and a task the read found
 * could be gone by the claim: under load a fifth of the coordinator's
 * claims then went on to another node and committed in two phases.  Here
 * the first other node's partitions go to it in one delegated call
 * (store/delegate.c), which claims in its shards as a claim there would
 * (claim_direct.c), in the walk's order, and says which of those without
 * work have expired leases, for the caller to reconcile as it would after
 * a read.  The call makes the node a writer of the transaction even where
 * it found nothing, so claim.c reads the nodes after it first, as before:
 * a claim commits in two phases only when the first node it asks has no
 * work and another has.
 *
 *-------------------------------------------------------------------------
 */
#include "core/claim.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

enum
{
	NODE_PARTITION,				/* the first of partitions */
	NODE_QUEUE,
	NODE_NOW,
	NODE_WORKER,
	NODE_LEASE,
	NODE_LEASE_UNTIL,
	NODE_ROLE,
	NODE_PARTITIONS,
	NODE_NPARAMS
};

static const DurableParam claim_in_node_params[NODE_NPARAMS] = {
	[NODE_PARTITION] = {"partition", INT4OID},
	[NODE_QUEUE] = {"queue", TEXTOID},
	[NODE_NOW] = {"now", TIMESTAMPTZOID},
	[NODE_WORKER] = {"worker", TEXTOID},
	[NODE_LEASE] = {"lease", INTERVALOID},
	[NODE_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID},
	[NODE_ROLE] = {"role", TEXTOID},
	[NODE_PARTITIONS] = {"partitions", INT4ARRAYOID},
};

/*
 * The task claimed (all null for none), then the partitions to reconcile
 * and those whose tables the claim's statement must write (take.c)
 */
#define NODE_EXPIRED DURABLE_CLAIMED_NCOLUMNS
#define NODE_BY_STATEMENT (DURABLE_CLAIMED_NCOLUMNS + 1)
#define NODE_NCOLUMNS (DURABLE_CLAIMED_NCOLUMNS + 2)

static const DurableColumn claim_in_node_columns[NODE_NCOLUMNS] = {
	DURABLE_CLAIMED_COLUMNS,
	[NODE_EXPIRED] = {"expired", INT4ARRAYOID},
	[NODE_BY_STATEMENT] = {"by_statement", INT4ARRAYOID},
};

static void claim_in_node_here(Datum *values, const char *nulls,
							   Tuplestorestate *store, TupleDesc desc);

DurableStatement DurableClaimInNodeStatement = {
	.name = "claim_in_node",
	DURABLE_PARAMS(claim_in_node_params),
	DURABLE_COLUMNS(claim_in_node_columns),
	.by_partition = true,
	.delegated = true,
	.run_here = claim_in_node_here,
};

/*
 * claim_in_node_here
 *		The call on the node: the first task of the listed partitions, in
 *		their order, those of the partitions looked at before it that have
 *		expired leases, and those the claim's statement must take from (the
 *		caller runs it, through Citus): where take.c declines the table, or
 *		where the shard moved away since the caller placed the partition.
 */
static void
claim_in_node_here(Datum *values, const char *nulls, Tuplestorestate *store,
				   TupleDesc desc)
{
	Datum	   *partitions;
	bool	   *partition_nulls;
	int			n;
	Datum		row[NODE_NCOLUMNS];
	bool		isnull[NODE_NCOLUMNS];
	Datum	   *expired;
	int			nexpired = 0;
	Datum	   *by_statement;
	int			nby_statement = 0;
	TimestampTz now;

	for (int i = 0; i < NODE_NPARAMS; i++)
		if (nulls[i] == 'n')
			ereport(ERROR,
					errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					errmsg("value %d of statement \"%s\" must not be null",
						   i + 1, DurableClaimInNodeStatement.name));
	deconstruct_array(DatumGetArrayTypeP(values[NODE_PARTITIONS]), INT4OID, sizeof(int32),
					  true, TYPALIGN_INT, &partitions, &partition_nulls, &n);
	if (n == 0 || partition_nulls[0] || partitions[0] != values[NODE_PARTITION])
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("the partitions of statement \"%s\" must begin with its partition",
					   DurableClaimInNodeStatement.name));
	now = DatumGetTimestampTz(values[NODE_NOW]);
	expired = palloc(sizeof(Datum) * n);
	by_statement = palloc(sizeof(Datum) * n);
	memset(isnull, true, sizeof(isnull));

	for (int k = 0; k < n; k++)
	{
		int32		partition = DatumGetInt32(partitions[k]);

		if (partition_nulls[k])
			continue;
		switch (DurableClaimOneDirectly(partition, values[NODE_QUEUE], now,
										values[NODE_WORKER], values[NODE_LEASE],
										values[NODE_LEASE_UNTIL], values[NODE_ROLE],
										row, isnull))
		{
			case DURABLE_DIRECT_DONE:
				k = n;
				continue;
			case DURABLE_DIRECT_BY_STATEMENT:
				by_statement[nby_statement++] = Int32GetDatum(partition);
				continue;
			case DURABLE_DIRECT_NONE:
				break;
		}
		if (DurableExpiredHere(Int32GetDatum(partition), values[NODE_NOW]))
			expired[nexpired++] = Int32GetDatum(partition);
	}
	isnull[NODE_EXPIRED] = nexpired == 0;
	if (nexpired > 0)
		row[NODE_EXPIRED] = PointerGetDatum(construct_array(expired, nexpired, INT4OID,
															sizeof(int32), true,
															TYPALIGN_INT));
	isnull[NODE_BY_STATEMENT] = nby_statement == 0;
	if (nby_statement > 0)
		row[NODE_BY_STATEMENT] = PointerGetDatum(construct_array(by_statement, nby_statement,
																 INT4OID, sizeof(int32),
																 true, TYPALIGN_INT));
	tuplestore_putvalues(store, desc, row, isnull);
}

/* the partitions of an int4[] the node returned, none for NULL */
static void
partitions_of(Datum array, bool isnull, int32 **partitions, int *n)
{
	Datum	   *elems;
	bool	   *elem_nulls;

	*n = 0;
	if (isnull)
		return;
	deconstruct_array(DatumGetArrayTypeP(array), INT4OID, sizeof(int32), true,
					  TYPALIGN_INT, &elems, &elem_nulls, n);
	*partitions = palloc(sizeof(int32) * *n);
	for (int k = 0; k < *n; k++)
		(*partitions)[k] = elem_nulls[k] ? 0 : DatumGetInt32(elems[k]);
}

/* a claim's call on a node: its values, and what it returned */
typedef struct NodeCall
{
	Datum	   *values;
	DurableResult res;
} NodeCall;

static uint64
call_node(void *arg)
{
	NodeCall   *call = (NodeCall *) arg;

	call->res = DurableRun(&DurableClaimInNodeStatement, call->values, NULL,
						   SPI_OK_SELECT, 0);
	return call->res.rows;
}

/*
 * DurableClaimInNodeReady
 *		Whether a claim may ask another node for a task in one call: where
 *		durable_enable_citus has made such calls delegated.
 */
bool
DurableClaimInNodeReady(void)
{
	return DurableDelegable(&DurableClaimInNodeStatement);
}

/*
 * DurableClaimInNode
 *		Claim one task, with a claim's values (args, as claim.c's statements
 *		take them), from the partitions of the claim's walk that are on the
 *		node of its i-th, another node, from the i-th on and not paused,
 *		in one call there; the task into store, as desc has it, and what
 *		else the node found into *found.  Returns the index of the walk's
 *		last partition on that node.  A node that is down is left out
 *		(sharded.c).
 */
int
DurableClaimInNode(const DurableQueue *settings, DurableNodeWalk *walk, int i,
				   const Datum *args, Tuplestorestate *store, TupleDesc desc,
				   DurableNodeClaim *found)
{
	int32		group = walk->places[i].group;
	Datum	   *partitions = palloc(sizeof(Datum) * settings->partitions);
	int			n = 0;
	int			last = i;
	Datum		values[NODE_NPARAMS];
	NodeCall	call = {.values = values};
	Datum		row[NODE_NCOLUMNS];
	bool		isnull[NODE_NCOLUMNS];

	memset(found, 0, sizeof(*found));
	for (; last < settings->partitions && walk->places[last].group == group; last++)
		if (!DurablePartitionPaused(settings, walk->partitions[last]))
			partitions[n++] = Int32GetDatum(walk->partitions[last]);
	last--;
	if (n == 0)
		return last;

	values[NODE_PARTITION] = partitions[0];
	values[NODE_QUEUE] = args[CLAIM_QUEUE];
	values[NODE_NOW] = args[CLAIM_NOW];
	values[NODE_WORKER] = args[CLAIM_WORKER];
	values[NODE_LEASE] = args[CLAIM_LEASE];
	values[NODE_LEASE_UNTIL] = args[CLAIM_LEASE_UNTIL];
	values[NODE_ROLE] = args[CLAIM_ROLE];
	values[NODE_PARTITIONS] = PointerGetDatum(construct_array(partitions, n, INT4OID,
															  sizeof(int32), true,
															  TYPALIGN_INT));
	if (!DurableOnWalkNode(walk, i, call_node, &call))
		return last;
	if (call.res.rows != 1)
		elog(ERROR, "statement \"%s\" returned " UINT64_FORMAT " rows, not one",
			 DurableClaimInNodeStatement.name, call.res.rows);
	found->asked = true;

	heap_deform_tuple(DurableGetRow(call.res, 0), call.res.tuptable->tupdesc, row, isnull);
	if (!isnull[DURABLE_CLAIMED_TASK_ID])
	{
		DurableObserve(TextDatumGetCString(args[CLAIM_QUEUE]), DURABLE_HIST_QUEUE_LATENCY,
					   DatumGetTimestampTz(args[CLAIM_NOW]) -
					   DatumGetTimestampTz(row[DURABLE_CLAIMED_RUN_AT]));
		tuplestore_putvalues(store, desc, row, isnull);
		found->claimed = 1;
	}
	partitions_of(row[NODE_EXPIRED], isnull[NODE_EXPIRED], &found->expired,
				  &found->nexpired);
	partitions_of(row[NODE_BY_STATEMENT], isnull[NODE_BY_STATEMENT],
				  &found->by_statement, &found->nby_statement);
	return last;
}
