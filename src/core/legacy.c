/*-------------------------------------------------------------------------
 *
 * legacy.c
 *	  The statements not yet declared by the modules that run them, by
 *	  number (transitional: each moves to its module).
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_type.h"
#include "core/sql.h"

typedef struct DurableStmtDef
{
	const char *name;
	const char *sql;
	int			nargs;
	Oid			argtypes[DURABLE_MAX_ARGS];
} DurableStmtDef;

typedef struct DurableSplitDef
{
	int			nsteps;
	DurableSplitStep steps[DURABLE_MAX_SPLIT_STEPS];
} DurableSplitDef;

static const DurableStmtDef durable_stmts[DURABLE_NUM_STMTS] = {
	/* on Citus: whether a partition has work to claim, and expired leases */







	[STMT_STEPS_UNSETTLED] = {
		"steps_unsettled",
		"SELECT step FROM durable.live_steps"
		" WHERE partition_key = $1 AND task_id = $2"
		" AND state IN ('started', 'unknown', 'failed')"
		" ORDER BY ordinal DESC",
		2, {INT4OID, INT8OID}
	},

	[STMT_CHILDREN_STATES] = {
		"children_states",
		"SELECT t.task_id, t.state::text, t.result, t.last_error"
		" FROM durable.tasks t"
		" WHERE t.partition_key = ANY ($2) AND t.task_id = ANY ($1)",
		2, {INT8ARRAYOID, INT4ARRAYOID}
	},

};

static const DurableSplitDef durable_splits[DURABLE_NUM_STMTS] = {
	/* each table on all its shards, joined on partition_key where needed */
};

static DurableStatement legacy_statements[DURABLE_NUM_STMTS];

uint64
DurableExecuteStmt(DurableStmt id, Datum *values, const char *nulls,
				   int expected, long tcount)
{
	DurableStatement *stmt = &legacy_statements[id];

	if (stmt->name == NULL)
	{
		const DurableStmtDef *def = &durable_stmts[id];

		if (def->sql == NULL)
			elog(ERROR, "durable statement %d has no definition", (int) id);
		stmt->name = def->name;
		stmt->sql = def->sql;
		stmt->nargs = def->nargs;
		memcpy(stmt->argtypes, def->argtypes, sizeof(def->argtypes));
		stmt->ncolumns = -1;
		stmt->nsplit = durable_splits[id].nsteps;
		memcpy(stmt->split, durable_splits[id].steps, sizeof(stmt->split));
	}
	return DurableExecute(stmt, values, nulls, expected, tcount);
}

Datum
DurableResultDatum(uint64 row, int col, bool *isnull)
{
	return DurableColumnDatum(row, col - 1, isnull);
}

int64
DurableResultInt64(uint64 row, int col)
{
	return DurableColumnInt64(row, col - 1);
}

char *
DurableResultText(uint64 row, int col)
{
	return DurableColumnText(row, col - 1);
}
