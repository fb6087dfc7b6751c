/*-------------------------------------------------------------------------
 *
 * concurrency.c
 *	  Retiring the rows of concurrency keys that no task uses.
 *
 * The claims of a key in a queue with a concurrency limit take turns on
 * the key's row in durable.concurrency_keys (claim.c), which the first
 * claim of the key makes.  A queue keyed by customer or tenant meets new
 * keys all the time, and each would leave its row behind for good: so the
 * tick removes a key's row once no claim has written it for
 * DURABLE_KEY_IDLE and the key has no task that could run (ready, waiting
 * or running) in its queue.  Removing it is safe at any moment: the
 * removal skips a row a claim holds (SKIP LOCKED); a claim that meets a
 * row being removed skips it too and takes no task of the key that time,
 * and the next claim makes the row again (under REPEATABLE READ one whose
 * snapshot still saw the row is refused with 40001, as when another claim
 * wrote it).  The idle time spares a busy key the churn of a row made and
 * removed between two of its tasks.
 *
 * A partition with old rows is a part of the tick of its own; on Citus
 * each node's reconciler retires the rows of its shards, where the key's
 * tasks are too (the row is in the partition claimed, the key's).
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"
#include "core/sql.h"

#include "catalog/pg_type.h"
#include "utils/timestamp.h"

/* how long a key's row stays once no claim has written it */
#define DURABLE_KEY_IDLE "1 hour"

/*
 * How often a tick looks for idle rows (a read of every row's claimed_at,
 * which has no index: a claim writes it, and an index would cost every
 * keyed claim), once per process; rows wait an hour anyway.
 */
#define DURABLE_KEY_RETIRE_EVERY_MS 60000

enum
{
	OLD_KEYS_PARTITION,
	OLD_KEYS_NCOLUMNS
};
static const DurableColumn old_keys_columns[OLD_KEYS_NCOLUMNS] = {
	[OLD_KEYS_PARTITION] = {"partition_key", INT4OID},
};

enum
{
	IDLE_NOW,
	IDLE_PARTITIONS,
	IDLE_NPARAMS
};
static const DurableParam old_keys_params[IDLE_NPARAMS] = {
	[IDLE_NOW] = {"now", TIMESTAMPTZOID},
	[IDLE_PARTITIONS] = {"partitions", INT4ARRAYOID},
};
/* of the partitions given, those holding rows idle for long enough */
static DurableStatement old_keys = {
	.name = "concurrency_keys_idle",
	.sql = "SELECT DISTINCT partition_key FROM durable.concurrency_keys"
	" WHERE partition_key = ANY ($partitions)"
	" AND claimed_at < " UTC_PLUS("$now", "-", "'" DURABLE_KEY_IDLE "'::pg_catalog.interval"),
	DURABLE_PARAMS(old_keys_params),
	DURABLE_COLUMNS(old_keys_columns),
};

/*
 * Up to $batch idle rows of $partition whose key has no task that could run.
 * On one server a key's row is in its queue's first partition and its
 * tasks in any of the queue's; on Citus both are in the key's partition.
 */
#define RETIRE_KEYS(tasks_where) \
	"DELETE FROM durable.concurrency_keys r" \
	" WHERE r.partition_key = $partition AND (r.queue_name, r.concurrency_key) IN" \
	" (SELECT k.queue_name, k.concurrency_key FROM durable.concurrency_keys k" \
	"  WHERE k.partition_key = $partition" \
	"  AND k.claimed_at < " UTC_PLUS("$now", "-", "'" DURABLE_KEY_IDLE "'::pg_catalog.interval") \
	"  AND NOT EXISTS (SELECT FROM durable.live_tasks t" \
	"   WHERE " tasks_where " AND t.queue_name = k.queue_name" \
	"   AND t.concurrency_key = k.concurrency_key" \
	"   AND t.state IN ('ready', 'waiting', 'running'))" \
	"  LIMIT $batch FOR UPDATE OF k SKIP LOCKED)"

/* the parameters of RETIRE_KEYS */
enum
{
	RETIRE_PARTITION,
	RETIRE_NOW,
	RETIRE_BATCH,
	RETIRE_NPARAMS
};
static const DurableParam retire_keys_params[RETIRE_NPARAMS] = {
	[RETIRE_PARTITION] = {"partition", INT4OID},
	[RETIRE_NOW] = {"now", TIMESTAMPTZOID},
	[RETIRE_BATCH] = {"batch", INT4OID},
};

static DurableStatement retire_keys = {
	.name = "concurrency_keys_retire",
	.sql = RETIRE_KEYS("t.partition_key IN (SELECT (q.partition_base + i)"
					   " % " CppAsString2(DURABLE_PARTITION_SPACE)
					   " FROM durable.queues q,"
					   " pg_catalog.generate_series(0, q.partitions - 1) i"
					   " WHERE q.queue_name = k.queue_name)"),
	DURABLE_PARAMS(retire_keys_params),
};

static DurableStatement retire_keys_distributed = {
	.name = "concurrency_keys_retire_distributed",
	.sql = RETIRE_KEYS("t.partition_key = $partition"),
	DURABLE_PARAMS(retire_keys_params),
	.by_partition = true,
};

typedef struct RetireWork
{
	int32		partition;
	TimestampTz now;
	int			batch;
} RetireWork;

static uint64
retire_partition(void *arg)
{
	RetireWork *work = (RetireWork *) arg;
	Datum		args[RETIRE_NPARAMS];

	args[RETIRE_PARTITION] = Int32GetDatum(work->partition);
	args[RETIRE_NOW] = TimestampTzGetDatum(work->now);
	args[RETIRE_BATCH] = Int32GetDatum(work->batch);
	return DurableRun(DurableDistributed() ? &retire_keys_distributed : &retire_keys,
					  args, NULL, SPI_OK_DELETE, 0).rows;
}

/* what the part that finds the partitions with idle rows works on */
typedef struct IdleWork
{
	TimestampTz now;
	int32	   *partitions;		/* in: those to look at; out: those with rows */
	uint64		npartitions;
} IdleWork;

static uint64
find_idle_partitions(void *arg)
{
	DurableResult res;
	IdleWork   *work = (IdleWork *) arg;
	Datum		args[IDLE_NPARAMS];
	Datum	   *keys = palloc(sizeof(Datum) * work->npartitions);
	uint64		n;

	for (uint64 i = 0; i < work->npartitions; i++)
		keys[i] = Int32GetDatum(work->partitions[i]);
	args[IDLE_NOW] = TimestampTzGetDatum(work->now);
	args[IDLE_PARTITIONS] = PointerGetDatum(construct_array(keys, (int) work->npartitions,
															INT4OID, sizeof(int32), true,
															TYPALIGN_INT));
	res = DurableRun(&old_keys, args, NULL, SPI_OK_SELECT, 0);
	n = res.rows;
	for (uint64 i = 0; i < n; i++)
		work->partitions[i] = DurableGetInt32(res, i, OLD_KEYS_PARTITION);
	pfree(keys);
	return n;
}

/*
 * DurableRetireConcurrencyKeys
 *		Remove up to batch rows of concurrency keys that have been idle for
 *		DURABLE_KEY_IDLE and have no task that could run, each partition a
 *		part of the tick.  Of the partitions given only: on Citus a node's
 *		reconciler passes its own.
 *		Returns how many were removed.
 */
uint64
DurableRetireConcurrencyKeys(const int32 *partitions, uint64 npartitions,
							 TimestampTz now, int batch)
{
	static TimestampTz last_look = 0;
	IdleWork	idle;
	uint64		nidle = 0;
	uint64		retired = 0;

	if (last_look != 0 &&
		!TimestampDifferenceExceeds(last_look, now, DURABLE_KEY_RETIRE_EVERY_MS))
		return 0;
	last_look = now;
	idle.now = now;
	idle.partitions = palloc(sizeof(int32) * Max(npartitions, 1));
	idle.npartitions = npartitions;
	memcpy(idle.partitions, partitions, sizeof(int32) * npartitions);
	if (npartitions > 0 &&
		DurableRunPart("concurrency keys", find_idle_partitions, &idle, &nidle))
		/* a partition with no idle rows left: a claim took its key again */
		DurablePartitionPartsDone("concurrency keys", partitions, npartitions,
								  idle.partitions, nidle);
	for (uint64 i = 0; i < nidle && retired < (uint64) batch; i++)
	{
		RetireWork	work = {idle.partitions[i], now, batch - (int) retired};
		char		part[64];
		uint64		done;

		snprintf(part, sizeof(part), "partition %d: concurrency keys", work.partition);
		if (DurableRunPart(part, retire_partition, &work, &done))
			retired += done;
	}
	pfree(idle.partitions);
	return retired;
}
