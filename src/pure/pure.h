/*-------------------------------------------------------------------------
 *
 * pure.h
 *	  The pure layer: decision tables, retry delays, digests and keys,
 *	  bounds of times and intervals, cron expressions, event details.  No
 *	  SPI and no fcinfo; the fuzz target links it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_PURE_H
#define DURABLE_PURE_H

#include "durable.h"

/* ---- decision.c: the decision tables of docs/design.md section 3 ---- */
typedef enum DurableErrorClass
{
	DURABLE_ERROR_TRANSIENT,
	DURABLE_ERROR_PERMANENT,
	DURABLE_ERROR_UNKNOWN
} DurableErrorClass;

typedef enum DurableActivityClass
{
	DURABLE_CLASS_PURE,
	DURABLE_CLASS_IDEMPOTENT,
	DURABLE_CLASS_QUERYABLE,
	DURABLE_CLASS_UNSAFE
} DurableActivityClass;

/* pure and idempotent activities may simply be sent again */
#define DURABLE_CLASS_RETRY_SAFE(c) \
	((c) == DURABLE_CLASS_PURE || (c) == DURABLE_CLASS_IDEMPOTENT)

typedef enum DurableNextAction
{
	DURABLE_NEXT_SCHEDULE_RETRY,
	DURABLE_NEXT_FAIL_PERMANENT,
	DURABLE_NEXT_MANUAL_REVIEW,
	DURABLE_NEXT_DEADLINE_EXCEEDED,
	DURABLE_NEXT_ATTEMPTS_EXHAUSTED
} DurableNextAction;

typedef enum DurableReceipt
{
	DURABLE_RECEIPT_NONE,
	DURABLE_RECEIPT_SUCCEEDED,
	DURABLE_RECEIPT_FAILED_PERMANENT,
	DURABLE_RECEIPT_NOT_EXECUTED
} DurableReceipt;

typedef enum DurableRecoveryAction
{
	DURABLE_RECOVERY_WAIT,
	DURABLE_RECOVERY_RECORD_COMPLETION,
	DURABLE_RECOVERY_RECORD_FAILURE,
	DURABLE_RECOVERY_RECONCILE,
	DURABLE_RECOVERY_MANUAL_REVIEW,
	DURABLE_RECOVERY_EXHAUSTED,
	DURABLE_RECOVERY_RETRY_SAME_ACTIVITY
} DurableRecoveryAction;

/* "no deadline" for DurableDecideNext */
#define DURABLE_NO_DEADLINE PG_INT64_MAX

extern DurableActivityClass DurableParseActivityClass(const char *name);
extern DurableErrorClass DurableParseErrorClass(const char *name);
extern DurableReceipt DurableParseReceipt(const char *name);
extern const char *DurableNextActionName(DurableNextAction action);
extern const char *DurableRecoveryActionName(DurableRecoveryAction action);
extern DurableNextAction DurableDecideNext(int32 attempts, int32 max_attempts,
										   int64 elapsed, int64 deadline,
										   DurableErrorClass error_class,
										   int64 next_delay);
extern DurableRecoveryAction DurableDecideRecovery(bool lease_expired,
												   DurableReceipt receipt,
												   bool retry_safe,
												   int32 attempts,
												   int32 max_attempts,
												   bool queryable);
extern DurableRecoveryAction DurableMostCautious(DurableRecoveryAction a,
												 DurableRecoveryAction b);
extern int64 DurableIntervalMicroseconds(const Interval *span, const char *what);

/* ---- states.c: the states of a task and a step (durable.task_state, ...) ---- */
typedef enum DurableTaskState
{
	DURABLE_TASK_CREATED,
	DURABLE_TASK_READY,
	DURABLE_TASK_RUNNING,
	DURABLE_TASK_WAITING,
	DURABLE_TASK_COMPLETED,
	DURABLE_TASK_FAILED,
	DURABLE_TASK_CANCELLED,
	DURABLE_TASK_NEEDS_REVIEW,
	DURABLE_TASK_NSTATES
} DurableTaskState;

typedef enum DurableStepState
{
	DURABLE_STEP_PLANNED,
	DURABLE_STEP_STARTED,
	DURABLE_STEP_COMMITTED,
	DURABLE_STEP_FAILED,
	DURABLE_STEP_UNKNOWN,
	DURABLE_STEP_COMPENSATED,
	DURABLE_STEP_NSTATES
} DurableStepState;

extern const char *DurableTaskStateName(DurableTaskState state);
extern const char *DurableStepStateName(DurableStepState state);
extern DurableTaskState DurableParseTaskState(const char *name);
extern DurableStepState DurableParseStepState(const char *name);

/* ---- retry.c ---- */
extern int32 DurableRetryDelay(const char *activity_id, size_t len,
							   int32 attempt, int32 base, int32 cap);

/* ---- rate.c: a rate limit's units (GCRA) ---- */
extern bool DurableRateTake(TimestampTz tat, TimestampTz now, int64 per_us,
							int32 rate, int32 burst, int64 units,
							TimestampTz *next, TimestampTz *admit_at);

/* ---- period.c: a spend budget's periods on the UTC calendar ---- */
extern void DurableCheckBudgetPeriod(const Interval *period);
extern TimestampTz DurableBudgetPeriodStart(TimestampTz at, const Interval *period);

/* ---- digest.c ---- */
extern void DurableSha256(const void *data, size_t len,
						  uint8 digest[PG_SHA256_DIGEST_LENGTH]);
extern bytea *DurableJsonbHash(Jsonb *jb);
extern bytea *DurableJsonbHashUntrimmed(Jsonb *jb);

/* ---- keys.c: idempotency keys, request hashes, key partitions ---- */
extern char *DurableIdempotencyKey(int nparts, text *const *parts);
extern int32 DurableKeyPartition(const char *a, const char *b);
extern bool DurableHashesEqual(bytea *a, bytea *b);
extern bool DurableRequestMatches(bytea *stored, bytea *hash, Jsonb *request);

/* ---- bounds.c: the bounds of times, intervals, payloads and names ---- */
extern int	durable_max_payload_size;
extern TimestampTz DurableTimePlus(TimestampTz t, const Interval *span);
extern TimestampTz DurableTimeAfter(TimestampTz now, const Interval *span,
									const char *what);
extern void DurableCheckPayloadSize(Size size, const char *name);
extern char *DurableClipName(const char *name, int maxbytes);
extern void DurableCheckAmount(Numeric amount, const char *what);

/* ---- detail.c: the jsonb details of events, and who acts ---- */
typedef struct DurableDetail
{
	struct JsonbParseState *state;	/* the document as built so far */
	MemoryContext context;		/* where it is built: DurableDetailInit's */
} DurableDetail;

extern void DurableDetailInit(DurableDetail *detail);
extern void DurableDetailText(DurableDetail *detail, const char *key,
							  const char *value);
extern void DurableDetailInt(DurableDetail *detail, const char *key,
							 int64 value);
extern void DurableDetailNumeric(DurableDetail *detail, const char *key,
								 Numeric value);
extern void DurableDetailTime(DurableDetail *detail, const char *key,
							  TimestampTz value);
extern void DurableDetailJsonb(DurableDetail *detail, const char *key,
							   Jsonb *value);
extern void DurableDetailListStart(DurableDetail *detail, const char *key);
extern void DurableDetailListAdd(DurableDetail *detail, DurableDetail *item);
extern void DurableDetailListText(DurableDetail *detail, const char *value);
extern void DurableDetailListEnd(DurableDetail *detail);
extern Jsonb *DurableDetailFinish(DurableDetail *detail);
extern void DurableIntervalDetail(DurableDetail *detail, const char *key,
								  const Interval *span);
extern const char *DurableCallerName(void);

/* ---- cron.c: cron expressions on wall-clock time ---- */
typedef struct DurableCron
{
	uint64		minutes;		/* bit n: minute n */
	uint32		hours;
	uint32		days;			/* bits 1..31 */
	uint16		months;			/* bits 1..12 */
	uint8		weekdays;		/* bits 0..6, Sunday first */
	bool		any_day;		/* the day-of-month field begins with * */
	bool		any_weekday;	/* the day-of-week field begins with * */
} DurableCron;

typedef struct DurableWallTime
{
	int			year;
	int			month;			/* 1..12 */
	int			day;
	int			hour;
	int			minute;
} DurableWallTime;

extern void DurableCronParse(const char *cron, DurableCron *result);
extern bool DurableCronMatchesDay(const DurableCron *cron, int year, int month,
								  int day);
extern bool DurableCronNextWall(const DurableCron *cron, DurableWallTime *t);
extern bool DurableCronPrevWall(const DurableCron *cron, DurableWallTime *t,
								bool inclusive);

/* zone.c: the same read in a time zone (apart, for tools/fuzz) */
struct pg_tz;
extern struct pg_tz *DurableTimeZone(const char *name);
extern TimestampTz DurableCronNext(const DurableCron *cron, TimestampTz after,
								   struct pg_tz *tz);
extern TimestampTz DurableCronLatest(const DurableCron *cron, TimestampTz at,
									 struct pg_tz *tz);

/* ---- versions.c: the versions a task is pinned to, a worker runs ---- */
extern void DurableVersionsCheckPinned(Jsonb *versions, const char *of);
extern Jsonb *DurableVersionsRuns(Jsonb *runs);
extern bool DurableVersionsRun(Jsonb *pinned, Jsonb *runs);

/* ---- worker.c: the background workers' common description ---- */
struct BackgroundWorker;
extern void DurableWorkerSpec(struct BackgroundWorker *worker,
							  const char *function, const char *name,
							  int restart_seconds);

#endif							/* DURABLE_PURE_H */
