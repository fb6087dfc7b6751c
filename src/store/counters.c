/*-------------------------------------------------------------------------
 *
 * counters.c
 *	  Counters of what durable did, per queue, in shared memory: monotonic
 *	  from the server's start (or the last durable_reset_counters()), for
 *	  Prometheus' rate(), with no write to any table on the hot path.
 *
 * As pg_stat_statements keeps its entries: the postmaster reserves a hash
 * of durable.counters_queues queues (shmem_request_hook), each entry, by
 * database and queue name, a set of atomic counters and two histograms; a
 * queue past that many is counted in its database's entry of no name,
 * shown as queue "".  An entry is never removed, so a pointer to it stays
 * good once found (a reset zeroes the values).  The ticks of each
 * database's reconciliation are kept apart, in a smaller hash.
 *
 * What a transaction did counts only if it commits: each backend keeps its
 * increments per queue and subtransaction level, moves them to the parent
 * when a subtransaction commits, drops them when it aborts (a failing part
 * of the reconciler's tick counts nothing), and adds them to shared memory
 * when the top transaction commits or prepares.  What is refused with an
 * error (a stale fence, a version conflict) is counted at once: the error
 * aborts the transaction.
 *
 * Without preloading there is no shared memory to count in: every call
 * here does nothing, and the reports say so (DurableCountersAvailable).
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/* the histograms' upper bounds, in seconds (and +Inf past the last) */
const double durable_histogram_bounds[DURABLE_HISTOGRAM_BUCKETS] = {
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
	900, 3600, 21600, 86400
};

/* settings (process/durable.c defines them) */
int			durable_counters_queues = 1000;
bool		durable_counting = true;

/* the databases whose ticks are counted, at most */
#define COUNTED_DATABASES 256

typedef struct CounterKey
{
	Oid			dbid;
	char		queue[NAMEDATALEN]; /* "" for the queues past the limit */
} CounterKey;

typedef struct CounterEntry
{
	CounterKey	key;
	pg_atomic_uint64 counts[DURABLE_NCOUNTERS];
	pg_atomic_uint64 buckets[DURABLE_NHISTOGRAMS][DURABLE_HISTOGRAM_BUCKETS + 1];
	pg_atomic_uint64 sum_us[DURABLE_NHISTOGRAMS];
} CounterEntry;

typedef struct TickEntry
{
	Oid			dbid;
	pg_atomic_uint64 ticks;
	pg_atomic_uint64 last_tick_at;	/* TimestampTz of the last tick's end */
	pg_atomic_uint64 reset_at;	/* TimestampTz */
} TickEntry;

typedef struct CounterShared
{
	LWLock	   *lock;			/* entries are added under it, exclusive */
	TimestampTz started_at;
} CounterShared;

static CounterShared *shared = NULL;
static HTAB *entries = NULL;
static HTAB *databases = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* a backend's increments not yet committed: per queue and nesting level */
typedef struct PendingCounts
{
	char		queue[NAMEDATALEN];
	int			level;
	int64		counts[DURABLE_NCOUNTERS];
	int64		buckets[DURABLE_NHISTOGRAMS][DURABLE_HISTOGRAM_BUCKETS + 1];
	int64		sum_us[DURABLE_NHISTOGRAMS];
} PendingCounts;

static PendingCounts *pending = NULL;
static int	npending = 0;
static int	maxpending = 0;
static bool callbacks_registered = false;

static Size
counters_size(void)
{
	return add_size(add_size(MAXALIGN(sizeof(CounterShared)),
							 hash_estimate_size(durable_counters_queues + COUNTED_DATABASES,
												sizeof(CounterEntry))),
					hash_estimate_size(COUNTED_DATABASES, sizeof(TickEntry)));
}

static void
counters_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(counters_size());
	RequestNamedLWLockTranche("durable counters", 1);
}

static void
counters_shmem_startup(void)
{
	bool		found;
	HASHCTL		info = {0};

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("durable counters", sizeof(CounterShared), &found);
	if (!found)
	{
		shared->lock = &(GetNamedLWLockTranche("durable counters"))->lock;
		shared->started_at = GetCurrentTimestamp();
	}
	info.keysize = sizeof(CounterKey);
	info.entrysize = sizeof(CounterEntry);
	entries = ShmemInitHash("durable counters by queue",
							durable_counters_queues + COUNTED_DATABASES,
							durable_counters_queues + COUNTED_DATABASES,
							&info, HASH_ELEM | HASH_BLOBS);
	info.keysize = sizeof(Oid);
	info.entrysize = sizeof(TickEntry);
	databases = ShmemInitHash("durable counters by database",
							  COUNTED_DATABASES, COUNTED_DATABASES,
							  &info, HASH_ELEM | HASH_BLOBS);
	LWLockRelease(AddinShmemInitLock);
}

/*
 * DurableCountersRequestShmem
 *		From _PG_init while preloading: reserve the counters' shared memory.
 */
void
DurableCountersRequestShmem(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = counters_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = counters_shmem_startup;
}

/* whether this server counts: durable preloaded, and counting on */
bool
DurableCountersAvailable(void)
{
	return shared != NULL;
}

/* zero every value of an entry: one just made (init), or a reset */
static void
entry_zero(CounterEntry *entry, bool init)
{
	for (int c = 0; c < DURABLE_NCOUNTERS; c++)
		init ? pg_atomic_init_u64(&entry->counts[c], 0) :
			pg_atomic_write_u64(&entry->counts[c], 0);
	for (int h = 0; h < DURABLE_NHISTOGRAMS; h++)
	{
		for (int b = 0; b <= DURABLE_HISTOGRAM_BUCKETS; b++)
			init ? pg_atomic_init_u64(&entry->buckets[h][b], 0) :
				pg_atomic_write_u64(&entry->buckets[h][b], 0);
		init ? pg_atomic_init_u64(&entry->sum_us[h], 0) :
			pg_atomic_write_u64(&entry->sum_us[h], 0);
	}
}

/*
 * The shared entry of a queue of this database, made on first use; once
 * durable.counters_queues are there, the database's entry of no name.
 * Never raises: it runs at commit.
 */
static CounterEntry *
shared_entry(const char *queue)
{
	CounterKey	key;
	CounterEntry *entry;
	bool		found;

	memset(&key, 0, sizeof(key));
	key.dbid = MyDatabaseId;
	strlcpy(key.queue, queue, NAMEDATALEN);
	LWLockAcquire(shared->lock, LW_SHARED);
	entry = hash_search(entries, &key, HASH_FIND, NULL);
	LWLockRelease(shared->lock);
	if (entry != NULL)
		return entry;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (hash_get_num_entries(entries) >= durable_counters_queues)
		memset(key.queue, 0, sizeof(key.queue));
	entry = hash_search(entries, &key, HASH_ENTER_NULL, &found);
	if (entry != NULL && !found)
		entry_zero(entry, true);
	LWLockRelease(shared->lock);
	return entry;
}

/* this database's ticks, made on first use (NULL past COUNTED_DATABASES) */
static TickEntry *
tick_entry(void)
{
	TickEntry  *entry;
	bool		found;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	entry = hash_search(databases, &MyDatabaseId, HASH_ENTER_NULL, &found);
	if (entry != NULL && !found)
	{
		pg_atomic_init_u64(&entry->ticks, 0);
		pg_atomic_init_u64(&entry->last_tick_at, 0);
		pg_atomic_init_u64(&entry->reset_at, (uint64) shared->started_at);
	}
	LWLockRelease(shared->lock);
	return entry;
}

static void
add_to_shared(const PendingCounts *p)
{
	CounterEntry *entry = shared_entry(p->queue);

	if (entry == NULL)
		return;
	for (int c = 0; c < DURABLE_NCOUNTERS; c++)
		if (p->counts[c] != 0)
			pg_atomic_fetch_add_u64(&entry->counts[c], p->counts[c]);
	for (int h = 0; h < DURABLE_NHISTOGRAMS; h++)
	{
		for (int b = 0; b <= DURABLE_HISTOGRAM_BUCKETS; b++)
			if (p->buckets[h][b] != 0)
				pg_atomic_fetch_add_u64(&entry->buckets[h][b], p->buckets[h][b]);
		if (p->sum_us[h] != 0)
			pg_atomic_fetch_add_u64(&entry->sum_us[h], p->sum_us[h]);
	}
}

static void
counters_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			for (int i = 0; i < npending; i++)
				add_to_shared(&pending[i]);
			npending = 0;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			npending = 0;
			break;
		default:
			break;
	}
}

/* a subtransaction's increments go to its parent, or with it */
static void
counters_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	int			kept = 0;

	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	for (int i = 0; i < npending; i++)
	{
		PendingCounts *p = &pending[i];

		if (p->level < level)
		{
			pending[kept++] = *p;
			continue;
		}
		if (event == SUBXACT_EVENT_ABORT_SUB)
			continue;
		/* merge into the parent's entry of the queue, or become it */
		for (int j = 0; j < kept; j++)
		{
			if (pending[j].level == level - 1 && strcmp(pending[j].queue, p->queue) == 0)
			{
				for (int c = 0; c < DURABLE_NCOUNTERS; c++)
					pending[j].counts[c] += p->counts[c];
				for (int h = 0; h < DURABLE_NHISTOGRAMS; h++)
				{
					for (int b = 0; b <= DURABLE_HISTOGRAM_BUCKETS; b++)
						pending[j].buckets[h][b] += p->buckets[h][b];
					pending[j].sum_us[h] += p->sum_us[h];
				}
				p = NULL;
				break;
			}
		}
		if (p != NULL)
		{
			p->level = level - 1;
			pending[kept++] = *p;
		}
	}
	npending = kept;
}

/* this transaction's increments of a queue, at its current level */
static PendingCounts *
pending_for(const char *queue)
{
	int			level = GetCurrentTransactionNestLevel();
	PendingCounts *p;

	for (int i = npending - 1; i >= 0; i--)
		if (pending[i].level == level && strncmp(pending[i].queue, queue, NAMEDATALEN - 1) == 0)
			return &pending[i];
	if (!callbacks_registered)
	{
		RegisterXactCallback(counters_xact_callback, NULL);
		RegisterSubXactCallback(counters_subxact_callback, NULL);
		callbacks_registered = true;
	}
	if (npending == maxpending)
	{
		int			more = Max(8, maxpending * 2);

		pending = pending == NULL ?
			MemoryContextAlloc(TopMemoryContext, more * sizeof(PendingCounts)) :
			repalloc(pending, more * sizeof(PendingCounts));
		maxpending = more;
	}
	p = &pending[npending++];
	memset(p, 0, sizeof(PendingCounts));
	strlcpy(p->queue, queue, NAMEDATALEN);
	p->level = level;
	return p;
}

/*
 * DurableCount
 *		Count n of counter for queue when this transaction commits.
 */
void
DurableCount(const char *queue, DurableCounter counter, int64 n)
{
	if (shared == NULL || !durable_counting || n == 0)
		return;
	pending_for(queue)->counts[counter] += n;
}

/*
 * DurableCountNow
 *		Count one of counter for queue at once, whatever becomes of this
 *		transaction: for what is refused with an error.
 */
void
DurableCountNow(const char *queue, DurableCounter counter)
{
	CounterEntry *entry;

	if (shared == NULL || !durable_counting)
		return;
	entry = shared_entry(queue);
	if (entry != NULL)
		pg_atomic_fetch_add_u64(&entry->counts[counter], 1);
}

/*
 * DurableObserve
 *		Put a duration (microseconds; a negative one counts as 0) in a
 *		histogram of queue when this transaction commits.
 */
void
DurableObserve(const char *queue, DurableHistogram histogram, int64 usecs)
{
	PendingCounts *p;
	int			b = 0;

	if (shared == NULL || !durable_counting)
		return;
	if (usecs < 0)
		usecs = 0;
	while (b < DURABLE_HISTOGRAM_BUCKETS &&
		   (double) usecs > durable_histogram_bounds[b] * USECS_PER_SEC)
		b++;
	p = pending_for(queue);
	p->buckets[histogram][b]++;
	p->sum_us[histogram] += usecs;
}

/*
 * DurableCountTick
 *		A tick of reconciliation ended at now.
 */
void
DurableCountTick(TimestampTz now)
{
	TickEntry  *entry;

	if (shared == NULL || (entry = tick_entry()) == NULL)
		return;
	pg_atomic_fetch_add_u64(&entry->ticks, 1);
	pg_atomic_write_u64(&entry->last_tick_at, (uint64) now);
}

/*
 * DurableCountersRead
 *		A copy of the counters of every queue of this database, into a
 *		palloc'd array; returns how many (0 when nothing counts).  Also the
 *		database's ticks, the last tick's end (0 before the first) and the
 *		last reset.
 */
int
DurableCountersRead(DurableQueueCounters **result, DurableTickCounters *ticks)
{
	HASH_SEQ_STATUS scan;
	CounterEntry *entry;
	TickEntry  *tick;
	int			n = 0;
	int			size;

	memset(ticks, 0, sizeof(*ticks));
	*result = NULL;
	if (shared == NULL)
		return 0;
	tick = tick_entry();
	if (tick != NULL)
	{
		ticks->ticks = pg_atomic_read_u64(&tick->ticks);
		ticks->last_tick_at = (TimestampTz) pg_atomic_read_u64(&tick->last_tick_at);
		ticks->reset_at = (TimestampTz) pg_atomic_read_u64(&tick->reset_at);
	}

	LWLockAcquire(shared->lock, LW_SHARED);
	size = Max(hash_get_num_entries(entries), 1);
	*result = palloc0(sizeof(DurableQueueCounters) * size);
	hash_seq_init(&scan, entries);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		DurableQueueCounters *q;

		if (entry->key.dbid != MyDatabaseId)
			continue;
		q = &(*result)[n++];
		strlcpy(q->queue, entry->key.queue, NAMEDATALEN);
		for (int c = 0; c < DURABLE_NCOUNTERS; c++)
			q->counts[c] = pg_atomic_read_u64(&entry->counts[c]);
		for (int h = 0; h < DURABLE_NHISTOGRAMS; h++)
		{
			for (int b = 0; b <= DURABLE_HISTOGRAM_BUCKETS; b++)
				q->buckets[h][b] = pg_atomic_read_u64(&entry->buckets[h][b]);
			q->sum_us[h] = pg_atomic_read_u64(&entry->sum_us[h]);
		}
	}
	LWLockRelease(shared->lock);
	return n;
}

/*
 * DurableCountersReset
 *		Zero every counter and histogram of this database
 *		(durable_reset_counters()); the entries stay, so that pointers to
 *		them stay good.
 */
void
DurableCountersReset(void)
{
	HASH_SEQ_STATUS scan;
	CounterEntry *entry;
	TickEntry  *tick;

	if (shared == NULL)
		return;
	tick = tick_entry();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&scan, entries);
	while ((entry = hash_seq_search(&scan)) != NULL)
		if (entry->key.dbid == MyDatabaseId)
			entry_zero(entry, false);
	if (tick != NULL)
	{
		pg_atomic_write_u64(&tick->ticks, 0);
		pg_atomic_write_u64(&tick->reset_at, (uint64) GetCurrentTimestamp());
	}
	LWLockRelease(shared->lock);
}
