/*-------------------------------------------------------------------------
 *
 * store.h
 *	  The plan cache: statements declared by the modules that run them,
 *	  prepared once per backend, checked at first prepare, executed, and
 *	  their results read by named columns.  Nothing here knows about tasks.
 *
 * A module declares each statement it runs as a DurableStatement next to
 * the code that binds it: the text, its parameters by name and type, and
 * the result columns by name and type, each indexed by an enum of the
 * module's own, so that values are bound and results read by name:
 *
 *		enum { QUEUE_GET_QUEUE, QUEUE_GET_NPARAMS };
 *		static const DurableParam queue_get_params[QUEUE_GET_NPARAMS] = {
 *			[QUEUE_GET_QUEUE] = {"queue", TEXTOID},
 *		};
 *		enum { QUEUE_PARTITIONS, QUEUE_LEASE, QUEUE_NCOLUMNS };
 *		static const DurableColumn queue_columns[QUEUE_NCOLUMNS] = {
 *			[QUEUE_PARTITIONS] = {"partitions", INT4OID},
 *			[QUEUE_LEASE] = {"lease", INTERVALOID},
 *		};
 *		static DurableStatement queue_get = {
 *			.name = "queue_get",
 *			.sql = "SELECT partitions, lease FROM durable.queues"
 *				   " WHERE queue_name = $queue",
 *			DURABLE_PARAMS(queue_get_params),
 *			DURABLE_COLUMNS(queue_columns),
 *		};
 *		...
 *		args[QUEUE_GET_QUEUE] = CStringGetTextDatum(queue);
 *		res = DurableRun(&queue_get, args, NULL, SPI_OK_SELECT, 1);
 *		if (res.rows == 1)
 *			lease = DurableGetDatum(res, 0, QUEUE_LEASE, &isnull);
 *
 * DurableRun returns the statement's result, a handle whose accessors
 * (result.c) check that the column read is one of that statement's, of
 * the type read, and the row one of its rows.
 *
 * params.c rewrites the text with $n once, on the statement's first use.
 * At first prepare the plan cache checks that the text uses exactly the
 * parameters declared, and that the result has exactly the columns
 * declared, by name and type; a statement that does not, or that binds
 * its parameters by position, is an ERROR naming it, on its first use,
 * which every test reaches.
 *
 * A statement may carry a split: the same statement as one statement per
 * table, which runs instead of it when durable's tables are distributed by
 * Citus (see plan.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_STORE_H
#define DURABLE_STORE_H

#include "pure/pure.h"

#include "access/skey.h"
#include "executor/execdesc.h"
#include "executor/spi.h"
#include "nodes/execnodes.h"
#include "nodes/lockoptions.h"
#include "utils/array.h"

#define DURABLE_MAX_ARGS 20
#define DURABLE_MAX_SPLIT_STEPS 5
#define DURABLE_MAX_TABLES 4

/* a result column: its name, as the statement's text names it, and type */
typedef struct DurableColumn
{
	const char *name;
	Oid			type;
} DurableColumn;

/* a parameter: its name, as the statement's text names it ($name), and type */
typedef struct DurableParam
{
	const char *name;
	Oid			type;
} DurableParam;

/*
 * A table whose columns a statement restates, by position, as the module
 * that declares it knows them: each column's name and its type as
 * format_type() writes it qualified.  Before such a statement runs, the
 * plan cache checks that the table has exactly these columns, in this
 * order, once per backend and again after the table changes, and after
 * the statement ran when the table changed meanwhile (cluster.c).
 */
typedef struct DurableTableColumn
{
	const char *name;
	const char *type;
} DurableTableColumn;

typedef struct DurableTable
{
	const char *schema;
	const char *name;
	const DurableTableColumn *columns;
	int			ncolumns;

	/* kept by the plan cache, per backend */
	Oid			relid;			/* as last checked */
	bool		checked;		/* since the table last changed */
} DurableTable;

/*
 * One statement of a split.  Its parameters are the statement's, followed
 * by the columns of one row of its input step ("$*" in its text stands for
 * all of those); it runs once per row of its input, or once when it has
 * none.  A required step that finds no row ends the split with no rows.
 * The last step returns what the statement returns.
 */
#define DURABLE_SPLIT_NO_INPUT (-1)

typedef struct DurableSplitStep
{
	const char *sql;
	int			input;			/* an earlier step, or DURABLE_SPLIT_NO_INPUT */
	bool		required;
	bool		by_partition;	/* see DurableStatement */
} DurableSplitStep;

typedef struct DurableStatement
{
	const char *name;			/* for messages */
	const char *sql;
	const DurableParam *params; /* by name (params.c) */
	int			nargs;			/* of params */
	Oid			argtypes[DURABLE_MAX_ARGS]; /* from params (params.c) */
	const DurableColumn *columns;	/* of its result, NULL for none */
	int			ncolumns;
	int			nsplit;			/* steps of its split, or 0 */
	DurableSplitStep split[DURABLE_MAX_SPLIT_STEPS];

	/* the tables whose rows its text restates column by column, or none */
	DurableTable *tables[DURABLE_MAX_TABLES];

	/*
	 * A statement that reads and writes only rows of partition $1 (an int4,
	 * never NULL) of distributed tables, and may read reference tables: on
	 * Citus it runs whole in the partition's shards where they are on this
	 * node (shard.c); elsewhere it is planned per partition, or runs as its
	 * split, whose steps say the same of themselves (plan.c).
	 */
	bool		by_partition;

	/*
	 * A SELECT of reference tables only: on Citus it reads their shards on
	 * this node, where they are (plan.c, shard.c).
	 */
	bool		reads_reference;

	/*
	 * A by_partition statement with a result that, on Citus, called on a
	 * node without the partition's shards, runs on the node that has them
	 * as one call (delegate.c); core/delegated.c lists every such one.
	 */
	bool		delegated;

	/*
	 * A delegated statement without text: on its partition's node this
	 * function does its work, its values as the call sent them; the call
	 * is the only way it runs (core/delegated.c).
	 */
	void		(*run_here) (Datum *values, const char *nulls,
							 Tuplestorestate *store, TupleDesc desc);

	/* kept by the plan cache, per backend */
	bool		params_resolved;	/* texts rewritten with $n (params.c) */
	SPIPlanPtr	plan;
	SPIPlanPtr	local_plan;		/* of reads_reference, on Citus */
	SPIPlanPtr	delegated_plan; /* of the call that runs it elsewhere */
	SPIPlanPtr	split_plans[DURABLE_MAX_SPLIT_STEPS];
	struct DurableStatement *next_prepared;
} DurableStatement;

/* the result columns of a statement, from their array */
#define DURABLE_COLUMNS(array) .columns = (array), .ncolumns = lengthof(array)
/* the parameters of a statement by name, from their array */
#define DURABLE_PARAMS(array) .params = (array), .nargs = lengthof(array)

/* ---- params.c ---- */
/* a walk over the "$" of a statement's text outside quotes (params.c) */
typedef struct DurableSqlScan
{
	const char *p;				/* where the walk goes on */
	char		quote;			/* the quote it is inside, or '\0' */
} DurableSqlScan;
extern const char *DurableNextDollar(DurableSqlScan *scan);
extern void DurableResolveParameters(DurableStatement *stmt);
/* the most parameters of a split's step: the statement's and its input's */
#define DURABLE_MAX_SPLIT_ARGS (DURABLE_MAX_ARGS + 64)
extern void DurableCheckParameters(const DurableStatement *stmt, int step, int nargs);

/*
 * The result of one run of a statement: its rows, read by the constants of
 * its declaration's columns (result.c).  It stays readable when other
 * statements run after it: SPI keeps each result until SPI_finish, or
 * until the subtransaction that made it aborts.
 */
typedef struct DurableResult
{
	const DurableStatement *stmt;
	SPITupleTable *tuptable;
	uint64		rows;
} DurableResult;

/* ---- pinned.c ---- */
extern int	DurablePinStatementSettings(bool distributed, bool by_index);
extern void DurableUnpinStatementSettings(int nest);

/* ---- plan.c ---- */
extern DurableResult DurableRun(DurableStatement *stmt, Datum *values,
								const char *nulls, int expected, long tcount);
extern DurableResult DurableRunHere(DurableStatement *stmt, Datum *values,
									const char *nulls, int expected);
extern bool DurableReadAsOfCaller(bool on);
extern bool DurableReadingAsOfCaller(void);

/* ---- direct.c and take.c: rows through the access methods, without SPI ---- */
#define DURABLE_MAX_DIRECT_COLUMNS 64
#define DURABLE_MAX_DIRECT_KEYS 3

/*
 * A table read or written through the access methods: its name, and the
 * columns used, by name and type (InvalidOid for any type: an enum's OID
 * differs between installations; its atttypids entry says which).  The
 * rest is kept per backend and found again when the table changes.
 */
typedef struct DurableDirectTable
{
	const char *schema;
	const char *name;
	const DurableColumn *columns;
	int			ncolumns;

	bool		registered;
	bool		resolved;
	Oid			relid;
	AttrNumber	attnums[DURABLE_MAX_DIRECT_COLUMNS];
	Oid			atttypids[DURABLE_MAX_DIRECT_COLUMNS];
	int16		attlens[DURABLE_MAX_DIRECT_COLUMNS];
	bool		attbyvals[DURABLE_MAX_DIRECT_COLUMNS];
} DurableDirectTable;

/* the equality of an index's leading columns, for its scan keys */
typedef struct DurableIndexKeys
{
	Oid			index;
	int			nkeys;
	RegProcedure equality[DURABLE_MAX_DIRECT_KEYS];
	Oid			collation[DURABLE_MAX_DIRECT_KEYS];
	AttrNumber	attnums[DURABLE_MAX_DIRECT_KEYS];	/* in the table */
} DurableIndexKeys;

extern Relation DurableDirectOpen(DurableDirectTable *table, LOCKMODE lockmode,
								  bool *resolved);
extern void DurableDirectResolve(DurableDirectTable *table, Relation rel);
/* what take.c and relocate.c did */
typedef enum DurableDirectResult
{
	DURABLE_DIRECT_NONE,		/* no row passed, or all were locked */
	DURABLE_DIRECT_DONE,
	DURABLE_DIRECT_BY_STATEMENT,	/* triggers, rules, row security or no index */
} DurableDirectResult;

/* a test of a row's columns, and a change of them, for take.c and relocate.c */
typedef bool (*DurableRowTest) (const Datum *values, const bool *isnull, void *arg);
typedef void (*DurableRowChange) (Datum *values, bool *isnull, void *arg);
/* a change that may decline: false leaves the row as it was, locked */
typedef bool (*DurableRowDecision) (Datum *values, bool *isnull, void *arg);

extern void DurableIndexKeysResolve(DurableIndexKeys *keys, const DurableDirectTable *table,
									Oid index);
extern void DurableIndexScanKeys(const DurableIndexKeys *keys, const Datum *values,
								 ScanKeyData *skeys);
extern bool DurableIndexKeysMatch(const DurableIndexKeys *keys, const Datum *values,
								  TupleTableSlot *slot);
extern void DurableDirectGetColumns(const DurableDirectTable *table, TupleTableSlot *slot,
									Datum *values, bool *isnull);
extern void DurableDirectSnapshot(void);
extern void DurableDirectChangedSince(const char *change);
extern bool DurableDirectWritable(Relation rel);
extern bool DurableDirectModifiable(Relation rel);
extern void *DurableDirectInShards(const void *use, size_t size, int32 partition,
								   const size_t *tables, int ntables, size_t index);
extern void *DurableDirectInReference(const void *use, size_t size,
									  const size_t *tables, int ntables);
extern void DurableDirectCheckPrivileges(Relation rel, AclMode perms);
extern EState *DurableDirectEState(Relation rel, AclMode perms, Bitmapset *inserted,
								   Bitmapset *updated, ResultRelInfo **rri);
extern Bitmapset *DurableDirectColumnSet(const DurableDirectTable *table, int from);
extern void DurableIndexFind(DurableIndexKeys *keys, const DurableDirectTable *table,
							 Relation rel, const char *name);
extern Relation DurableIndexOpen(DurableDirectTable *table, DurableIndexKeys *keys,
								 const char *name, Relation rel, LOCKMODE lockmode);

/*
 * A row read by the values of its table's primary key, or of its first
 * nkeys columns (no columns, for a read that only asks whether there is
 * such a row).
 */
typedef struct DurableKeyRead
{
	DurableDirectTable table;
	DurableIndexKeys keys;		/* nkeys given, the rest resolved */
} DurableKeyRead;

extern bool DurableReadByKey(DurableKeyRead *read, const Datum *keys,
							 Datum *values, bool *isnull);
extern DurableKeyRead *DurableKeyReadInPartition(DurableKeyRead *read,
												 int32 partition);
extern DurableKeyRead *DurableKeyReadInReference(DurableKeyRead *read);

/*
 * take.c: the first row of an index, in its order, that test passes,
 * locked as SELECT ... FOR UPDATE SKIP LOCKED would lock it, and updated
 * by change; columns[0, nread) are only read.  With the primary key as
 * index and its every column as key, waiting for the row's lock, it is the
 * row that UPDATE ... WHERE <the key> AND <test> updates.
 */
typedef struct DurableTake
{
	DurableDirectTable table;
	const char *index;			/* by name, in the table's schema; NULL for
								 * the primary key */
	DurableIndexKeys keys;		/* nkeys given, the rest resolved */
	int			nread;
	LockTupleMode lockmode;		/* as FOR UPDATE or FOR NO KEY UPDATE */
	LockWaitPolicy wait;		/* LockWaitSkip: as SKIP LOCKED */
} DurableTake;

extern DurableTake *DurableTakeInPartition(DurableTake *take, int32 partition);
extern DurableDirectResult DurableTakeFirst(DurableTake *take, const Datum *keys,
										  DurableRowTest test, DurableRowChange change,
										  void *arg, Datum *values, bool *isnull);
extern DurableDirectResult DurableTakeFirstDeciding(DurableTake *take, const Datum *keys,
												  DurableRowTest test,
												  DurableRowDecision decide, void *arg,
												  Datum *values, bool *isnull);

/*
 * relocate.c: the row of from with a primary key, deleted as DELETE
 * deletes it when test passes, and inserted into to as change makes it;
 * both tables name the same columns.
 */
typedef struct DurableRelocation
{
	DurableDirectTable from;
	DurableDirectTable to;
	DurableIndexKeys keys;		/* of from's primary key: nkeys given */
} DurableRelocation;

extern DurableRelocation *DurableRelocationInPartition(DurableRelocation *move,
													  int32 partition);
extern DurableDirectResult DurableRelocate(DurableRelocation *move, const Datum *keys,
										   DurableRowTest test, DurableRowChange change,
										   void *arg, Datum *values, bool *isnull);
extern void DurableInsertRow(Relation rel, const DurableDirectTable *table,
							 const Datum *values, const bool *isnull);

/* ---- delegate.c: on Citus, a statement run on its partition's node ---- */
extern bool DurableDelegationReady(void);
extern void DurableDelegationForget(void);
extern bool DurableDelegable(const DurableStatement *stmt);
extern char *DurableDelegatedCall(const DurableStatement *stmt);
extern Datum DurableDelegatedValues(const DurableStatement *stmt, Datum *values,
									const char *nulls);
extern void DurableReceiveValues(const DurableStatement *stmt, ArrayType *array,
								 Datum *values, char *nulls);

/*
 * A caller's result, kept around a look-up that runs a statement of its own
 * where any caller may be between two rows of its result: the version check
 * that a relcache invalidation makes due (cluster.c), which can arrive when
 * any statement takes a lock, and the delegation check (delegate.c).  The
 * look-up's result is freed and the caller's is the last one again.
 */
typedef struct DurableSavedResult
{
	SPITupleTable *tuptable;
	uint64		processed;
} DurableSavedResult;

static inline void
DurableSaveResult(DurableSavedResult *saved)
{
	saved->tuptable = SPI_tuptable;
	saved->processed = SPI_processed;
}

static inline void
DurableRestoreResult(const DurableSavedResult *saved)
{
	if (SPI_tuptable != saved->tuptable)
		SPI_freetuptable(SPI_tuptable);
	SPI_tuptable = saved->tuptable;
	SPI_processed = saved->processed;
}

/* ---- result.c ---- */
extern HeapTuple DurableGetRow(DurableResult res, uint64 row);
extern Datum DurableGetDatum(DurableResult res, uint64 row, int col,
							 bool *isnull);
extern bool DurableGetIsNull(DurableResult res, uint64 row, int col);
extern int64 DurableGetInt64(DurableResult res, uint64 row, int col);
extern int32 DurableGetInt32(DurableResult res, uint64 row, int col);
extern bool DurableGetBool(DurableResult res, uint64 row, int col);
extern char *DurableGetText(DurableResult res, uint64 row, int col);

/* ---- relcache.c: one relcache callback for all of durable's caches ---- */
extern void DurableForgetOnRelcacheInvalidation(void (*forget) (Datum arg, Oid relid));

/* ---- cluster.c: the installation the statements run on ---- */
extern bool DurableVersionNewer(const char *a, const char *b);
extern int	durable_node_id;
extern bool DurableDistributed(void);
extern bool DurableCitusWorker(void);
extern int32 DurableNodeId(void);
extern int32 DurableLocalGroup(void);
extern void DurableCheckTables(DurableStatement *stmt);

/* ---- schema_locks.c: durable's tables taken at once, without waiting ---- */
extern bool DurableTryLockSchemaTables(void);

/* ---- placement.c: on Citus, where a partition's rows are ---- */
typedef struct DurablePlacement
{
	int64		shard;			/* of durable.live_tasks (and its colocated) */
	int32		group;			/* the node's Citus group */
} DurablePlacement;

extern void DurablePlacePartitions(const int32 *partitions, int n,
								   DurablePlacement *places);
extern void DurableNodeOrder(int32 *partitions, DurablePlacement *places,
							 int n, uint32 turn);
extern int	DurableGroupByShard(const int32 *partitions, int n, int *order,
								int *bounds);
extern bool DurableNodeDown(int32 group);
extern void DurableNodeFailed(int32 group);

/* ---- shard.c: on Citus, a partition's shards on this node ---- */
/* the partition whose shard names name the reference tables' shards */
#define DURABLE_REFERENCE_PARTITION 0

extern int64 DurableEnterLocalShard(int32 partition);
extern bool DurableEnterLocalReference(void);
extern Oid	DurableLocalShardRelid(int32 partition, const char *table);
extern void DurableLocalShardWrote(void);
extern char *DurableLocalShardText(const char *sql, int32 partition);
extern bool DurableLocalPlanWrites(const char *name, SPIPlanPtr plan,
								   int32 partition);

/* ---- counters.c: what durable did, per queue, in shared memory ---- */
typedef enum DurableCounter
{
	DURABLE_COUNT_ENQUEUED,
	DURABLE_COUNT_CLAIMED,
	DURABLE_COUNT_COMPLETED,
	DURABLE_COUNT_FAILED,		/* failed attempts */
	DURABLE_COUNT_CANCELLED,
	DURABLE_COUNT_RETRIED,
	DURABLE_COUNT_LEASES_EXPIRED,
	DURABLE_COUNT_SENT_TO_REVIEW,
	DURABLE_COUNT_RESOLVED_MARK_COMMITTED,
	DURABLE_COUNT_RESOLVED_MARK_NOT_EXECUTED,
	DURABLE_COUNT_RESOLVED_MARK_FAILED,
	DURABLE_COUNT_RESOLVED_RETRY,
	DURABLE_COUNT_RESOLVED_CANCEL,
	DURABLE_COUNT_DEAD_LETTERED,	/* tasks that ended failed */
	DURABLE_COUNT_QUARANTINED,
	DURABLE_COUNT_REPLAYED,
	DURABLE_COUNT_MIGRATED,
	DURABLE_COUNT_STALE_WRITES,
	DURABLE_COUNT_VERSION_CONFLICTS,
	DURABLE_COUNT_IDEMPOTENT_REPLAYS,
	DURABLE_COUNT_EVENTS_EMITTED,
	DURABLE_COUNT_WAKEUPS,
	DURABLE_COUNT_RATE_LIMITED, /* claims deferred by a rate limit */
	DURABLE_COUNT_STEPS_STARTED,	/* attempts of steps */
	DURABLE_COUNT_STEPS_LEFT_IN_DOUBT,	/* by a lost lease */
	DURABLE_COUNT_DUPLICATE_EFFECTS,
	DURABLE_COUNT_FINISHED_AFTER_EXPIRY,	/* tasks that had lost a lease */
	DURABLE_COUNT_RECOVERED,	/* of those, the ones that completed */
	DURABLE_NCOUNTERS
} DurableCounter;

typedef enum DurableHistogram
{
	DURABLE_HIST_QUEUE_LATENCY, /* due (run_at) to claimed */
	DURABLE_HIST_RUN_TIME,		/* claimed to finished */
	DURABLE_HIST_RECOVERY_TIME, /* first expired lease to completed */
	DURABLE_NHISTOGRAMS
} DurableHistogram;

#define DURABLE_HISTOGRAM_BUCKETS 18
extern const double durable_histogram_bounds[DURABLE_HISTOGRAM_BUCKETS];

typedef struct DurableQueueCounters
{
	char		queue[NAMEDATALEN];
	uint64		counts[DURABLE_NCOUNTERS];
	uint64		buckets[DURABLE_NHISTOGRAMS][DURABLE_HISTOGRAM_BUCKETS + 1];
	uint64		sum_us[DURABLE_NHISTOGRAMS];
} DurableQueueCounters;

typedef struct DurableTickCounters
{
	uint64		ticks;
	TimestampTz last_tick_at;
	TimestampTz reset_at;
} DurableTickCounters;

extern int	durable_counters_queues;
extern bool durable_counting;
extern void DurableCountersRequestShmem(void);
extern bool DurableCountersAvailable(void);
extern void DurableCount(const char *queue, DurableCounter counter, int64 n);
extern void DurableCountNow(const char *queue, DurableCounter counter);
extern void DurableObserve(const char *queue, DurableHistogram histogram,
						   int64 usecs);
extern void DurableCountTick(TimestampTz now);
extern int	DurableCountersRead(DurableQueueCounters **result,
								DurableTickCounters *ticks);
extern void DurableCountersReset(void);

#endif							/* DURABLE_STORE_H */
