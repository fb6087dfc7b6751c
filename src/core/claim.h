/*-------------------------------------------------------------------------
 *
 * claim.h
 *	  What the claims of ready tasks share (claim.c, and claim_rate.c for
 *	  a queue whose tasks name rate limits): a claim's parameters, and the
 *	  SQL of the tasks it may take and of what it changes in them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_CLAIM_H
#define DURABLE_CLAIM_H

#include "core/core.h"

/* a task's pass as the claim order sorts it: a missing one last */
#define CLAIM_PASS(alias) "COALESCE(" alias ".fair_pass, 'Infinity'::float8)"
/*
 * Of a key's tasks (k, where says in which partitions), those running and
 * those ahead of the candidate c in claim order that could be claimed now,
 * counted up to the limit (claim.c: a concurrency limit's claim).
 */
#define KEY_BUSY(where) \
	"(SELECT pg_catalog.count(*) FROM (SELECT FROM durable.live_tasks k" \
	" WHERE " where " AND k.queue_name = $queue" \
	" AND k.concurrency_key = c.concurrency_key" \
	" AND k.state IN ('ready', 'waiting', 'running')" \
	" AND (k.state = 'running' OR k.run_at <= $now" \
	"  AND (k.priority > c.priority OR (k.priority = c.priority" \
	"   AND (" CLAIM_PASS("k") ", k.run_at, k.task_id)" \
	"    < (" CLAIM_PASS("c") ", c.run_at, c.task_id))))" \
	" LIMIT $concurrency_limit) k)"
/* a key's tasks in the queue's partitions, or in the one claimed (Citus) */
#define KEY_IN_QUEUE "k.partition_key = ANY ($partitions)"
#define KEY_IN_PARTITION \
	"k.partition_key = $partition AND k.partition_key = ANY ($partitions)"

/*
 * A claim's parameters, as its statements declare them: the partition,
 * the queue, now, how many tasks at most, the worker, the lease, its end,
 * the caller's role, the versions the worker runs and those it pins (NULL
 * for a worker that did not say what it runs); in a queue with a
 * concurrency limit also the queue's partitions, the limit and the keys
 * held.  The look-up's claim takes the first eight.  On Citus the probes
 * (sharded.c) read the first three of these values.
 */
enum
{
	CLAIM_PARTITION,
	CLAIM_QUEUE,
	CLAIM_NOW,
	CLAIM_BATCH,
	CLAIM_WORKER,
	CLAIM_LEASE,
	CLAIM_LEASE_UNTIL,
	CLAIM_ROLE,
	CLAIM_RUNS,
	CLAIM_PINS,
	CLAIM_PARTITIONS,
	CLAIM_CONCURRENCY_LIMIT,
	CLAIM_HELD,
	CLAIM_NPARAMS
};

/*
 * The versions a claim pins a task to: those it is pinned to, and for the
 * names it is not pinned to yet, the ones the worker starts new work
 * under ($pins, NULL for a worker that did not say what it runs).
 */
#define PINNED_VERSIONS \
	"CASE WHEN $pins::jsonb IS NULL THEN t.versions" \
	" ELSE $pins || COALESCE(t.versions, '{}') END"

/*
 * What a claim changes in the row it takes.  The claim that pins versions
 * is recorded as kind 'pinned' rather than 'claimed'; workflow_version
 * stays what the versions say of "workflow".
 */
#define CLAIM_UPDATE \
	"UPDATE durable.live_tasks t SET state = 'running', owner = $worker," \
	"  lease = $lease, lease_until = $lease_until, heartbeat_at = $now, progress = NULL," \
	"  progress_at = $now, fence = t.fence + 1, attempt = t.attempt + 1," \
	"  version = t.version + 1, claimed_at = $now, claim_seq = t.version + 1," \
	"  claim_kind = CASE WHEN (" PINNED_VERSIONS ") IS DISTINCT FROM t.versions" \
	"   THEN 'pinned' ELSE 'claimed' END, claim_role = $role," \
	"  versions = " PINNED_VERSIONS "," \
	"  workflow_version = (" PINNED_VERSIONS ") ->> 'workflow', rate_limited_by = NULL"

/*
 * A task a worker may take: unpinned, or pinned to versions it runs
 * ($runs, NULL for a worker that did not say, which takes any).
 */
#define RUNS_VERSIONS \
	" AND ($runs::jsonb IS NULL OR versions IS NULL" \
	"  OR durable.versions_run(versions, $runs))"

/*
 * The ready tasks of a partition a claim takes, first first, locked: of
 * those that name no rate limit (a claim that read its queue just before
 * the first task with limits made it rate-limited leaves that task to the
 * claims that check them).
 */
#define READY(columns, no_rate_limits) \
	"   SELECT " columns " FROM durable.live_tasks" \
	"   WHERE partition_key = $partition AND queue_name = $queue" \
	"   AND state IN ('ready', 'waiting') AND run_at <= $now" RUNS_VERSIONS \
	no_rate_limits \
	"   ORDER BY " DURABLE_CLAIM_ORDER \
	"   LIMIT $batch FOR UPDATE SKIP LOCKED"
#define NO_RATE_LIMITS "   AND rate_limits IS NULL"
#define READY_TO_CLAIM READY("task_id", NO_RATE_LIMITS)

/*
 * The tasks a claim in a queue with a concurrency limit may take, first
 * first: without a key, or of a key with fewer than limit busy (and held).
 */
#define LIMITED_READY(where, held, no_rate_limits) \
	"   FROM durable.live_tasks c" \
	"   WHERE partition_key = $partition AND queue_name = $queue" \
	"   AND state IN ('ready', 'waiting') AND run_at <= $now" \
	RUNS_VERSIONS no_rate_limits \
	"   AND (concurrency_key IS NULL OR " held \
	"    " KEY_BUSY(where) " < $concurrency_limit)" \
	"   ORDER BY " DURABLE_CLAIM_ORDER " LIMIT $batch"

/* claimed.c; the columns' declarations, for results that begin with them */
#define DURABLE_CLAIMED_COLUMNS \
	[DURABLE_CLAIMED_TASK_ID] = {"task_id", INT8OID}, \
	[DURABLE_CLAIMED_FENCE] = {"fence", INT8OID}, \
	[DURABLE_CLAIMED_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID}, \
	[DURABLE_CLAIMED_ATTEMPT] = {"attempt", INT4OID}, \
	[DURABLE_CLAIMED_PAYLOAD] = {"payload", JSONBOID}, \
	[DURABLE_CLAIMED_CHECKPOINT] = {"checkpoint", JSONBOID}, \
	[DURABLE_CLAIMED_VERSIONS] = {"versions", JSONBOID}, \
	[DURABLE_CLAIMED_RUN_AT] = {"run_at", TIMESTAMPTZOID}

extern const DurableColumn DurableClaimedColumns[DURABLE_CLAIMED_NCOLUMNS];
extern void DurableClaimPut(DurableResult res, const char *queue, TimestampTz now,
							Tuplestorestate *store, TupleDesc desc);

/* claim_node.c: what a node found for a claim of its partitions */
typedef struct DurableNodeClaim
{
	bool		asked;			/* the node was called (not all paused, not down) */
	int			claimed;		/* tasks, 0 or 1 */
	int32	   *expired;		/* partitions with expired leases */
	int			nexpired;
	int32	   *by_statement;	/* where the claim's statement must take */
	int			nby_statement;
} DurableNodeClaim;

extern bool DurableClaimInNodeReady(void);
extern int	DurableClaimInNode(const DurableQueue *settings, DurableNodeWalk *walk, int i,
							   const Datum *args, Tuplestorestate *store, TupleDesc desc,
							   DurableNodeClaim *found);

/* claim_rate.c */
extern int	DurableClaimRateLimited(bool limited, const Datum *args, const char *nulls,
									int wanted, const char *queue, const char *worker,
									TimestampTz now, Tuplestorestate *store,
									TupleDesc desc);

#endif							/* DURABLE_CLAIM_H */
