/*-------------------------------------------------------------------------
 *
 * plan.c
 *	  The plan cache: every statement durable runs, prepared once per
 *	  backend on its first use, checked against its declaration, kept, and
 *	  executed.  result.c reads the columns of its result.
 *
 * Statements name every relation and function with its schema, take values
 * only as $n parameters, and never call a volatile function inside an
 * UPDATE: the caller binds the transaction time.  They always run with
 * search_path = pg_catalog, pg_temp (the API functions pin it, the
 * reconciler sets it), so operators resolve to the built-in ones.  Plans
 * are kept for the life of the backend; the plan cache revalidates them
 * after DDL.
 *
 * Concurrency lives in the statements themselves: claims take rows with
 * FOR UPDATE SKIP LOCKED, fenced writes re-check fence and state in their
 * WHERE clause (so a write that waited for a lock sees the row as it is
 * after the other transaction), and idempotent inserts use ON CONFLICT.
 *
 * Citus runs a statement whose modifying CTEs feed one another as a chain
 * of intermediate results, shipped to every node and committed with two
 * phases, even when every row is on one shard.  On distributed tables a
 * statement with a split runs as its split instead: one statement per
 * table, each routed by its partition_key to the task's shard, so that a
 * call on a task of one node is a one-phase commit on that node.
 *
 * Citus prunes a statement whose partition_key is a parameter on every
 * call, and where the shard is on this node writes the shard's statement
 * out, parses and plans it every time (Citus 13 keeps that plan in a kept
 * plan, but never finds it there again, so such plans are made for one
 * call only: a kept one would grow by a plan per call).  A statement of
 * one partition (by_partition) is planned per partition instead: where
 * the partition's shards are on this node it names them and runs in them
 * as on one server (shard.c); elsewhere a delegated one runs on the
 * partition's node, as one call there (delegate.c), and any other, with
 * the key written into its text, Citus routes once, when it is planned.
 * A read of reference tables only (reads_reference) reads their shards on
 * this node.
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/plancache.h"

/* the statements with kept plans, to be freed when the installation changes */
static DurableStatement *prepared_statements = NULL;

/* whether the kept plans were prepared for distributed tables */
static bool prepared_distributed = false;

/*
 * Whether statements read what the caller's snapshot shows (SPI's
 * read_only), as the queries of a STABLE SQL function do, rather than
 * each in a snapshot of its own (DurableReadAsOfCaller).
 */
static bool read_as_of_caller = false;

/*
 * The kept plans of by_partition statements on Citus, one per statement,
 * step and partition; at most PARTITION_PLANS_MAX of them in a backend,
 * all forgotten when one more would be kept.
 */
#define PARTITION_PLANS_MAX 1024

typedef struct PartitionPlanKey
{
	const DurableStatement *stmt;
	int			step;			/* of its split, or -1 */
	int32		partition;
	int64		shard;			/* its shard here (shard.c), or 0: via Citus */
} PartitionPlanKey;

typedef struct PartitionPlanEntry
{
	PartitionPlanKey key;
	SPIPlanPtr	plan;
	bool		writes_shard;	/* writes the shard here */
} PartitionPlanEntry;

static HTAB *partition_plans = NULL;

/*
 * check_columns
 *		The columns of a statement's result, as planned, must be those its
 *		declaration names, in order, by name and type: the code that reads
 *		them reads them by the declaration's constants.
 */
static void
check_columns(const DurableStatement *stmt, SPIPlanPtr plan)
{
	List	   *sources = SPI_plan_get_plan_sources(plan);
	CachedPlanSource *source;
	TupleDesc	desc;
	int			natts;

	if (sources == NIL)
		elog(ERROR, "statement \"%s\" has no plan source", stmt->name);
	source = (CachedPlanSource *) llast(sources);
	desc = source->resultDesc;
	natts = desc ? desc->natts : 0;
	if (natts != stmt->ncolumns)
		elog(ERROR, "statement \"%s\" returns %d columns, but declares %d",
			 stmt->name, natts, stmt->ncolumns);
	for (int c = 0; c < natts; c++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, c);

		if (strcmp(NameStr(attr->attname), stmt->columns[c].name) != 0 ||
			attr->atttypid != stmt->columns[c].type)
			elog(ERROR, "column %d of statement \"%s\" is \"%s\" of type %u, but is declared \"%s\" of type %u",
				 c + 1, stmt->name, NameStr(attr->attname), attr->atttypid,
				 stmt->columns[c].name, stmt->columns[c].type);
	}
}

/* SPI_keepplan, or an ERROR naming what could not be kept */
static SPIPlanPtr
keep(SPIPlanPtr plan, const DurableStatement *stmt, int step)
{
	if (plan == NULL)
		elog(ERROR, "could not prepare %s\"%s\": %s",
			 step >= 0 ? "a step of " : "", stmt->name,
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "could not keep the plan of \"%s\"", stmt->name);
	return plan;
}

/* remember a statement with kept plans, once */
static void
remember(DurableStatement *stmt)
{
	DurableStatement *s;

	for (s = prepared_statements; s != NULL; s = s->next_prepared)
		if (s == stmt)
			return;
	stmt->next_prepared = prepared_statements;
	prepared_statements = stmt;
}

/*
 * prepare_kept
 *		Prepare the text of a statement or of step k of its split (-1 for
 *		the statement), check its result when it is the statement's, and
 *		keep the plan.
 */
static SPIPlanPtr
prepare_kept(DurableStatement *stmt, int k, const char *sql, int nargs,
			 Oid *argtypes, int options)
{
	SPIPlanPtr	plan = SPI_prepare_cursor(sql, nargs, argtypes, options);

	if (plan != NULL && (k < 0 || k == stmt->nsplit - 1))
		check_columns(stmt, plan);
	return keep(plan, stmt, k);
}

/*
 * statement_plan
 *		The kept plan of a statement, prepared and checked on its first use.
 *
 * Plan once: a custom plan per call would cost more than most of these
 * statements take to run.  The statements are written so that their
 * generic plans use the right indexes whatever the values.  Citus,
 * though, routes a statement to its shard by the values of its
 * parameters, and has no generic plan for most of them: on distributed
 * tables each call plans for its values, unless the statement is planned
 * per partition.
 */
static SPIPlanPtr
statement_plan(DurableStatement *stmt)
{
	if (stmt->plan != NULL)
		return stmt->plan;
	DurableCheckParameters(stmt, -1, stmt->nargs);
	stmt->plan = prepare_kept(stmt, -1, stmt->sql, stmt->nargs, stmt->argtypes,
							  prepared_distributed ? CURSOR_OPT_CUSTOM_PLAN :
							  CURSOR_OPT_GENERIC_PLAN);
	remember(stmt);
	return stmt->plan;
}

/*
 * step_text
 *		The text of step k of a statement's split, with "$*", the columns
 *		of its input, numbered after the statement's parameters; and the
 *		types of all its parameters into argtypes (DURABLE_MAX_SPLIT_ARGS of them).
 */
static char *
step_text(DurableStatement *stmt, int k, TupleDesc input, Oid *argtypes)
{
	const char *sql = stmt->split[k].sql;
	int			ninput = input ? input->natts : 0;
	StringInfoData buf;
	const char *star;

	if (stmt->nargs + ninput > DURABLE_MAX_SPLIT_ARGS)
		elog(ERROR, "step %d of \"%s\" has too many parameters", k, stmt->name);
	memcpy(argtypes, stmt->argtypes, sizeof(Oid) * stmt->nargs);
	for (int c = 0; c < ninput; c++)
		argtypes[stmt->nargs + c] = SPI_gettypeid(input, c + 1);
	DurableCheckParameters(stmt, k, stmt->nargs + ninput);

	initStringInfo(&buf);
	star = strstr(sql, "$*");
	if (star != NULL)
	{
		appendBinaryStringInfo(&buf, sql, star - sql);
		for (int c = 0; c < ninput; c++)
			appendStringInfo(&buf, "%s$%d", c > 0 ? ", " : "", stmt->nargs + c + 1);
		appendStringInfoString(&buf, star + 2);
	}
	else
		appendStringInfoString(&buf, sql);
	return buf.data;
}

/*
 * split_plan
 *		The kept plan of step k of a statement's split, prepared on its first
 *		use, when the columns of its input are known.  The last step's
 *		result is checked as the statement's would be.
 */
static SPIPlanPtr
split_plan(DurableStatement *stmt, int k, TupleDesc input)
{
	Oid			argtypes[DURABLE_MAX_SPLIT_ARGS];
	char	   *sql;

	if (stmt->split_plans[k] != NULL)
		return stmt->split_plans[k];
	sql = step_text(stmt, k, input, argtypes);
	stmt->split_plans[k] = prepare_kept(stmt, k, sql,
										stmt->nargs + (input ? input->natts : 0),
										argtypes, CURSOR_OPT_CUSTOM_PLAN);
	remember(stmt);
	pfree(sql);
	return stmt->split_plans[k];
}

/* a statement's text with the partition written for each "$1" */
static char *
with_partition(const char *sql, int32 partition)
{
	StringInfoData buf;
	DurableSqlScan scan = {sql, '\0'};
	const char *copied = sql;
	const char *dollar;

	if (partition < 0)
		elog(ERROR, "partition %d is out of range", partition);
	initStringInfo(&buf);
	while ((dollar = DurableNextDollar(&scan)) != NULL)
	{
		if (dollar[1] != '1' || isdigit((unsigned char) dollar[2]))
			continue;
		appendBinaryStringInfo(&buf, copied, dollar - copied);
		appendStringInfo(&buf, "%d", partition);
		copied = scan.p = dollar + 2;
	}
	appendStringInfoString(&buf, copied);
	return buf.data;
}

/* free the kept plans of by_partition statements */
static void
forget_partition_plans(void)
{
	HASH_SEQ_STATUS status;
	PartitionPlanEntry *entry;

	if (partition_plans == NULL)
		return;
	hash_seq_init(&status, partition_plans);
	while ((entry = hash_seq_search(&status)) != NULL)
		SPI_freeplan(entry->plan);
	hash_destroy(partition_plans);
	partition_plans = NULL;
}

/*
 * partition_plan
 *		The kept plan of a by_partition statement (k = -1), or of step k of
 *		its split, for one partition, prepared on its first use there; shard
 *		is the partition's shard here (DurableEnterLocalShard), or 0.
 *
 * Where the partition's shards are on this node the plan names them and
 * runs as on one server (shard.c).  Elsewhere the plan is generic, with the
 * partition in its text, and Citus routes it once; but an INSERT Citus
 * prunes on every call whatever its plan, and would keep a plan per call
 * in a kept one: it is planned per call.
 */
static SPIPlanPtr
partition_plan(DurableStatement *stmt, int k, int32 partition, int64 shard,
			   TupleDesc input)
{
	PartitionPlanKey key;
	PartitionPlanEntry *entry;
	Oid			argtypes[DURABLE_MAX_SPLIT_ARGS];
	const char *source_text = k < 0 ? stmt->sql : stmt->split[k].sql;
	char	   *text;
	char	   *sql;
	SPIPlanPtr	plan;

	if (shard == 0 && pg_strncasecmp(source_text, "INSERT", 6) == 0)
		return k < 0 ? statement_plan(stmt) : split_plan(stmt, k, input);

	memset(&key, 0, sizeof(key));
	key.stmt = stmt;
	key.step = k;
	key.partition = partition;
	key.shard = shard;
	if (partition_plans != NULL &&
		(entry = hash_search(partition_plans, &key, HASH_FIND, NULL)) != NULL)
	{
		if (entry->writes_shard)
			DurableLocalShardWrote();
		return entry->plan;
	}

	if (k < 0)
	{
		DurableCheckParameters(stmt, -1, stmt->nargs);
		memcpy(argtypes, stmt->argtypes, sizeof(Oid) * stmt->nargs);
		text = pstrdup(stmt->sql);
	}
	else
		text = step_text(stmt, k, input, argtypes);
	sql = shard != 0 ? DurableLocalShardText(text, partition) :
		with_partition(text, partition);
	plan = prepare_kept(stmt, k, sql,
						stmt->nargs + (k >= 0 && input ? input->natts : 0),
						argtypes, CURSOR_OPT_GENERIC_PLAN);
	pfree(text);
	pfree(sql);

	if (partition_plans != NULL &&
		hash_get_num_entries(partition_plans) >= PARTITION_PLANS_MAX)
		forget_partition_plans();
	if (partition_plans == NULL)
	{
		HASHCTL		ctl = {0};

		ctl.keysize = sizeof(PartitionPlanKey);
		ctl.entrysize = sizeof(PartitionPlanEntry);
		ctl.hcxt = TopMemoryContext;
		partition_plans = hash_create("durable partition plans", 256, &ctl,
									  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(partition_plans, &key, HASH_ENTER, NULL);
	entry->plan = plan;
	entry->writes_shard = shard != 0 &&
		DurableLocalPlanWrites(stmt->name, plan, partition);
	if (entry->writes_shard)
		DurableLocalShardWrote();
	return plan;
}

/*
 * run_plan
 *		SPI_execute_plan under the settings durable's statements run under
 *		(pinned.c), which plan those of one partition (by_index) by their
 *		indexes.
 */
static int
run_plan(SPIPlanPtr plan, Datum *values, const char *nulls, long tcount,
		 bool by_index)
{
	int			nest = DurablePinStatementSettings(prepared_distributed, by_index);
	int			rc;

	rc = SPI_execute_plan(plan, values, nulls, read_as_of_caller, tcount);
	DurableUnpinStatementSettings(nest);
	return rc;
}

/*
 * reference_plan
 *		The kept plan of a reads_reference statement on Citus, reading the
 *		shards here of the reference tables it names.
 */
static SPIPlanPtr
reference_plan(DurableStatement *stmt)
{
	char	   *sql;

	if (stmt->local_plan != NULL)
		return stmt->local_plan;
	DurableCheckParameters(stmt, -1, stmt->nargs);
	sql = DurableLocalShardText(stmt->sql, DURABLE_REFERENCE_PARTITION);
	stmt->local_plan = prepare_kept(stmt, -1, sql, stmt->nargs, stmt->argtypes,
									CURSOR_OPT_GENERIC_PLAN);
	if (DurableLocalPlanWrites(stmt->name, stmt->local_plan,
							   DURABLE_REFERENCE_PARTITION))
		elog(ERROR, "statement \"%s\" reads reference tables only, but writes",
			 stmt->name);
	remember(stmt);
	pfree(sql);
	return stmt->local_plan;
}

/* DurableRun for a statement that runs as its split */
static uint64
execute_split(DurableStatement *stmt, Datum *values, const char *nulls,
			  int expected)
{
	SPITupleTable *results[DURABLE_MAX_SPLIT_STEPS] = {0};
	uint64		last_rows[DURABLE_MAX_SPLIT_STEPS] = {0};
	Datum		args[DURABLE_MAX_SPLIT_ARGS];
	char		argnulls[DURABLE_MAX_SPLIT_ARGS];
	int			rc = SPI_OK_SELECT;

	memcpy(args, values, sizeof(Datum) * stmt->nargs);
	for (int i = 0; i < stmt->nargs; i++)
		argnulls[i] = nulls ? nulls[i] : ' ';

	for (int k = 0; k < stmt->nsplit; k++)
	{
		const DurableSplitStep *step = &stmt->split[k];
		SPITupleTable *input = step->input == DURABLE_SPLIT_NO_INPUT ? NULL : results[step->input];
		uint64		rows = input ? last_rows[step->input] : 1;
		TupleDesc	input_desc = input ? input->tupdesc : NULL;
		SPIPlanPtr	plan = step->by_partition ?
			partition_plan(stmt, k, DatumGetInt32(values[0]),
						   DurableEnterLocalShard(DatumGetInt32(values[0])),
						   input_desc) :
			split_plan(stmt, k, input_desc);
		uint64		found = 0;

		for (uint64 r = 0; r < rows; r++)
		{
			for (int c = 0; input && c < input->tupdesc->natts; c++)
			{
				bool		isnull;

				args[stmt->nargs + c] = SPI_getbinval(input->vals[r], input->tupdesc,
													  c + 1, &isnull);
				argnulls[stmt->nargs + c] = isnull ? 'n' : ' ';
			}
			rc = run_plan(plan, args, argnulls, 0, stmt->by_partition);
			if (rc < 0)
				elog(ERROR, "step %d of \"%s\" failed: %s",
					 k, stmt->name, SPI_result_code_string(rc));
			found += SPI_processed;
			results[k] = SPI_tuptable;
			last_rows[k] = SPI_processed;
		}
		if (step->required && found == 0)
			return 0;
	}
	if (rc != expected)
		elog(ERROR, "unexpected SPI result for \"%s\": %s",
			 stmt->name, SPI_result_code_string(rc));
	return last_rows[stmt->nsplit - 1];
}

/*
 * forget_plans
 *		Free every kept plan, to be prepared again on its next use: durable's
 *		tables were distributed (or no longer are), which changes how
 *		statements are prepared and run.
 */
static void
forget_plans(void)
{
	DurableStatement *stmt = prepared_statements;

	while (stmt != NULL)
	{
		DurableStatement *next = stmt->next_prepared;

		if (stmt->plan != NULL)
			SPI_freeplan(stmt->plan);
		stmt->plan = NULL;
		if (stmt->local_plan != NULL)
			SPI_freeplan(stmt->local_plan);
		stmt->local_plan = NULL;
		if (stmt->delegated_plan != NULL)
			SPI_freeplan(stmt->delegated_plan);
		stmt->delegated_plan = NULL;
		for (int k = 0; k < DURABLE_MAX_SPLIT_STEPS; k++)
		{
			if (stmt->split_plans[k] != NULL)
				SPI_freeplan(stmt->split_plans[k]);
			stmt->split_plans[k] = NULL;
		}
		stmt->next_prepared = NULL;
		stmt = next;
	}
	prepared_statements = NULL;
	forget_partition_plans();
	DurableDelegationForget();
}

/*
 * execute_delegated
 *		Run a by_partition statement on the node of its partition's shards,
 *		as one call there (delegate.c), its result as the statement's.
 */
static uint64
execute_delegated(DurableStatement *stmt, Datum *values, const char *nulls,
				  int expected)
{
	Oid			argtypes[4] = {INT4OID, TEXTOID, BYTEAARRAYOID, INT4OID};
	Datum		args[4];
	int			rc;

	if (stmt->delegated_plan == NULL)
	{
		char	   *sql = DurableDelegatedCall(stmt);

		stmt->delegated_plan = prepare_kept(stmt, -1, sql, 4, argtypes, 0);
		remember(stmt);
		pfree(sql);
	}
	args[0] = values[0];
	args[1] = CStringGetTextDatum(stmt->name);
	args[2] = DurableDelegatedValues(stmt, values, nulls);
	args[3] = Int32GetDatum(expected);
	rc = run_plan(stmt->delegated_plan, args, NULL, 0, false);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "unexpected SPI result for \"%s\" on its partition's node: %s",
			 stmt->name, SPI_result_code_string(rc));
	return SPI_processed;
}

/* DurableRun; elsewhere says whether it may run on another node */
static uint64
execute(DurableStatement *stmt, Datum *values, const char *nulls,
		int expected, long tcount, bool elsewhere)
{
	int			rc;
	bool		distributed = DurableDistributed();
	SPIPlanPtr	plan;

	if (distributed != prepared_distributed)
	{
		forget_plans();
		prepared_distributed = distributed;
	}
	DurableResolveParameters(stmt);
	DurableCheckTables(stmt);
	if (distributed && stmt->by_partition)
	{
		int32		partition = DatumGetInt32(values[0]);
		int64		shard = DurableEnterLocalShard(partition);

		if (shard == 0 && elsewhere && tcount == 0 && DurableDelegable(stmt))
			return execute_delegated(stmt, values, nulls, expected);
		if (stmt->sql == NULL)
			elog(ERROR, "statement \"%s\" runs only as a call on its partition's node",
				 stmt->name);
		/* in a shard here a statement runs whole, as on one server */
		if (shard == 0 && stmt->nsplit > 0)
			return execute_split(stmt, values, nulls, expected);
		plan = partition_plan(stmt, -1, partition, shard, NULL);
	}
	else if (distributed && stmt->nsplit > 0)
		return execute_split(stmt, values, nulls, expected);
	else if (distributed && stmt->reads_reference && DurableEnterLocalReference())
		plan = reference_plan(stmt);
	else
		plan = statement_plan(stmt);
	rc = run_plan(plan, values, nulls, tcount, stmt->by_partition);
	if (rc != expected)
		elog(ERROR, "unexpected SPI result for \"%s\": %s",
			 stmt->name, SPI_result_code_string(rc));
	return SPI_processed;
}

/*
 * DurableRun
 *		Run a statement with the given parameters and check that SPI
 *		returned what the caller expects.  nulls follows SPI's convention
 *		(' ' not null, 'n' null) and may be NULL when no value is null.
 *		Returns its result.  On distributed tables a statement of one
 *		partition whose shards are not here runs on their node when it is
 *		delegated, else as its split if it has one, unless its shards are
 *		here; any other statement with a split runs as its split.
 */
DurableResult
DurableRun(DurableStatement *stmt, Datum *values, const char *nulls,
		   int expected, long tcount)
{
	DurableResult res;

	res.stmt = stmt;
	res.rows = execute(stmt, values, nulls, expected, tcount, true);

	/*
	 * A change of its tables committed while the statement waited for
	 * their locks reaches the backend once it has them, after the check
	 * before it (in execute): check them again, cheaply unless they
	 * changed, so that the caller's transaction rolls back what the
	 * statement wrote under the old shape.
	 */
	DurableCheckTables(stmt);
	res.tuptable = SPI_tuptable;
	return res;
}

/*
 * DurableReadAsOfCaller
 *		Make the statements run from now on read what the caller's snapshot
 *		shows (on) or each take a snapshot of its own (off, as before);
 *		returns the mode it replaces, for the caller to restore.  A STABLE
 *		function whose reads must agree with those of the query that calls
 *		it reads as of its caller: in READ COMMITTED a snapshot of its own
 *		could see a row a transaction committed since the query began.
 *		A statement that writes or locks then fails, as in a STABLE SQL
 *		function.
 */
bool
DurableReadAsOfCaller(bool on)
{
	bool		was = read_as_of_caller;

	read_as_of_caller = on;
	return was;
}

/* whether statements read as of the caller's snapshot (above) */
bool
DurableReadingAsOfCaller(void)
{
	return read_as_of_caller;
}

/*
 * DurableRunHere
 *		DurableRun for a statement another node sent (delegate.c): it runs
 *		from this node, never sent on again.
 */
DurableResult
DurableRunHere(DurableStatement *stmt, Datum *values, const char *nulls,
			   int expected)
{
	DurableResult res;

	res.stmt = stmt;
	res.rows = execute(stmt, values, nulls, expected, 0, false);
	DurableCheckTables(stmt);	/* as DurableRun does */
	res.tuptable = SPI_tuptable;
	return res;
}
