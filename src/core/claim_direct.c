/*-------------------------------------------------------------------------
 *
 * claim_direct.c
 *	  The usual claim, one task by a worker that does not say what it
 *	  runs, on one server or in a shard here on Citus: taken through the
 *	  table and index access methods (store/take.c), without the executor
 *	  of a statement.
 *
 * It takes the row DurableClaimOneStatement would take (claim.c), the
 * first of tasks_claimable's order among the partition's ready tasks of
 * the queue that are due, skipping locked rows, and changes it as
 * CLAIM_UPDATE does with $runs and $pins NULL.  The two must change
 * together: sql/direct_claim.sql checks every column a claim leaves
 * against the statement's expressions, evaluated on the row before.
 *
 * In a queue with rate limits the claim chooses (DurableClaimChoosing):
 * the first candidate, locked, is taken when it names no limit or its
 * limits have room, deferred when they have none (it becomes due when they
 * will, which claim.c's chooser decides), or passed over, still locked.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/fmgrprotos.h"
#include "utils/timestamp.h"

/* the columns of durable.live_tasks a claim reads, then those it writes */
enum
{
	TAKE_TASK_ID,
	TAKE_PAYLOAD,
	TAKE_CHECKPOINT,
	TAKE_RATE_LIMITS,
	TAKE_STATE,					/* the first one written */
	TAKE_OWNER,
	TAKE_LEASE,
	TAKE_LEASE_UNTIL,
	TAKE_HEARTBEAT_AT,
	TAKE_PROGRESS,
	TAKE_PROGRESS_AT,
	TAKE_FENCE,
	TAKE_ATTEMPT,
	TAKE_VERSION,
	TAKE_CLAIMED_AT,
	TAKE_CLAIM_SEQ,
	TAKE_CLAIM_KIND,
	TAKE_CLAIM_ROLE,
	TAKE_VERSIONS,
	TAKE_WORKFLOW_VERSION,
	TAKE_RATE_LIMITED_BY,
	TAKE_RUN_AT,				/* changed by a deferral only */
	TAKE_FAIR_PASS,
	TAKE_NCOLUMNS
};

static const DurableColumn take_columns[TAKE_NCOLUMNS] = {
	[TAKE_TASK_ID] = {"task_id", INT8OID},
	[TAKE_PAYLOAD] = {"payload", JSONBOID},
	[TAKE_CHECKPOINT] = {"checkpoint", JSONBOID},
	[TAKE_RATE_LIMITS] = {"rate_limits", JSONBOID},
	/* durable.task_state, an enum whose OID each installation chooses */
	[TAKE_STATE] = {"state", InvalidOid},
	[TAKE_OWNER] = {"owner", TEXTOID},
	[TAKE_LEASE] = {"lease", INTERVALOID},
	[TAKE_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID},
	[TAKE_HEARTBEAT_AT] = {"heartbeat_at", TIMESTAMPTZOID},
	[TAKE_PROGRESS] = {"progress", TEXTOID},
	[TAKE_PROGRESS_AT] = {"progress_at", TIMESTAMPTZOID},
	[TAKE_FENCE] = {"fence", INT8OID},
	[TAKE_ATTEMPT] = {"attempt", INT4OID},
	[TAKE_VERSION] = {"version", INT4OID},
	[TAKE_CLAIMED_AT] = {"claimed_at", TIMESTAMPTZOID},
	[TAKE_CLAIM_SEQ] = {"claim_seq", INT4OID},
	[TAKE_CLAIM_KIND] = {"claim_kind", TEXTOID},
	[TAKE_CLAIM_ROLE] = {"claim_role", TEXTOID},
	[TAKE_VERSIONS] = {"versions", JSONBOID},
	[TAKE_WORKFLOW_VERSION] = {"workflow_version", TEXTOID},
	[TAKE_RATE_LIMITED_BY] = {"rate_limited_by", TEXTOID},
	[TAKE_RUN_AT] = {"run_at", TIMESTAMPTZOID},
	[TAKE_FAIR_PASS] = {"fair_pass", FLOAT8OID},
};

/* durable_claim's columns, then run_at, as columns of claim_take */
static const int claimed_columns[DURABLE_CLAIMED_NCOLUMNS] = {
	[DURABLE_CLAIMED_TASK_ID] = TAKE_TASK_ID,
	[DURABLE_CLAIMED_FENCE] = TAKE_FENCE,
	[DURABLE_CLAIMED_LEASE_UNTIL] = TAKE_LEASE_UNTIL,
	[DURABLE_CLAIMED_ATTEMPT] = TAKE_ATTEMPT,
	[DURABLE_CLAIMED_PAYLOAD] = TAKE_PAYLOAD,
	[DURABLE_CLAIMED_CHECKPOINT] = TAKE_CHECKPOINT,
	[DURABLE_CLAIMED_VERSIONS] = TAKE_VERSIONS,
	[DURABLE_CLAIMED_RUN_AT] = TAKE_RUN_AT,
};

static DurableTake claim_take = {
	.table = {.schema = "durable", .name = "live_tasks", DURABLE_COLUMNS(take_columns)},
	.index = "tasks_claimable",
	.keys = {.nkeys = 2},		/* partition_key, queue_name */
	.nread = TAKE_STATE,
	.lockmode = LockTupleExclusive,
	.wait = LockWaitSkip,
};

/* a claim's values, and the task states as the table's enum has them */
typedef struct ClaimValues
{
	const DurableTake *take;	/* claim_take, or its copy for a shard */
	TimestampTz now;
	Datum		worker;
	Datum		lease;
	Datum		lease_until;
	Datum		role;
	Datum		claimed_kind;
	Datum		workflow_key;
	Datum		ready;
	Datum		waiting;
	Datum		running;
	const int64 *passed;		/* candidates to pass over */
	int			npassed;
	DurableClaimChooser choose;
	void	   *choose_arg;
	DurableChoice choice;
} ClaimValues;

/* ready, waiting and running as values of the state column's type */
static void
task_states(ClaimValues *claim)
{
	Oid			typid = claim->take->table.atttypids[TAKE_STATE];

	claim->ready = DurableTaskStateValue(typid, DURABLE_TASK_READY);
	claim->waiting = DurableTaskStateValue(typid, DURABLE_TASK_WAITING);
	claim->running = DurableTaskStateValue(typid, DURABLE_TASK_RUNNING);
}

/* a task ready and due */
static bool
due(const Datum *values, ClaimValues *claim)
{
	if (claim->ready == (Datum) 0)
		task_states(claim);
	return (values[TAKE_STATE] == claim->ready || values[TAKE_STATE] == claim->waiting) &&
		DatumGetTimestampTz(values[TAKE_RUN_AT]) <= claim->now;
}

/* READY_TO_CLAIM's conditions beyond the index's keys, with $runs NULL */
static bool
claimable(const Datum *values, const bool *isnull, void *arg)
{
	return due(values, arg) && isnull[TAKE_RATE_LIMITS];
}

/* a candidate of a claim that chooses: due, and not passed over */
static bool
candidate(const Datum *values, const bool *isnull, void *arg)
{
	ClaimValues *claim = arg;
	int64		task_id = DatumGetInt64(values[TAKE_TASK_ID]);

	for (int i = 0; i < claim->npassed; i++)
		if (claim->passed[i] == task_id)
			return false;
	return due(values, claim);
}


/* versions ->> 'workflow' */
static Datum
workflow_version(Datum versions, const ClaimValues *claim, bool *isnull)
{
	LOCAL_FCINFO(fcinfo, 2);
	Datum		result;

	InitFunctionCallInfoData(*fcinfo, NULL, 2, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = versions;
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].value = claim->workflow_key;
	fcinfo->args[1].isnull = false;
	result = jsonb_object_field_text(fcinfo);
	*isnull = fcinfo->isnull;
	return result;
}

/* CLAIM_UPDATE with $pins NULL: the versions stay, the kind is 'claimed' */
static void
take_task(Datum *values, bool *isnull, void *arg)
{
	ClaimValues *claim = arg;
	int32		version = DatumGetInt32(values[TAKE_VERSION]);

	values[TAKE_STATE] = claim->running;
	values[TAKE_OWNER] = claim->worker;
	values[TAKE_LEASE] = claim->lease;
	values[TAKE_LEASE_UNTIL] = claim->lease_until;
	values[TAKE_HEARTBEAT_AT] = TimestampTzGetDatum(claim->now);
	isnull[TAKE_PROGRESS] = true;
	values[TAKE_PROGRESS_AT] = TimestampTzGetDatum(claim->now);
	values[TAKE_FENCE] = Int64GetDatum(DatumGetInt64(values[TAKE_FENCE]) + 1);
	values[TAKE_ATTEMPT] = Int32GetDatum(DatumGetInt32(values[TAKE_ATTEMPT]) + 1);
	values[TAKE_VERSION] = Int32GetDatum(version + 1);
	values[TAKE_CLAIMED_AT] = TimestampTzGetDatum(claim->now);
	values[TAKE_CLAIM_SEQ] = Int32GetDatum(version + 1);
	values[TAKE_CLAIM_KIND] = claim->claimed_kind;
	values[TAKE_CLAIM_ROLE] = claim->role;
	isnull[TAKE_WORKFLOW_VERSION] = true;
	if (!isnull[TAKE_VERSIONS])
		values[TAKE_WORKFLOW_VERSION] = workflow_version(values[TAKE_VERSIONS], claim,
														 &isnull[TAKE_WORKFLOW_VERSION]);
	/* all it sets is a value, but progress and a missing workflow version */
	isnull[TAKE_STATE] = isnull[TAKE_OWNER] = isnull[TAKE_LEASE] = false;
	isnull[TAKE_LEASE_UNTIL] = isnull[TAKE_HEARTBEAT_AT] = false;
	isnull[TAKE_PROGRESS_AT] = isnull[TAKE_CLAIMED_AT] = isnull[TAKE_CLAIM_SEQ] = false;
	isnull[TAKE_CLAIM_KIND] = isnull[TAKE_CLAIM_ROLE] = false;
	isnull[TAKE_RATE_LIMITED_BY] = true;
}

/* a claim's values, as the statements' parameters give them */
static void
claim_values(ClaimValues *claim, const DurableTake *take, TimestampTz now,
			 Datum worker, Datum lease, Datum lease_until, Datum role)
{
	memset(claim, 0, sizeof(*claim));
	claim->take = take;
	claim->now = now;
	claim->worker = worker;
	claim->lease = lease;
	claim->lease_until = lease_until;
	claim->role = role;
	claim->claimed_kind = CStringGetTextDatum("claimed");
	claim->workflow_key = CStringGetTextDatum("workflow");
}

/* the columns of a task taken, as DurableClaimOneStatement returns them */
static void
claimed_row(const Datum *values, const bool *nulls, Datum *result, bool *isnull)
{
	for (int i = 0; i < DURABLE_CLAIMED_NCOLUMNS; i++)
	{
		result[i] = values[claimed_columns[i]];
		isnull[i] = nulls[claimed_columns[i]];
	}
}

/*
 * DurableClaimOneDirectly
 *		Claim one task of queue in partition with the values of a claim
 *		(args, as claim.c's statements take them), its columns as
 *		DurableClaimOneStatement returns them into result and isnull.
 *		DURABLE_DIRECT_BY_STATEMENT when the table must be written by the
 *		statement (store/take.c).
 */
DurableDirectResult
DurableClaimOneDirectly(int32 partition, Datum queue, TimestampTz now, Datum worker,
						Datum lease, Datum lease_until, Datum role,
						Datum *result, bool *isnull)
{
	ClaimValues claim;
	Datum		keys[2];
	Datum		values[TAKE_NCOLUMNS];
	bool		nulls[TAKE_NCOLUMNS];
	DurableDirectResult taken;
	DurableTake *take = DurableTakeInPartition(&claim_take, partition);

	if (take == NULL)
		return DURABLE_DIRECT_BY_STATEMENT;
	claim_values(&claim, take, now, worker, lease, lease_until, role);
	keys[0] = Int32GetDatum(partition);
	keys[1] = queue;
	taken = DurableTakeFirst(take, keys, claimable, take_task, &claim,
							 values, nulls);
	if (taken == DURABLE_DIRECT_DONE)
		claimed_row(values, nulls, result, isnull);
	return taken;
}

/*
 * The candidate, locked: taken when it names no rate limit or the chooser
 * takes it; deferred (due when the chooser says, waiting for its pass in
 * a fair queue, the limit named) or passed over as the chooser says.
 */
static bool
choose_and_take(Datum *values, bool *isnull, void *arg)
{
	ClaimValues *claim = arg;
	TimestampTz until;
	const char *limit;

	claim->choice = isnull[TAKE_RATE_LIMITS] ? DURABLE_CHOOSE_TAKE :
		claim->choose(DatumGetInt64(values[TAKE_TASK_ID]),
					  DatumGetJsonbP(values[TAKE_RATE_LIMITS]), claim->choose_arg,
					  &until, &limit);
	switch (claim->choice)
	{
		case DURABLE_CHOOSE_TAKE:
			take_task(values, isnull, arg);
			return true;
		case DURABLE_CHOOSE_DEFER:
			/* claim.c's claim_defer: UNADMITTED */
			values[TAKE_RUN_AT] = TimestampTzGetDatum(until);
			if (!isnull[TAKE_FAIR_PASS])
				values[TAKE_FAIR_PASS] = Float8GetDatum(get_float8_infinity());
			values[TAKE_RATE_LIMITED_BY] = CStringGetTextDatum(limit);
			isnull[TAKE_RATE_LIMITED_BY] = false;
			return true;
		case DURABLE_CHOOSE_PASS:
			break;
	}
	return false;
}

/*
 * DurableClaimChoosing
 *		In a queue whose tasks name rate limits, claim one task of queue in
 *		partition as DurableClaimOneDirectly does, but for those passed
 *		over (npassed of them), and with choose deciding of each candidate
 *		that names limits, while it holds it: *choice says what became of
 *		the candidate, *task_id which it was; a task taken goes into result
 *		and isnull.  DURABLE_DIRECT_NONE when no candidate is left.
 */
DurableDirectResult
DurableClaimChoosing(int32 partition, Datum queue, TimestampTz now, Datum worker,
					 Datum lease, Datum lease_until, Datum role, const int64 *passed,
					 int npassed, DurableClaimChooser choose, void *choose_arg,
					 int64 *task_id, DurableChoice *choice, Datum *result, bool *isnull)
{
	ClaimValues claim;
	Datum		keys[2];
	Datum		values[TAKE_NCOLUMNS];
	bool		nulls[TAKE_NCOLUMNS];
	DurableDirectResult done;
	DurableTake *take = DurableTakeInPartition(&claim_take, partition);

	if (take == NULL)
		return DURABLE_DIRECT_BY_STATEMENT;
	claim_values(&claim, take, now, worker, lease, lease_until, role);
	claim.passed = passed;
	claim.npassed = npassed;
	claim.choose = choose;
	claim.choose_arg = choose_arg;
	keys[0] = Int32GetDatum(partition);
	keys[1] = queue;
	done = DurableTakeFirstDeciding(take, keys, candidate, choose_and_take, &claim,
									values, nulls);
	if (done != DURABLE_DIRECT_DONE)
		return done;
	*task_id = DatumGetInt64(values[TAKE_TASK_ID]);
	*choice = claim.choice;
	if (claim.choice == DURABLE_CHOOSE_TAKE)
		claimed_row(values, nulls, result, isnull);
	return done;
}
