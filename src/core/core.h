/*-------------------------------------------------------------------------
 *
 * core.h
 *	  The core layer: tasks, steps, claims, recovery, budgets, queues,
 *	  waits, children, events, schedules, history, inbox and outbox,
 *	  request keys, access checks, the tick.  Connected to SPI by its
 *	  caller; never sees fcinfo.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_CORE_H
#define DURABLE_CORE_H

#include "store/store.h"

#include "utils/tuplestore.h"

/* ---- settings the core reads (process/durable.c defines them) ---- */
extern int	durable_vacuum_threshold;
extern int	durable_retention;
extern int	durable_inbox_retention;

/* ---- task.c: reading one task, appending its events ---- */
typedef struct DurableTask
{
	int32		partition;
	int64		task_id;
	DurableTaskState state;
	int64		fence;
	int32		attempt;
	int32		max_attempts;
	TimestampTz created_at;
	int64		deadline;		/* microseconds, or DURABLE_NO_DEADLINE */
	const char *class;
	const char *queue;
	const char *owner;			/* NULL unless running */
	TimestampTz lease_until;	/* 0 unless running */
	int32		retry_base;
	int32		retry_cap;
	bool		retry_limited;	/* the queue has a retry-token bucket */
	int32		version;		/* the task's event count */
	TimestampTz run_at;
	int32		steps_in_doubt; /* steps started or unknown */
	int32		checkpoint_version;
	bool		restricted;		/* its queue is restricted to roles */
	bool		spends;			/* it names spend budgets (spend.c) */
} DurableTask;

/* run_at of a task parked until a reconcile handler looks its step up */
#define DURABLE_AWAITING_RECONCILE DT_NOEND

extern bool DurableTaskFetch(int64 task_id, bool lock, DurableTask *task);
extern void DurableTaskFetchOrError(int64 task_id, bool lock, DurableTask *task);
DURABLE_NORETURN extern void DurableReportRefusal(int64 task_id, int64 fence);
extern void DurableTaskHeld(int64 task_id, int64 fence, DurableTask *task);
extern void DurableCheckTaskVisible(int64 task_id);
extern void DurableCheckFencedWrite(DurableResult res, int64 task_id,
									int64 fence, int queue_col,
									int restricted_col);
extern void DurableCheckTaskReadable(int64 task_id, const char *queue,
									 bool restricted);
extern void DurableTaskOutcome(int64 task_id, Tuplestorestate *store,
							   TupleDesc tupdesc);
extern void DurableCheckOperatorTask(int64 task_id);
extern bool DurableTaskInScope(int64 task_id);
extern void DurableCheckBatchAccess(const int64 *task_ids, char **queues,
									const bool *restricted, const bool *held,
									int n);
extern int32 DurableAppendEvent(const DurableTask *task, TimestampTz now,
								const char *kind, const char *actor,
								Jsonb *detail, const char *step,
								int32 doubt_delta);
extern void DurableTaskRequireRunning(const DurableTask *task);
extern bool DurableTaskIsTerminal(DurableTaskState state);
extern int64 DurableCancelledParent(const DurableTask *task);

/* ---- move.c: moving one task, and what its finish owes its family ---- */
typedef struct DurableMove
{
	DurableTaskState from_state;	/* the state the task must still be in */
	int64		fence;			/* the fence it must still carry */
	DurableTaskState to_state;
	bool		revoke;			/* increment the fence */
	TimestampTz run_at;			/* 0 keeps run_at */
	const char *stop_code;
	Jsonb	   *error;			/* NULL keeps last_error */
	Jsonb	   *result;			/* NULL keeps result */
	const char *kind;			/* the event's kind */
	const char *actor;
	Jsonb	   *detail;
	bool		allow_doubt;	/* move even with steps in doubt */
	bool		reset_attempts; /* a replay starts counting again */
	bool		give_back_attempt;	/* a release: the claim's attempt did not run */
} DurableMove;

/* what a move read of the task it moved */
typedef struct DurableMoved
{
	const char *queue;
	const char *owner;
	bool		restricted;
} DurableMoved;

/* what a finish read of the task, from its row in history */
typedef struct DurableFinished
{
	DurableMoved moved;
	int64		parent_id;		/* 0 for none */
	Jsonb	   *waits;			/* NULL for none */
	bool		has_claimed_at; /* a lease ended with the finish */
	TimestampTz claimed_at;
	int32		attempt;
} DurableFinished;

extern bool DurableMoveTask(const DurableTask *task, const DurableMove *move,
							TimestampTz now, DurableMoved *moved);
extern void DurableMoveLockedTask(const DurableTask *task,
								  const DurableMove *move, TimestampTz now);
extern void DurableMoveTaskFenced(int64 task_id, const DurableMove *move,
								  TimestampTz now);
extern void DurableCancelLockedTask(const DurableTask *task, const char *reason,
									int64 parent_id, TimestampTz now);

/* ---- claim.c: leases ---- */
typedef enum DurableClaimKind
{
	DURABLE_CLAIM_READY,		/* ready work: durable_claim's rows */
	DURABLE_CLAIM_RECONCILE		/* steps awaiting a look-up:
								 * durable_claim_reconcile's rows */
} DurableClaimKind;

extern int	DurableClaim(DurableClaimKind kind, const char *queue,
						 const char *worker, Interval *lease, int batch,
						 Jsonb *runs, Tuplestorestate *store,
						 TupleDesc desc);
extern void DurableReleaseTask(int64 task_id, int64 fence, const char *reason);

/* what a claim of ready work returns: durable_claim's columns, then run_at */
enum
{
	DURABLE_CLAIMED_TASK_ID,
	DURABLE_CLAIMED_FENCE,
	DURABLE_CLAIMED_LEASE_UNTIL,
	DURABLE_CLAIMED_ATTEMPT,
	DURABLE_CLAIMED_PAYLOAD,
	DURABLE_CLAIMED_CHECKPOINT,
	DURABLE_CLAIMED_VERSIONS,
	DURABLE_CLAIMED_RUN_AT,		/* for the queue latency, not returned */
	DURABLE_CLAIMED_NCOLUMNS
};

/* ---- finish.c: a finish counted ---- */
extern void DurableCountRecovery(const char *queue, int64 task_id, int32 attempt,
								 bool completed, TimestampTz now);

/* ---- finish_direct.c: a finish on one server without a statement ---- */
extern Datum DurableTaskStateValue(Oid typid, DurableTaskState state);
extern DurableDirectResult DurableFinishDirectly(int64 task_id, const DurableMove *move,
												 TimestampTz now, DurableFinished *finished);

/* ---- transition_direct.c: a move between live states without a statement ---- */
extern DurableDirectResult DurableTransitionDirectly(int64 task_id, const DurableMove *move,
													 int32 max_in_doubt, TimestampTz now,
													 DurableMoved *moved);

/* ---- heartbeat_direct.c: one task's heartbeat without a statement ---- */
extern DurableDirectResult DurableHeartbeatDirectly(int64 task_id, int64 fence,
													text *progress, Interval *lease,
													TimestampTz now,
													TimestampTz *lease_until,
													DurableMoved *moved);

/* ---- claim_direct.c: the usual claim without a statement ---- */
extern DurableDirectResult DurableClaimOneDirectly(int32 partition, Datum queue,
												 TimestampTz now, Datum worker,
												 Datum lease, Datum lease_until,
												 Datum role, Datum *result,
												 bool *isnull);

/* what a claim that chooses does with a candidate that names rate limits */
typedef enum DurableChoice
{
	DURABLE_CHOOSE_TAKE,
	DURABLE_CHOOSE_DEFER,		/* until the time, for the limit it gives */
	DURABLE_CHOOSE_PASS			/* left, locked, for a later claim */
} DurableChoice;
typedef DurableChoice (*DurableClaimChooser) (int64 task_id, Jsonb *rate_limits,
											  void *arg, TimestampTz *until,
											  const char **limit);
extern DurableDirectResult DurableClaimChoosing(int32 partition, Datum queue,
												TimestampTz now, Datum worker,
												Datum lease, Datum lease_until,
												Datum role, const int64 *passed,
												int npassed,
												DurableClaimChooser choose,
												void *choose_arg, int64 *task_id,
												DurableChoice *choice,
												Datum *result, bool *isnull);

/* ---- begin.c: a claimed task begun; a lease that ran out before ---- */

/* how many times a task's lease may run out unbegun without costing it */
#define DURABLE_UNBEGUN_EXPIRIES 10
/* what durable_reconcile reports for such a lease */
#define DURABLE_NOT_BEGUN "not_begun"

extern void DurableBeginTask(int64 task_id, int64 fence);
extern bool DurableCountUnbegunExpiry(const DurableTask *task, int32 *returned);

/* ---- heartbeat.c: leases renewed ---- */
extern TimestampTz DurableHeartbeatTask(int64 task_id, int64 fence,
										text *progress, Interval *lease);
extern void DurableHeartbeatBatch(ArrayType *ids, ArrayType *fences,
								  Interval *lease, int n, int64 *task_ids,
								  TimestampTz *until, bool *held);

/* ---- commit.c: a task's commit, failure or cancellation ---- */
extern void DurableCommitTask(int64 task_id, int64 fence, Jsonb *result);
extern void DurableCommitAndClaim(int64 task_id, int64 fence, Jsonb *result,
								  const char *worker, Interval *lease,
								  int batch, Jsonb *runs,
								  Tuplestorestate *store, TupleDesc desc);
extern void DurableCommitBatch(ArrayType *ids, ArrayType *fences,
							   ArrayType *results, int n);
extern const char *DurableFailTask(int64 task_id, int64 fence,
								   const char *error_class_name,
								   Jsonb *error, bool has_retry_after,
								   int64 retry_after);
extern void DurableCancelTask(int64 task_id, const char *reason);

/* ---- wait.c: named waits ---- */
typedef struct DurableWait
{
	const char *kind;			/* sleep, event, spawn, join */
	Jsonb	   *args;			/* what the first call asked */
	const char *status;
	TimestampTz until;			/* its deadline, or 0 */
	Jsonb	   *payload;		/* what it ended with, or NULL */
	int64		child_id;		/* a spawn's child */
} DurableWait;

extern bool DurableWaitFetch(const DurableTask *task, const char *name,
							 DurableWait *wait);
extern void DurableWaitCheck(const DurableTask *task, const char *name,
							 const DurableWait *wait, const char *kind,
							 Jsonb *args);
extern void DurableWaitRecord(const DurableTask *task, const char *name,
							  const char *kind, Jsonb *args,
							  const char *status, TimestampTz until,
							  Jsonb *payload, int64 child_id, TimestampTz now);
extern Jsonb *DurableWaitEnding(const char *status, Jsonb *payload,
								TimestampTz now);
extern void DurableWaitResolve(DurableTask *task, const char *name,
							   const char *status, Jsonb *payload,
							   TimestampTz now);
extern void DurableWaitPark(DurableTask *task, const char *name,
							const char *kind, TimestampTz until,
							TimestampTz now);
extern const char *DurableSleep(int64 task_id, int64 fence, const char *name,
								TimestampTz until, const Interval *duration,
								TimestampTz now);

/* ---- child.c: children ---- */
struct DurableEnqueueRequest;
extern int64 DurableSpawn(int64 fence, const char *name,
						  const struct DurableEnqueueRequest *req,
						  TimestampTz now);
extern const char *DurableJoin(int64 task_id, int64 fence, const char *name,
							   ArrayType *names, const Interval *timeout,
							   TimestampTz now, Jsonb **report);

/* ---- wake.c: waking a waiting task ---- */
extern bool DurableWakeWait(int64 task_id, const char *name, Jsonb *ending,
							Jsonb *detail, TimestampTz now);
extern void DurableWakeParent(int64 parent_id, int64 child_id, TimestampTz now);

/* ---- event.c: events that tasks await ---- */
extern bool DurableEmit(const char *queue, const char *event, Jsonb *payload,
						TimestampTz now);
extern const char *DurableAwait(int64 task_id, int64 fence, const char *name,
								const char *event, const Interval *timeout,
								const char *queue, TimestampTz now,
								Jsonb **payload);

/* ---- budget.c: the retry budget applied ---- */
extern int64 DurableRetryWait(const DurableTask *task, int64 retry_after);
extern int64 DurableRetryWaitFor(const DurableTask *task, const char *activity_id,
								 int32 attempt, int64 retry_after);
extern void DurableForgetRetryBuckets(const char *queue);
extern TimestampTz DurableTakeRetryToken(const DurableTask *task,
										 TimestampTz now);
extern void DurableBeginRetryTokens(void);
extern void DurableTakeOwedTokens(TimestampTz now);
extern TimestampTz DurableScheduleRetry(const DurableTask *task,
										TimestampTz now, int64 wait,
										DurableDetail *detail);

extern void DurableNextActionMove(const DurableTask *task,
								  DurableNextAction action, TimestampTz now,
								  int64 wait, DurableDetail *detail,
								  DurableMove *move);

/* ---- queue.c ---- */
typedef struct DurableQueue
{
	int32		partition_base;
	int32		partitions;
	Interval	lease;
	int32		max_attempts;
	bool		has_deadline;
	Interval	deadline;
	bool		notify;
	bool		paused;
	bool		restricted;		/* to the roles granted (access.c) */
	int32		concurrency_limit;	/* running tasks per key, 0 for no limit */
	bool		fair;			/* shared between fairness keys (fairness.c) */
	bool		rate_limited;	/* has tasks that name rate limits */
	bool		has_version_timeout;
	Interval	version_timeout;
	int			npaused_partitions;
	int32	   *paused_partitions;	/* partition keys */
} DurableQueue;

/* settings to create a queue with, or to change (0 or NULL: none, keep) */
typedef struct DurableQueueSettings
{
	int32		partitions;		/* create only */
	Interval   *lease;
	int32		max_attempts;
	int32		retry_base;
	int32		retry_cap;
	Interval   *deadline;
	int32		retry_capacity;
	double		retry_refill_rate;
	Interval   *progress_timeout;
	bool		has_notify;		/* alter: whether notify is given */
	bool		notify;
	int32		concurrency_limit;
	Interval   *version_timeout;
	bool		clear_deadline; /* alter only: remove an optional setting */
	bool		clear_retry_capacity;
	bool		clear_progress_timeout;
	bool		clear_concurrency_limit;
	bool		clear_version_timeout;
} DurableQueueSettings;

extern void DurableQueueGet(const char *queue, DurableQueue *result);
extern bool DurableQueueRestricted(const char *queue);
extern void DurableQueueGetShared(const char *queue, DurableQueue *result);
extern void DurableQueueGetForDrop(const char *queue, DurableQueue *result);
extern void DurableReportNoQueue(const char *queue);
extern int32 DurableQueuePartition(const DurableQueue *queue, int index);
extern ArrayType *DurableQueuePartitionArray(const DurableQueue *queue);
extern void DurableCreateQueue(const char *queue,
							   const DurableQueueSettings *settings);
extern void DurableAlterQueue(const char *queue,
							  const DurableQueueSettings *settings);
extern void DurableCheckQueuePartition(const char *queue,
									   const DurableQueue *settings,
									   int32 partition);
extern bool DurablePartitionPaused(const DurableQueue *queue, int32 partition);
extern void DurableSetQueuePaused(const char *queue, int32 partition,
								  bool paused);

/* ---- drop.c ---- */
extern void DurableDropQueue(const char *queue, bool cascade);
extern DurableResult DurableRunInQueue(DurableStatement *stmt, Datum *values,
									   const char *nulls, int expected,
									   const char *queue);

/* ---- enqueue.c ---- */
/* the channel on which durable announces ready work; the payload is the queue */
#define DURABLE_READY_CHANNEL "durable_ready"

typedef struct DurableEnqueueRequest
{
	const char *queue;
	Jsonb	   *payload;
	const char *idempotency_key;	/* or NULL */
	TimestampTz run_at;			/* 0: now */
	int32		priority;
	const char *class;
	int32		max_attempts;	/* 0: the queue's */
	Interval   *deadline;		/* NULL: the queue's */
	text	   *workflow_version;
	Jsonb	   *metadata;
	const char *concurrency_key;	/* or NULL */
	const char *fairness_key;	/* or NULL */
	Jsonb	   *rate_limits;	/* or NULL (rate_limits.c) */
	ArrayType  *budgets;		/* spend budgets, or NULL (spend.c) */
	ArrayType  *inherited_budgets;	/* a child's: its parent's, or NULL */
	Numeric		spend_limit;	/* the task's own limit, or NULL */
	bool		admitted_by_caller; /* to its fair queue's order (fairness.c) */
	int64		parent_id;		/* 0: none */
	bool		has_partition;	/* partition chosen by the caller */
	int32		partition;
} DurableEnqueueRequest;

extern void DurableCheckKey(const char *key, const char *what);
extern int64 DurableEnqueue(const DurableEnqueueRequest *req,
							const DurableQueue *settings, TimestampTz now);
extern int64 DurableEnqueueTask(const DurableEnqueueRequest *req);
extern void DurableEnqueueBatch(const DurableEnqueueRequest *req,
								ArrayType *payloads, ArrayType *keys,
								ArrayType *ckeys, ArrayType *fkeys, int n,
								int64 *result);
extern int64 DurableEnqueuedBefore(int32 partition, const char *queue,
								   const char *key, bytea *request_hash,
								   Jsonb *payload);
extern int32 DurableQueueKeyPartition(const DurableQueue *settings,
									  const char *key);
extern int32 DurableTaskPartition(const DurableQueue *settings, const char *key,
								  const char *concurrency_key);

/*
 * The order in which claims take ready tasks, tasks_claimable's: by
 * priority, then in a fair queue by pass (fairness.c), then by due time.
 */
#define DURABLE_CLAIM_ORDER "priority DESC, fair_pass, run_at, task_id"

/* ---- fairness.c: fairness between the keys of a queue ---- */
#define DURABLE_MAX_FAIRNESS_WEIGHT 1000000	/* as fairness_weights checks */
extern void DurableMakeQueueFair(const char *queue, const DurableQueue *settings);
extern double DurableFairPass(int32 partition, const char *queue, int32 priority,
							  const char *key);
extern void DurableAdmitEnqueued(const int64 *task_ids, const char *const *keys,
								 int n, TimestampTz now);
extern void DurableSetFairness(const char *queue, const char *key, double weight);
extern uint64 DurableAdmitFairTasks(const int32 *partitions, uint64 npartitions,
									TimestampTz now, int batch);

/* ---- spend.c: spend budgets, reserved by steps and settled ---- */
extern void DurableCreateBudget(const char *name, Numeric amount, const Interval *period);
extern void DurableAlterBudget(const char *name, Numeric amount, const Interval *period);
extern void DurableDropBudget(const char *name);
extern ArrayType *DurableBudgetsCheck(ArrayType *budgets);
extern void DurableSetTaskBudgets(int64 task_id, ArrayType *budgets, ArrayType *inherited,
								  Numeric spend_limit);
extern ArrayType *DurableTaskBudgets(const DurableTask *task);
extern uint64 DurableMaintainBudgets(TimestampTz now, int batch);

/* ---- samples.c: the queues sampled once a minute ---- */
extern uint64 DurableSampleQueues(TimestampTz now);
extern void DurableSpendReserve(const DurableTask *task, const char *step, Numeric reserve,
								TimestampTz now, DurableDetail *detail);
extern void DurableSpendSettle(const DurableTask *task, const char *step, bool completed,
							   Numeric spent, TimestampTz now, DurableDetail *detail);
extern void DurableSpendSettleTask(const DurableTask *task, TimestampTz now);

/* ---- stream.c: the streams of running tasks ---- */
/* the channel an append or a close notifies; the payload is the task id */
#define DURABLE_STREAM_CHANNEL "durable_stream"

extern int64 DurableStreamAppend(int64 task_id, int64 fence, const char *stream,
								 Jsonb *chunk);
extern int64 DurableStreamClose(int64 task_id, int64 fence, const char *stream);
extern void DurableStreamRead(int64 task_id, const char *stream, int64 after,
							  int32 max, Tuplestorestate *store, TupleDesc tupdesc);

/* ---- rate_limits.c: the units of rate limits tasks take ---- */
typedef enum DurableRateOutcome
{
	DURABLE_RATE_TAKEN,
	DURABLE_RATE_DEFERRED,
	DURABLE_RATE_BUSY			/* a bucket is another claim's */
} DurableRateOutcome;

typedef struct DurableRateDeferral
{
	TimestampTz until;			/* when the task's units will fit */
	const char *limit;			/* the limit that holds it back the longest */
	int64		units;			/* of it */
} DurableRateDeferral;

extern void DurableCheckRateLimitName(const char *name);
extern const char *DurableRateLimitsCheck(Jsonb *limits);
extern void DurableRateLimitsMakeBuckets(Jsonb *limits, int32 partition,
										 TimestampTz now);
extern void DurableMakeQueueRateLimited(const char *queue,
										const DurableQueue *settings);
extern void DurableSetRateLimit(const char *name, int32 rate,
								const Interval *per, int32 burst);
extern void DurableDropRateLimit(const char *name);
extern DurableRateOutcome DurableRateLimitsTake(int32 partition, Jsonb *limits,
												TimestampTz now,
												DurableRateDeferral *deferral);

/* ---- flow_keys.c: a key's calls coalesced into one task ---- */
extern int64 DurableDebounce(const char *queue, const char *key, Jsonb *payload,
							 const Interval *delay, const Interval *max_wait,
							 bool trailing);
extern int64 DurableThrottle(const char *queue, const char *key, Jsonb *payload,
							 const Interval *per);

/* ---- access.c: which roles may use a queue ---- */
typedef enum DurableQueuePrivilege
{
	DURABLE_PRIV_ENQUEUE,
	DURABLE_PRIV_WORK
} DurableQueuePrivilege;

extern void DurableCheckQueueAccess(const char *queue, DurableQueuePrivilege what);
extern void DurableCheckRestrictedQueue(const char *queue, bool restricted,
										DurableQueuePrivilege what);
extern void DurableChangeQueueGrant(const char *queue, Oid grantee,
									bool enqueue, bool work, bool grant);
extern bool DurableMayUseQueue(const char *queue, DurableQueuePrivilege what);
DURABLE_NORETURN extern void DurableReportTaskDenied(int64 task_id);
DURABLE_NORETURN extern void DurableReportUnknownTask(int64 task_id);
extern bool DurableMayWorkOnEveryQueue(void);
extern bool DurableCallerIsQueueOperator(void);
extern ArrayType *DurableQueuesInScope(MemoryContext result_context);
extern bool DurableScopeLoaded(void);
extern bool DurableCallerSeesEveryQueue(void);
extern bool DurableQueueInScope(const char *queue, int len);
extern void DurableCheckOperatorQueue(const char *queue);
extern void DurableCheckTaskAccess(int64 task_id, const char *queue,
								   bool restricted);
extern void DurableCheckTasksAccess(const int64 *task_ids, char **queues,
									const bool *restricted, int n);
extern void DurableDropQueueGrants(const char *queue);

/* ---- step.c: a step's rows (fetch, in doubt, change state, settle) ---- */
typedef struct DurableStep
{
	const char *name;
	DurableStepState state;
	const char *class;
	int32		version;
	int32		attempt;
	int32		ordinal;
	const char *idempotency_key;
	bytea	   *request_hash;
	Jsonb	   *result;
	const char *receipt;
	const char *effect_id;		/* the last receipt's, by DurableStepFetch */
	const char *compensates;
} DurableStep;

typedef struct DurableStepChange
{
	DurableStepState to_state;
	bool		evidence_only;	/* record evidence, keep the state */
	bool		new_attempt;	/* attempt + 1 */
	bool		clear_evidence; /* a new attempt forgets the old receipt */
	Jsonb	   *result;
	const char *receipt;
	const char *effect_id;
	Jsonb	   *evidence;
	const char *error_class;
	Jsonb	   *error;
	const char *kind;			/* the event's kind */
	const char *actor;
	DurableDetail *detail;		/* extra detail, or NULL */
	Numeric		reserve;		/* to STARTED: from the task's budgets, or NULL */
	Numeric		spent;			/* to COMMITTED: what the step spent, or NULL */
} DurableStepChange;

/* prefix of the steps durable_compensate plans */
#define DURABLE_COMPENSATION_PREFIX "compensate:"

/*
 * The longest name a step can be planned with: its compensation step,
 * "compensate:<name>", must still be a name the API takes.
 */
#define DURABLE_MAX_STEP_NAME_LEN \
	(DURABLE_MAX_NAME_LEN - (int) (sizeof(DURABLE_COMPENSATION_PREFIX) - 1))

extern bool DurableStepFetch(const DurableTask *task, const char *name,
							 DurableStep *step);
extern void DurableStepFetchOrError(const DurableTask *task, const char *name,
									DurableStep *step);
extern bool DurableStepInDoubt(const DurableTask *task, DurableStep *step);
extern char **DurableUnsettledSteps(const DurableTask *task, uint64 *n);
extern void DurableStepCheckVersion(const DurableTask *task,
									const DurableStep *step, int32 expected);
extern void DurableStepChangeState(DurableTask *task, DurableStep *step,
								   const DurableStepChange *change,
								   TimestampTz now);
extern bool DurableStepStateInDoubt(DurableStepState state);
extern bool DurablePlanStep(DurableTask *task, const char *name,
							const char *class, Jsonb *request,
							const char *target, const char *compensates,
							TimestampTz now, DurableStep *step);
extern void DurableStepGetOrPlan(int64 task_id, int64 fence, const char *name,
								 const char *class, Jsonb *request,
								 const char *target, DurableStep *step);
extern int32 DurableStepStart(int64 task_id, int64 fence, const char *name,
							  int32 expected, Numeric reserve);
extern int32 DurableStepUnknown(int64 task_id, int64 fence, const char *name,
								int32 expected, const char *reason);
extern const char *DurableSettleStep(DurableTask *task, DurableStep *step,
									 DurableRecoveryAction action,
									 const char *actor, const char *receipt,
									 Jsonb *evidence, Numeric spent,
									 TimestampTz now);

/* ---- outcome.c: what a step's outcome does to its task ---- */
typedef struct DurableCompensation
{
	const char *name;			/* the compensation step */
	const char *compensates;	/* the step it compensates */
	DurableStep step;
} DurableCompensation;

extern void DurableCommitStep(int64 task_id, int64 fence, const char *name,
							  int32 expected, Jsonb *result, Numeric spent);
extern const char *DurableFailStep(int64 task_id, int64 fence, const char *name,
								   const char *error_class_name, Jsonb *error,
								   int64 retry_after);
extern const char *DurableRecordReceipt(int64 task_id, int64 fence,
										const char *name,
										DurableReceipt receipt,
										const char *receipt_name,
										const char *effect_id,
										Jsonb *evidence);
extern int32 DurableSaveCheckpoint(int64 task_id, int64 fence,
								   Jsonb *checkpoint, int32 expected);
extern uint64 DurableCompensate(int64 task_id, int64 fence, int nclasses,
								const char **names, const char **classes,
								DurableCompensation **steps);

/* ---- recovery.c: judging the steps in doubt of a task ---- */
typedef struct DurableVerdict
{
	DurableRecoveryAction action;	/* the task's: the most cautious */
	int			steps;			/* steps judged */
	DurableStep deciding;		/* the step whose action is the task's */
	int64		retry_wait;		/* microseconds before a retry */
} DurableVerdict;

extern bool DurableJudgeSteps(DurableTask *task, const char *except,
							  bool apply, const char *actor, TimestampTz now,
							  DurableDetail *detail, DurableVerdict *verdict);
extern void DurableJudgeTask(const DurableTask *task, DurableVerdict *verdict);
extern void DurableVerdictMove(const DurableTask *task,
							   const DurableVerdict *verdict, TimestampTz now,
							   DurableDetail *detail, DurableMove *move);
extern bool DurableReleaseMove(DurableTask *task, const char *actor,
							   TimestampTz now, DurableDetail *detail,
							   DurableMove *move);

/* ---- part.c ---- */
typedef uint64 (*DurablePartFunction) (void *arg);
extern void DurablePartsBegin(TimestampTz now);
extern char **DurableFailingParts(const char *prefix, uint64 *count);
extern void DurablePartFailedWith(const char *part, const char *sqlstate,
								  const char *message, bool unreachable);
extern void DurablePartFailed(const char *part, const ErrorData *edata);
extern void DurablePartSucceeded(const char *part);
extern void DurablePartitionPartsDone(const char *what, const int32 *looked_at,
									  uint64 nlooked_at, const int32 *with_work,
									  uint64 nwith_work);
extern bool DurablePartForget(const char *part);
extern bool DurableTry(DurablePartFunction fn, void *arg, uint64 *done,
					   ErrorData **error);
extern bool DurableTryPart(DurablePartFunction fn, void *arg, uint64 *done,
						   ErrorData **error);
extern void DurableBoundTickLockWaits(void);
extern bool DurablePartBlocked(const ErrorData *edata);
extern bool DurableRunPart(const char *part, DurablePartFunction fn, void *arg,
						   uint64 *done);
extern bool DurableNodeUnreachable(const ErrorData *edata);

/* ---- reconcile.c ---- */
#define DURABLE_STUCK_CHANNEL "durable_stuck"
typedef void (*DurableSettledCallback) (int64 task_id, const char *action,
										void *arg);
extern uint64 DurableReconcilePartition(int32 partition, const char *queue,
										TimestampTz now, int batch,
										DurableSettledCallback callback,
										void *arg);
extern const char *DurableExpireLease(int64 task_id, const char *reason,
									  const char *actor);
extern uint64 DurableRaiseStuckAlarms(int32 partition, const char *queue,
									  TimestampTz now, int batch,
									  DurableSettledCallback callback,
									  void *arg);

/* ---- operations.c: what operators do ---- */
typedef enum DurableResolveDecision
{
	DURABLE_RESOLVE_MARK_COMMITTED,
	DURABLE_RESOLVE_MARK_NOT_EXECUTED,
	DURABLE_RESOLVE_MARK_FAILED,
	DURABLE_RESOLVE_RETRY,
	DURABLE_RESOLVE_CANCEL
} DurableResolveDecision;

extern DurableResolveDecision DurableParseResolveDecision(const char *name);
extern const char *DurableResolve(int64 task_id, DurableResolveDecision decision,
								  const char *operator_name, Jsonb *evidence,
								  const char *step_name, Numeric spent);
extern uint64 DurableReplayDeadLetters(const char *queue, int32 batch,
									   int32 partition, const char *reason,
									   const char *actor, int64 **replayed);
extern const char *DurableReplayDeadLetter(int64 task_id, const char *actor);
extern void DurableQuarantine(int64 task_id, const char *reason,
							  const char *actor);
extern const char *DurableRecoveryActionOf(int64 task_id);

/* ---- versions.c: what workers run, migrations, tasks no worker runs ---- */
#define DURABLE_RECONCILER_ACTOR "durable reconciler"

typedef void (*DurableMigratedCallback) (int64 task_id, const char *state,
										 Jsonb *from, Jsonb *to,
										 const char *action, void *arg);

typedef struct DurableMigration
{
	Jsonb	   *from;			/* the versions to migrate from ('{}': any) */
	Jsonb	   *to;				/* the names to change, with their versions */
	const char *operator_name;
	Jsonb	   *evidence;
	bool		dry_run;		/* say what would move, move nothing */
	DurableMigratedCallback report; /* each task, or NULL */
	void	   *arg;
} DurableMigration;

extern void DurableRecordWorker(const char *queue, const char *worker,
								Jsonb *runs, TimestampTz now);
extern void DurableMigrateTask(int64 task_id, const DurableMigration *m);
extern uint64 DurableMigrateQueue(const char *queue, int32 batch,
								  const DurableMigration *m);
extern uint64 DurableReviewUnrunnable(TimestampTz now, int batch,
									  DurableSettledCallback callback,
									  void *arg);

/* ---- inbox.c ---- */
extern int32 DurableQueuePairPartition(const DurableQueue *queue,
									   const char *a, const char *b);
extern bool DurableInboxReceive(const char *queue, const char *consumer,
								const char *message_id, Jsonb *payload);

/* ---- outbox.c ---- */
extern int64 DurableOutboxEmit(const char *queue, const char *topic,
							   const char *key, Jsonb *payload);
extern void DurableOutboxClaim(const char *queue, const char *publisher,
							   int32 batch, Interval *lease,
							   Tuplestorestate *store);
extern uint64 DurableOutboxAck(const char *queue, Datum *ids, int nids,
							   int64 fence);

/* ---- request.c: request-level idempotency ---- */
typedef struct DurableRequestStatus
{
	const char *status;			/* started, in_progress, completed */
	const char *recovery_point;
	int64		fence;			/* 0 unless started */
	Datum		response;
	bool		response_null;
} DurableRequestStatus;

extern void DurableIdempotentBegin(const char *queue, const char *scope,
								   const char *key, Jsonb *request,
								   Interval *lock, DurableRequestStatus *out);
extern void DurableIdempotentAdvance(const char *queue, const char *scope,
									 const char *key, int64 fence,
									 text *recovery_point, Interval *lock);
extern void DurableIdempotentFinish(const char *queue, const char *scope,
									const char *key, int64 fence,
									Jsonb *response, Interval *retention);

/* ---- retention.c ---- */
extern uint64 DurableApplyRetention(TimestampTz now, int batch,
									DurableSettledCallback callback, void *arg);

/* ---- concurrency.c ---- */
extern uint64 DurableRetireConcurrencyKeys(const int32 *partitions,
										   uint64 npartitions, TimestampTz now,
										   int batch);

/* ---- tick.c ---- */
extern uint64 DurableReconcileTick(int batch, DurableSettledCallback callback,
								   void *arg);
extern uint64 DurableReconcileQueue(const char *queue, int batch,
									DurableSettledCallback callback, void *arg);

/* ---- vacuum.c ---- */
extern bool DurableTasksNeedVacuum(void);
extern void DurableVacuumTasks(void);

/* ---- days.c: the days of history, made ahead ---- */
extern void DurableEnsureHistoryDays(TimestampTz now);
extern void DurableMakeHistoryDays(TimestampTz now);

/* ---- keys of this installation ---- */
extern char *DurableInstallationId(void);

/* ---- schedule.c ---- */
extern TimestampTz DurableScheduleSet(const char *name, const char *text,
									  const char *zone, const char *queue,
									  Jsonb *payload, bool backfill,
									  TimestampTz now);
extern bool DurableUnschedule(const char *name);
extern TimestampTz DurableSchedulePause(const char *name, bool pause,
										TimestampTz now);
extern int64 DurableScheduleTrigger(const char *name, TimestampTz now);
extern uint64 DurableRunSchedules(TimestampTz now, int batch,
								  DurableSettledCallback callback, void *arg);

/* ---- sharded.c: the hot calls on Citus, one node at a time ---- */
typedef struct DurableNodeWalk
{
	int32	   *partitions;		/* in the order a claim looks at them */
	DurablePlacement *places;	/* theirs */
	Bitmapset  *reached;		/* the groups read in this claim */
} DurableNodeWalk;

extern int32 *DurableClaimOrder(const DurableQueue *settings, uint32 turn,
								DurableNodeWalk *walk);
extern bool DurableClaimProbe(DurableNodeWalk *walk, int i, Datum partition,
							  Datum queue, Datum now, bool *ready, bool *expired);
extern bool DurableClaimWalkHere(const DurableNodeWalk *walk, int i);
extern bool DurableOnWalkNode(DurableNodeWalk *walk, int i, DurablePartFunction fn,
							  void *arg);
extern bool DurableExpiredHere(Datum partition, Datum now);
extern void DurableHeartbeatBatchSharded(ArrayType *ids, ArrayType *fences,
										 Interval *lease, int n, int64 *task_ids,
										 TimestampTz *until, bool *held);

/* ---- delegated.c: on Citus, the statements run for another node ---- */
extern DurableStatement DurableEnqueueStatement;	/* enqueue.c */
extern DurableStatement DurableClaimOneStatement;	/* claim.c */
extern DurableStatement DurableTransitionStatement; /* move.c */
extern DurableStatement DurableFinishStatement; /* move.c */
extern DurableStatement DurableStreamAppendStatement;	/* stream.c */
extern DurableStatement DurableClaimInNodeStatement;	/* claim_node.c */
extern void DurableRunDelegated(const char *name, int32 partition,
								ArrayType *sent, int expected,
								Tuplestorestate *store, TupleDesc desc);

#endif							/* DURABLE_CORE_H */
