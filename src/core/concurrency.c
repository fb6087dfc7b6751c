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
 * or running) in its queue.  Removing it is safe at any moment: a claim
 * that comes later makes the row again, one that holds it is skipped
 * (SKIP LOCKED), and one making it anew waits for the removal's commit.
 * The idle time only spares a busy key the churn of a row made and
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

enum
{
	OLD_KEYS_PARTITION,
	OLD_KEYS_NCOLUMNS
};
static const DurableColumn old_keys_columns[OLD_KEYS_NCOLUMNS] = {
	[OLD_KEYS_PARTITION] = {"partition_key", INT4OID},
};

/* of the partitions $2, those holding rows idle for long enough */
static DurableStatement old_keys = {
	.name = "concurrency_keys_idle",
	.sql = "SELECT DISTINCT partition_key FROM durable.concurrency_keys"
	" WHERE partition_key = ANY ($2)"
	" AND claimed_at < " UTC_PLUS("$1", "-", "'" DURABLE_KEY_IDLE "'::pg_catalog.interval"),
	.nargs = 2, .argtypes = {TIMESTAMPTZOID, INT4ARRAYOID},
	DURABLE_COLUMNS(old_keys_columns),
};

/*
 * Up to $3 idle rows of partition $1 whose key has no task that could run.
 * On one server a key's row is in its queue's first partition and its
 * tasks in any of the queue's; on Citus both are in the key's partition.
 */
#define RETIRE_KEYS(tasks_where) \
	"DELETE FROM durable.concurrency_keys r" \
	" WHERE r.partition_key = $1 AND (r.queue_name, r.concurrency_key) IN" \
	" (SELECT k.queue_name, k.concurrency_key FROM durable.concurrency_keys k" \
	"  WHERE k.partition_key = $1" \
	"  AND k.claimed_at < " UTC_PLUS("$2", "-", "'" DURABLE_KEY_IDLE "'::pg_catalog.interval") \
	"  AND NOT EXISTS (SELECT FROM durable.live_tasks t" \
	"   WHERE " tasks_where " AND t.queue_name = k.queue_name" \
	"   AND t.concurrency_key = k.concurrency_key" \
	"   AND t.state IN ('ready', 'waiting', 'running'))" \
	"  LIMIT $3 FOR UPDATE OF k SKIP LOCKED)"

static DurableStatement retire_keys = {
	.name = "concurrency_keys_retire",
	.sql = RETIRE_KEYS("t.partition_key IN (SELECT (q.partition_base + i)"
					   " % " CppAsString2(DURABLE_PARTITION_SPACE)
					   " FROM durable.queues q,"
					   " pg_catalog.generate_series(0, q.partitions - 1) i"
					   " WHERE q.queue_name = k.queue_name)"),
	.nargs = 3, .argtypes = {INT4OID, TIMESTAMPTZOID, INT4OID},
};

static DurableStatement retire_keys_distributed = {
	.name = "concurrency_keys_retire_distributed",
	.sql = RETIRE_KEYS("t.partition_key = $1"),
	.nargs = 3, .argtypes = {INT4OID, TIMESTAMPTZOID, INT4OID},
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
	Datum		args[3];

	args[0] = Int32GetDatum(work->partition);
	args[1] = TimestampTzGetDatum(work->now);
	args[2] = Int32GetDatum(work->batch);
	return DurableExecute(DurableDistributed() ? &retire_keys_distributed : &retire_keys,
						  args, NULL, SPI_OK_DELETE, 0);
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
	IdleWork   *work = (IdleWork *) arg;
	Datum		args[2];
	Datum	   *keys = palloc(sizeof(Datum) * work->npartitions);
	uint64		n;

	for (uint64 i = 0; i < work->npartitions; i++)
		keys[i] = Int32GetDatum(work->partitions[i]);
	args[0] = TimestampTzGetDatum(work->now);
	args[1] = PointerGetDatum(construct_array(keys, (int) work->npartitions,
											  INT4OID, sizeof(int32), true,
											  TYPALIGN_INT));
	n = DurableExecute(&old_keys, args, NULL, SPI_OK_SELECT, 0);
	for (uint64 i = 0; i < n; i++)
		work->partitions[i] = DurableColumnInt32(i, OLD_KEYS_PARTITION);
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
	IdleWork	idle = {now, palloc(sizeof(int32) * Max(npartitions, 1)), npartitions};
	uint64		nidle = 0;
	uint64		retired = 0;

	memcpy(idle.partitions, partitions, sizeof(int32) * npartitions);
	if (npartitions > 0)
		(void) DurableRunPart("concurrency keys", find_idle_partitions, &idle, &nidle);
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
