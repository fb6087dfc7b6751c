/*-------------------------------------------------------------------------
 *
 * rate_buckets.c
 *	  The state of a rate limit per key (its bucket), and the units a claim
 *	  takes from it, or the time it defers the task to.
 *
 * A bucket is one row: its GCRA state tat (pure/rate.c) and booked, the
 * end of what the tasks deferred so far would take.  A claim in a queue
 * whose tasks name limits (claim_rate.c) locks each candidate's buckets,
 * skipping one another claim holds (the task stays ready for a later
 * claim, which is no busy loop: this claim goes on to other tasks), and
 * either takes the units of all of them, or none: the task is then due
 * when its units will fit after those booked before it, which it books in
 * turn, so that the tasks a limit holds back come due one after the other
 * at its rate rather than all at once.  The units taken are written in
 * the claim's transaction: a claim that rolls back gives them back.
 *
 * On one server every bucket is in partition 0, so a limit is one bucket
 * per key whichever partition claims, and a claim takes buckets through
 * the access methods (store/take.c), as the usual claim takes its task,
 * without a statement's executor.  On Citus a bucket is in the partition
 * of the task that takes from it, so that a claim stays on one node: a
 * task naming limits is enqueued into its first limit's key's partition
 * (enqueue.c), where every task of that key then is.
 *
 *-------------------------------------------------------------------------
 */
#include "core/rate_limits.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* a bucket, by its primary key */
enum
{
	BUCKET_PARTITION,
	BUCKET_NAME,
	BUCKET_KEY,
	BUCKET_TAT,
	BUCKET_BOOKED,
	BUCKET_NPARAMS
};
#define BUCKET_KEY_PARAMS \
	[BUCKET_PARTITION] = {"partition", INT4OID}, \
	[BUCKET_NAME] = {"name", TEXTOID}, \
	[BUCKET_KEY] = {"key", TEXTOID}
static const DurableParam bucket_params[BUCKET_TAT] = {
	BUCKET_KEY_PARAMS,
};
static const DurableParam bucket_make_params[BUCKET_BOOKED] = {
	BUCKET_KEY_PARAMS,
	[BUCKET_TAT] = {"tat", TIMESTAMPTZOID},
};
static const DurableParam bucket_set_params[BUCKET_NPARAMS] = {
	BUCKET_KEY_PARAMS,
	[BUCKET_TAT] = {"tat", TIMESTAMPTZOID},
	[BUCKET_BOOKED] = {"booked", TIMESTAMPTZOID},
};
#define BUCKET_WHERE \
	" WHERE partition_key = $partition AND limit_name = $name AND limit_key = $key"

enum
{
	STATE_TAT,
	STATE_BOOKED,
	STATE_NCOLUMNS
};
static const DurableColumn state_columns[STATE_NCOLUMNS] = {
	[STATE_TAT] = {"tat", TIMESTAMPTZOID},
	[STATE_BOOKED] = {"booked", TIMESTAMPTZOID},
};

/* the bucket, unless another claim holds it (or it is missing) */
static DurableStatement bucket_lock = {
	.name = "rate_limit_bucket_lock",
	.sql = "SELECT tat, booked FROM durable.rate_limit_buckets" BUCKET_WHERE
	" FOR UPDATE SKIP LOCKED",
	DURABLE_PARAMS(bucket_params),
	DURABLE_COLUMNS(state_columns),
};

/* whether the bucket exists, locked or not */
static DurableStatement bucket_exists = {
	.name = "rate_limit_bucket_exists",
	.sql = "SELECT tat, booked FROM durable.rate_limit_buckets" BUCKET_WHERE,
	DURABLE_PARAMS(bucket_params),
	DURABLE_COLUMNS(state_columns),
};

/* a new bucket, empty at $tat, unless one was made meanwhile */
static DurableStatement bucket_make = {
	.name = "rate_limit_bucket_make",
	.sql = "INSERT INTO durable.rate_limit_buckets"
	" (partition_key, limit_name, limit_key, tat, booked)"
	" VALUES ($partition, $name, $key, $tat, $tat)"
	" ON CONFLICT (partition_key, limit_name, limit_key) DO NOTHING"
	" RETURNING tat, booked",
	DURABLE_PARAMS(bucket_make_params),
	DURABLE_COLUMNS(state_columns),
};

static DurableStatement bucket_set = {
	.name = "rate_limit_bucket_set",
	.sql = "UPDATE durable.rate_limit_buckets SET tat = $tat, booked = $booked"
	BUCKET_WHERE,
	DURABLE_PARAMS(bucket_set_params),
};

/*
 * On one server, bucket_lock and bucket_set by the bucket's primary key
 * (partition_key, limit_name, limit_key): locked as FOR UPDATE SKIP
 * LOCKED, and written by the claim that holds it.
 */
static DurableTake bucket_take = {
	.table = {.schema = "durable", .name = "rate_limit_buckets",
	DURABLE_COLUMNS(state_columns)},
	.index = NULL,
	.keys = {.nkeys = 3},
	.nread = 0,
	.lockmode = LockTupleExclusive,
	.wait = LockWaitSkip,
};
static DurableKeyRead bucket_read = {
	.table = {.schema = "durable", .name = "rate_limit_buckets",
	DURABLE_COLUMNS(state_columns)},
	.keys = {.nkeys = 3},
};
static DurableTake bucket_write = {
	.table = {.schema = "durable", .name = "rate_limit_buckets",
	DURABLE_COLUMNS(state_columns)},
	.index = NULL,
	.keys = {.nkeys = 3},
	.nread = 0,
	.lockmode = LockTupleExclusive,
	.wait = LockWaitBlock,
};

/*
 * DurableRateLimitsMakeBuckets
 *		Make the buckets a task enqueued into partition at now will take
 *		from, where they are missing: with the task, so that they exist
 *		when a claim sees it, and its claim finds a row to lock or skip
 *		rather than waiting on another claim's insert of one.  On one
 *		server a bucket that exists is only read, by its key.
 */
void
DurableRateLimitsMakeBuckets(Jsonb *limits, int32 partition, TimestampTz now)
{
	DurableRateUse		uses[DURABLE_MAX_TASK_RATE_LIMITS];
	int			n = DurableRateUsesParse(limits, uses);
	Datum		args[BUCKET_BOOKED];

	args[BUCKET_PARTITION] = Int32GetDatum(DurableDistributed() ? partition : 0);
	args[BUCKET_TAT] = TimestampTzGetDatum(now);
	for (int i = 0; i < n; i++)
	{
		Datum		values[STATE_NCOLUMNS];
		bool		isnull[STATE_NCOLUMNS];

		args[BUCKET_NAME] = CStringGetTextDatum(uses[i].prefix);
		args[BUCKET_KEY] = CStringGetTextDatum(uses[i].key);
		if (!DurableDistributed() && DurableReadByKey(&bucket_read, args, values, isnull))
			continue;
		(void) DurableRun(&bucket_make, args, NULL, SPI_OK_INSERT_RETURNING, 0);
	}
}

/* a bucket, whatever its state */
static bool
any_row(const Datum *values, const bool *isnull, void *arg)
{
	return true;
}

/*
 * Lock a use's bucket, or make it; false when another claim holds it.
 * Such a bucket is seen to exist by the snapshot, without waiting: an
 * insert would wait for the claim that holds it, as for one that makes
 * it (a bucket dropped and defined again since the task was enqueued).
 */
static bool
lock_bucket(DurableRateUse *use, int32 partition, TimestampTz now)
{
	Datum		args[BUCKET_BOOKED];
	DurableResult res;
	bool		isnull;

	args[BUCKET_PARTITION] = Int32GetDatum(partition);
	args[BUCKET_NAME] = CStringGetTextDatum(use->prefix);
	args[BUCKET_KEY] = CStringGetTextDatum(use->key);
	args[BUCKET_TAT] = TimestampTzGetDatum(now);
	if (!DurableDistributed())
	{
		Datum		values[STATE_NCOLUMNS];
		bool		isnull[STATE_NCOLUMNS];

		switch (DurableTakeFirst(&bucket_take, args, any_row, NULL, NULL, values, isnull))
		{
			case DURABLE_DIRECT_DONE:
				use->tat = DatumGetTimestampTz(values[STATE_TAT]);
				use->booked = DatumGetTimestampTz(values[STATE_BOOKED]);
				return true;
			case DURABLE_DIRECT_NONE:
				res.rows = 0;
				break;
			case DURABLE_DIRECT_BY_STATEMENT:
				res = DurableRun(&bucket_lock, args, NULL, SPI_OK_SELECT, 1);
				break;
		}
	}
	else
		res = DurableRun(&bucket_lock, args, NULL, SPI_OK_SELECT, 1);
	if (res.rows == 0)
	{
		if (DurableRun(&bucket_exists, args, NULL, SPI_OK_SELECT, 1).rows == 1)
			return false;
		res = DurableRun(&bucket_make, args, NULL, SPI_OK_INSERT_RETURNING, 1);
		if (res.rows == 0)
			return false;
	}
	use->tat = DatumGetTimestampTz(DurableGetDatum(res, 0, STATE_TAT, &isnull));
	use->booked = DatumGetTimestampTz(DurableGetDatum(res, 0, STATE_BOOKED, &isnull));
	return true;
}

/* the new state of a bucket its claim holds */
static void
set_state(Datum *values, bool *isnull, void *arg)
{
	const DurableRateUse *use = arg;

	values[STATE_TAT] = TimestampTzGetDatum(use->tat);
	values[STATE_BOOKED] = TimestampTzGetDatum(use->booked);
}

static void
write_bucket(DurableRateUse *use, int32 partition)
{
	Datum		args[BUCKET_NPARAMS];

	args[BUCKET_PARTITION] = Int32GetDatum(partition);
	args[BUCKET_NAME] = CStringGetTextDatum(use->prefix);
	args[BUCKET_KEY] = CStringGetTextDatum(use->key);
	if (!DurableDistributed())
	{
		Datum		values[STATE_NCOLUMNS];
		bool		isnull[STATE_NCOLUMNS];

		if (DurableTakeFirst(&bucket_write, args, any_row, set_state, use,
							 values, isnull) != DURABLE_DIRECT_BY_STATEMENT)
			return;
	}
	args[BUCKET_TAT] = TimestampTzGetDatum(use->tat);
	args[BUCKET_BOOKED] = TimestampTzGetDatum(use->booked);
	(void) DurableRun(&bucket_set, args, NULL, SPI_OK_UPDATE, 0);
}

/*
 * The time a task deferred by a use is due, which it books: when its
 * units will conform after those of the tasks deferred before it, as if
 * they had taken theirs.  A use that does not conform now has tat past
 * now, so its booking starts there too, and conforms at the time found.
 */
static TimestampTz
book(DurableRateUse *use, TimestampTz now)
{
	TimestampTz after = Max(use->tat, use->booked);
	TimestampTz next;
	TimestampTz due;

	(void) DurableRateTake(after, now, use->per_us, use->rate, use->burst,
						   use->units, &next, &due);
	(void) DurableRateTake(after, due, use->per_us, use->rate, use->burst,
						   use->units, &use->booked, &next);
	return due;
}

/* a deferral by use, if it holds the task back the longest so far */
static void
defer_by(DurableRateDeferral *deferral, const DurableRateUse *use, TimestampTz due)
{
	if (due > deferral->until)
	{
		deferral->until = due;
		deferral->limit = use->name;
		deferral->units = use->units;
	}
}

/* a task's only limit, taken or booked as its bucket is locked */
typedef struct OnlyUse
{
	DurableRateUse    *use;
	TimestampTz now;
	bool		conforms;
	TimestampTz due;
} OnlyUse;

static void
take_only_use(Datum *values, bool *isnull, void *arg)
{
	OnlyUse    *only = arg;
	DurableRateUse    *use = only->use;

	use->tat = DatumGetTimestampTz(values[STATE_TAT]);
	use->booked = DatumGetTimestampTz(values[STATE_BOOKED]);
	only->conforms = DurableRateTake(use->tat, only->now, use->per_us, use->rate,
									 use->burst, use->units, &use->tat, &only->due);
	if (!only->conforms)
		only->due = book(use, only->now);
	values[STATE_TAT] = TimestampTzGetDatum(use->tat);
	values[STATE_BOOKED] = TimestampTzGetDatum(use->booked);
}

/*
 * DurableRateLimitsTake
 *		For a claim at now of a task of partition that names limits: take
 *		the units of every limit that is still defined (DURABLE_RATE_TAKEN),
 *		or none: when a bucket is held by another claim (DURABLE_RATE_BUSY),
 *		or one has no room (DURABLE_RATE_DEFERRED: the task books its units
 *		where they fit, and *deferral says until when and which limit
 *		holds it back the longest).  A task of one limit, the usual case,
 *		has its bucket locked and written at once on one server.
 */
DurableRateOutcome
DurableRateLimitsTake(int32 partition, Jsonb *limits, TimestampTz now,
					  DurableRateDeferral *deferral)
{
	DurableRateUse		uses[DURABLE_MAX_TASK_RATE_LIMITS];
	bool		conforms[DURABLE_MAX_TASK_RATE_LIMITS];
	int			n = DurableRateUsesParse(limits, uses);
	int32		bucket_partition = DurableDistributed() ? partition : 0;
	bool		admitted = true;
	int			nused = 0;
	DurableRateUse    *last = NULL;	/* the last limit in use */

	deferral->until = now;
	for (int i = 0; i < n; i++)
	{
		uses[i].defined = uses[i].units > 0 && DurableRateUseDefinition(&uses[i]);
		if (uses[i].defined)
		{
			last = &uses[i];
			nused++;
		}
	}
	if (nused == 1 && !DurableDistributed())
	{
		OnlyUse		only = {.use = last,.now = now};
		Datum		keys[BUCKET_TAT];
		Datum		values[STATE_NCOLUMNS];
		bool		isnull[STATE_NCOLUMNS];

		keys[BUCKET_PARTITION] = Int32GetDatum(bucket_partition);
		keys[BUCKET_NAME] = CStringGetTextDatum(last->prefix);
		keys[BUCKET_KEY] = CStringGetTextDatum(last->key);
		if (DurableTakeFirst(&bucket_take, keys, any_row, take_only_use, &only,
							 values, isnull) == DURABLE_DIRECT_DONE)
		{
			if (only.conforms)
				return DURABLE_RATE_TAKEN;
			defer_by(deferral, last, only.due);
			return DURABLE_RATE_DEFERRED;
		}
		/* held by another claim, or missing: as any */
	}

	for (int i = 0; i < n; i++)
	{
		DurableRateUse    *use = &uses[i];
		TimestampTz admit_at;

		if (!use->defined)
			continue;
		if (!lock_bucket(use, bucket_partition, now))
			return DURABLE_RATE_BUSY;
		conforms[i] = DurableRateTake(use->tat, now, use->per_us, use->rate,
									  use->burst, use->units, &use->tat, &admit_at);
		admitted &= conforms[i];
	}
	for (int i = 0; i < n; i++)
	{
		DurableRateUse    *use = &uses[i];

		if (!use->defined || (!admitted && conforms[i]))
			continue;
		if (!admitted)
			defer_by(deferral, use, book(use, now));
		write_bucket(use, bucket_partition);
	}
	return admitted ? DURABLE_RATE_TAKEN : DURABLE_RATE_DEFERRED;
}
