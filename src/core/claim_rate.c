/*-------------------------------------------------------------------------
 *
 * claim_rate.c
 *	  The claim in a queue whose tasks name rate limits: each candidate's
 *	  units taken, or the candidate deferred or passed over, in the claim.
 *
 * Such a claim chooses (rate_buckets.c decides a candidate's limits): a
 * candidate whose limits have room is claimed; one whose limits have none
 * is deferred, due when its units will fit, with the limit that holds it
 * back named in its row and in an event, its pass in a fair queue taken
 * until it is due again, so that being not due it is never among the next
 * candidates; one a bucket of which another claim holds is passed over,
 * left ready for a later claim.  On one server the claim of one task
 * decides each candidate under its lock and writes it once, through the
 * access methods (claim_direct.c's DurableClaimChoosing); otherwise
 * statements lock the candidates in claim order with the units they take
 * and claim by id those chosen, again while the claim wants more and
 * deferred or passed over some (each round leaves fewer candidates).
 *
 *-------------------------------------------------------------------------
 */
#include "core/claim.h"

#include "catalog/pg_type.h"
#include "core/row.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* the candidates, with the limits they name */
enum
{
	CANDIDATE_TASK_ID,
	CANDIDATE_RATE_LIMITS,
	CANDIDATE_NCOLUMNS
};

static const DurableColumn candidate_columns[CANDIDATE_NCOLUMNS] = {
	[CANDIDATE_TASK_ID] = {"task_id", INT8OID},
	[CANDIDATE_RATE_LIMITS] = {"rate_limits", JSONBOID},
};

/* a claim's parameters that its candidates' statements read */
enum
{
	CANDIDATES_PARTITION,
	CANDIDATES_QUEUE,
	CANDIDATES_NOW,
	CANDIDATES_BATCH,
	CANDIDATES_RUNS,
	CANDIDATES_PASSED,
	CANDIDATES_PARTITIONS,
	CANDIDATES_CONCURRENCY_LIMIT,
	CANDIDATES_HELD,
	CANDIDATES_NPARAMS
};
#define CANDIDATES_PARAMS \
	[CANDIDATES_PARTITION] = {"partition", INT4OID}, \
	[CANDIDATES_QUEUE] = {"queue", TEXTOID}, \
	[CANDIDATES_NOW] = {"now", TIMESTAMPTZOID}, \
	[CANDIDATES_BATCH] = {"batch", INT4OID}, \
	[CANDIDATES_RUNS] = {"runs", JSONBOID}, \
	[CANDIDATES_PASSED] = {"passed", INT8ARRAYOID}
static const DurableParam candidates_params[CANDIDATES_PARTITIONS] = {
	CANDIDATES_PARAMS,
};
static const DurableParam candidates_limited_params[CANDIDATES_NPARAMS] = {
	CANDIDATES_PARAMS,
	[CANDIDATES_PARTITIONS] = {"partitions", INT4ARRAYOID},
	[CANDIDATES_CONCURRENCY_LIMIT] = {"concurrency_limit", INT4OID},
	[CANDIDATES_HELD] = {"held", TEXTARRAYOID},
};

/* but for those another claim holds a bucket of, passed over */
#define PASSED_OVER "   AND task_id <> ALL ($passed)"

static DurableStatement claim_candidates = {
	.name = "claim_candidates",
	.sql = READY("task_id, rate_limits", PASSED_OVER),
	DURABLE_PARAMS(candidates_params),
	DURABLE_COLUMNS(candidate_columns),
};

#define LIMITED_CANDIDATES(where) \
	"SELECT task_id, rate_limits" \
	LIMITED_READY(where, "concurrency_key = ANY ($held) AND", PASSED_OVER) \
	" FOR UPDATE SKIP LOCKED"

static DurableStatement claim_candidates_limited = {
	.name = "claim_candidates_limited",
	.sql = LIMITED_CANDIDATES(KEY_IN_QUEUE),
	DURABLE_PARAMS(candidates_limited_params),
	DURABLE_COLUMNS(candidate_columns),
};

static DurableStatement claim_candidates_limited_here = {
	.name = "claim_candidates_limited_here",
	.sql = LIMITED_CANDIDATES(KEY_IN_PARTITION),
	DURABLE_PARAMS(candidates_limited_params),
	DURABLE_COLUMNS(candidate_columns),
};

/* a claim's parameters that CLAIM_UPDATE reads, and the tasks chosen */
enum
{
	CHOSEN_PARTITION,
	CHOSEN_NOW,
	CHOSEN_WORKER,
	CHOSEN_LEASE,
	CHOSEN_LEASE_UNTIL,
	CHOSEN_ROLE,
	CHOSEN_PINS,
	CHOSEN_IDS,
	CHOSEN_NPARAMS
};
static const DurableParam chosen_params[CHOSEN_NPARAMS] = {
	[CHOSEN_PARTITION] = {"partition", INT4OID},
	[CHOSEN_NOW] = {"now", TIMESTAMPTZOID},
	[CHOSEN_WORKER] = {"worker", TEXTOID},
	[CHOSEN_LEASE] = {"lease", INTERVALOID},
	[CHOSEN_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID},
	[CHOSEN_ROLE] = {"role", TEXTOID},
	[CHOSEN_PINS] = {"pins", JSONBOID},
	[CHOSEN_IDS] = {"ids", INT8ARRAYOID},
};

static DurableStatement claim_chosen = {
	.name = "claim_chosen",
	.sql = "WITH u AS (" CLAIM_UPDATE
	"  WHERE t.partition_key = $partition AND t.task_id = ANY ($ids)"
	"  RETURNING t.partition_key, t.task_id, t.fence, t.lease_until,"
	"  t.attempt, t.payload, t.checkpoint, t.versions, t.version, t.priority,"
	"  t.fair_pass, t.run_at)"
	" SELECT task_id, fence, lease_until, attempt, payload, checkpoint,"
	" versions, run_at FROM u ORDER BY " DURABLE_CLAIM_ORDER,
	DURABLE_PARAMS(chosen_params),
	DURABLE_COLUMNS(DurableClaimedColumns),
};

enum
{
	DEFER_PARTITION,
	DEFER_TASK_ID,
	DEFER_UNTIL,
	DEFER_LIMIT,
	DEFER_NPARAMS
};

static const DurableParam defer_params[DEFER_NPARAMS] = {
	[DEFER_PARTITION] = {"partition", INT4OID},
	[DEFER_TASK_ID] = {"task_id", INT8OID},
	[DEFER_UNTIL] = {"until", TIMESTAMPTZOID},
	[DEFER_LIMIT] = {"limit", TEXTOID},
};

static DurableStatement claim_defer = {
	.name = "claim_defer",
	.sql = "UPDATE durable.live_tasks SET run_at = $until,"
	" fair_pass = " UNADMITTED("fair_pass") ", rate_limited_by = $limit"
	" WHERE partition_key = $partition AND task_id = $task_id",
	DURABLE_PARAMS(defer_params),
};

/* the event of a candidate deferred for want of room in a limit */
static void
deferred_event(int32 partition, int64 task_id, const DurableRateDeferral *deferral,
			   const char *worker, TimestampTz now)
{
	DurableTask task = {.partition = partition,.task_id = task_id};
	DurableDetail detail;

	DurableDetailInit(&detail);
	DurableDetailText(&detail, "limit", deferral->limit);
	DurableDetailInt(&detail, "units", deferral->units);
	DurableDetailTime(&detail, "until", deferral->until);
	(void) DurableAppendEvent(&task, now, "rate_limited", worker,
							  DurableDetailFinish(&detail), NULL, 0);
}

/* a candidate whose limits have no room, due when they will */
static void
defer_task(int32 partition, int64 task_id, const DurableRateDeferral *deferral,
		   const char *worker, TimestampTz now)
{
	Datum		args[DEFER_NPARAMS];

	args[DEFER_PARTITION] = Int32GetDatum(partition);
	args[DEFER_TASK_ID] = Int64GetDatum(task_id);
	args[DEFER_UNTIL] = TimestampTzGetDatum(deferral->until);
	args[DEFER_LIMIT] = CStringGetTextDatum(deferral->limit);
	(void) DurableRun(&claim_defer, args, NULL, SPI_OK_UPDATE, 0);
	deferred_event(partition, task_id, deferral, worker, now);
}

/* the chooser of a claim on one server (DurableClaimChoosing) */
typedef struct RateChooser
{
	int32		partition;
	TimestampTz now;
	MemoryContext caller;		/* where the deferral's limit is kept */
	DurableRateDeferral deferral;
} RateChooser;

static DurableChoice
choose_by_rate_limits(int64 task_id, Jsonb *rate_limits, void *arg, TimestampTz *until,
					  const char **limit)
{
	RateChooser *chooser = arg;

	switch (DurableRateLimitsTake(chooser->partition, rate_limits, chooser->now,
								  &chooser->deferral))
	{
		case DURABLE_RATE_TAKEN:
			return DURABLE_CHOOSE_TAKE;
		case DURABLE_RATE_DEFERRED:
			chooser->deferral.limit = MemoryContextStrdup(chooser->caller,
														  chooser->deferral.limit);
			*until = chooser->deferral.until;
			*limit = chooser->deferral.limit;
			return DURABLE_CHOOSE_DEFER;
		case DURABLE_RATE_BUSY:
			break;
	}
	return DURABLE_CHOOSE_PASS;
}

/*
 * The same for one task on one server, through the access methods
 * (claim_direct.c): the first candidate locked, its limits taken and the
 * task claimed at once; a candidate deferred is no longer due, one left
 * for the claim that holds one of its buckets is passed over, and the
 * claim goes on to the next.  Returns false when the table must be read
 * by statement, having done nothing.
 */
static bool
claim_rate_limited_directly(const Datum *args, const char *queue, const char *worker,
							TimestampTz now, Tuplestorestate *store, TupleDesc desc,
							int *claimed)
{
	RateChooser chooser = {.partition = DatumGetInt32(args[CLAIM_PARTITION]),.now = now,
	.caller = CurrentMemoryContext};
	int64	   *passed = NULL;
	int			npassed = 0;
	int			ndeferred = 0;

	*claimed = 0;
	for (;;)
	{
		int64		task_id;
		DurableChoice choice;
		Datum		values[DURABLE_CLAIMED_NCOLUMNS];
		bool		isnull[DURABLE_CLAIMED_NCOLUMNS];

		switch (DurableClaimChoosing(chooser.partition, args[CLAIM_QUEUE], now,
									 args[CLAIM_WORKER], args[CLAIM_LEASE],
									 args[CLAIM_LEASE_UNTIL], args[CLAIM_ROLE], passed,
									 npassed, choose_by_rate_limits, &chooser, &task_id,
									 &choice, values, isnull))
		{
			case DURABLE_DIRECT_BY_STATEMENT:
				return false;
			case DURABLE_DIRECT_NONE:
				DurableCount(queue, DURABLE_COUNT_RATE_LIMITED, ndeferred);
				return true;
			case DURABLE_DIRECT_DONE:
				break;
		}
		switch (choice)
		{
			case DURABLE_CHOOSE_TAKE:
				DurableObserve(queue, DURABLE_HIST_QUEUE_LATENCY,
							   now - DatumGetTimestampTz(values[DURABLE_CLAIMED_RUN_AT]));
				tuplestore_putvalues(store, desc, values, isnull);
				DurableCount(queue, DURABLE_COUNT_RATE_LIMITED, ndeferred);
				*claimed = 1;
				return true;
			case DURABLE_CHOOSE_DEFER:
				deferred_event(chooser.partition, task_id, &chooser.deferral, worker, now);
				ndeferred++;
				break;
			case DURABLE_CHOOSE_PASS:
				passed = passed ? repalloc(passed, sizeof(int64) * (npassed + 1)) :
					palloc(sizeof(int64));
				passed[npassed++] = task_id;
				break;
		}
	}
}

/*
 * Claim up to wanted tasks of the partition in args as chosen above, with
 * candidates (the queue's, or in a queue with a concurrency limit, of the
 * keys held): again while it wants more and deferred or passed over some
 * (each round leaves fewer candidates: those deferred are not due, those
 * passed over are named).
 */
static int
claim_by_statements(DurableStatement *candidates, const Datum *args,
					const char *nulls, int wanted, const char *queue,
					const char *worker, TimestampTz now, Tuplestorestate *store,
					TupleDesc desc)
{
	int32		partition = DatumGetInt32(args[CLAIM_PARTITION]);
	Datum		cargs[CANDIDATES_NPARAMS];
	char		cnulls[CANDIDATES_NPARAMS];
	Datum		chosen_args[CHOSEN_NPARAMS];
	char		chosen_nulls[CHOSEN_NPARAMS];
	int			claimed = 0;
	bool		again = true;
	Datum	   *passed = NULL;
	int			npassed_all = 0;

	memset(cnulls, ' ', sizeof(cnulls));
	cargs[CANDIDATES_PASSED] = PointerGetDatum(construct_empty_array(INT8OID));
	cargs[CANDIDATES_PARTITION] = args[CLAIM_PARTITION];
	cargs[CANDIDATES_QUEUE] = args[CLAIM_QUEUE];
	cargs[CANDIDATES_NOW] = args[CLAIM_NOW];
	cargs[CANDIDATES_RUNS] = args[CLAIM_RUNS];
	cnulls[CANDIDATES_RUNS] = nulls[CLAIM_RUNS];
	if (candidates != &claim_candidates)
	{
		cargs[CANDIDATES_PARTITIONS] = args[CLAIM_PARTITIONS];
		cargs[CANDIDATES_CONCURRENCY_LIMIT] = args[CLAIM_CONCURRENCY_LIMIT];
		cargs[CANDIDATES_HELD] = args[CLAIM_HELD];
	}
	memset(chosen_nulls, ' ', sizeof(chosen_nulls));
	chosen_args[CHOSEN_PARTITION] = args[CLAIM_PARTITION];
	chosen_args[CHOSEN_NOW] = args[CLAIM_NOW];
	chosen_args[CHOSEN_WORKER] = args[CLAIM_WORKER];
	chosen_args[CHOSEN_LEASE] = args[CLAIM_LEASE];
	chosen_args[CHOSEN_LEASE_UNTIL] = args[CLAIM_LEASE_UNTIL];
	chosen_args[CHOSEN_ROLE] = args[CLAIM_ROLE];
	chosen_args[CHOSEN_PINS] = args[CLAIM_PINS];
	chosen_nulls[CHOSEN_PINS] = nulls[CLAIM_PINS];

	while (again && claimed < wanted)
	{
		DurableResult res;
		int			n;
		Datum	   *chosen;
		Jsonb	  **limits;
		int			nchosen = 0;
		int			ndeferred = 0;
		int			npassed = 0;

		cargs[CANDIDATES_BATCH] = Int32GetDatum(wanted - claimed);
		res = DurableRun(candidates, cargs, cnulls, SPI_OK_SELECT, 0);
		n = (int) res.rows;
		if (n == 0)
			break;
		chosen = palloc(sizeof(Datum) * n);
		limits = palloc(sizeof(Jsonb *) * n);
		for (int i = 0; i < n; i++)
		{
			bool		isnull;
			Datum		d = DurableGetDatum(res, i, CANDIDATE_RATE_LIMITS, &isnull);

			chosen[i] = Int64GetDatum(DurableGetInt64(res, i, CANDIDATE_TASK_ID));
			limits[i] = isnull ? NULL : DatumGetJsonbPCopy(d);
		}
		for (int i = 0; i < n; i++)
		{
			DurableRateDeferral deferral;

			if (limits[i] != NULL)
				switch (DurableRateLimitsTake(partition, limits[i], now, &deferral))
				{
					case DURABLE_RATE_TAKEN:
						break;
					case DURABLE_RATE_DEFERRED:
						defer_task(partition, DatumGetInt64(chosen[i]), &deferral,
								   worker, now);
						ndeferred++;
						continue;
					case DURABLE_RATE_BUSY:
						passed = passed ? repalloc(passed, sizeof(Datum) * (npassed_all + 1)) :
							palloc(sizeof(Datum));
						passed[npassed_all++] = chosen[i];
						npassed++;
						continue;
				}
			chosen[nchosen++] = chosen[i];
		}
		if (npassed > 0)
			cargs[CANDIDATES_PASSED] =
				PointerGetDatum(construct_array(passed, npassed_all, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		if (nchosen > 0)
		{
			chosen_args[CHOSEN_IDS] =
				PointerGetDatum(construct_array(chosen, nchosen, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
			res = DurableRun(&claim_chosen, chosen_args, chosen_nulls, SPI_OK_SELECT, 0);
			DurableClaimPut(res, queue, now, store, desc);
			claimed += (int) res.rows;
		}
		DurableCount(queue, DURABLE_COUNT_RATE_LIMITED, ndeferred);
		again = ndeferred > 0 || npassed > 0;
	}
	return claimed;
}

/*
 * DurableClaimRateLimited
 *		Claim up to wanted tasks of the partition in args (a claim's
 *		parameters, claim.h) in a queue whose tasks name rate limits,
 *		choosing among them as above; in a queue with a concurrency limit
 *		(limited) of the keys held.  Returns how many.
 */
int
DurableClaimRateLimited(bool limited, const Datum *args, const char *nulls,
						int wanted, const char *queue, const char *worker,
						TimestampTz now, Tuplestorestate *store, TupleDesc desc)
{
	int			claimed;

	if (!limited && wanted == 1 && nulls[CLAIM_RUNS] == 'n' && !DurableDistributed() &&
		claim_rate_limited_directly(args, queue, worker, now, store, desc, &claimed))
		return claimed;
	return claim_by_statements(!limited ? &claim_candidates :
							   DurableDistributed() ? &claim_candidates_limited_here :
							   &claim_candidates_limited,
							   args, nulls, wanted, queue, worker, now, store, desc);
}
