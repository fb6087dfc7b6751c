/*-------------------------------------------------------------------------
 *
 * durable.h
 *	  Cross-file declarations of the durable extension.
 *
 * One clock: every time durable compares or stores is the transaction
 * start time (now(), GetCurrentTransactionStartTimestamp()), taken once per
 * call in C and bound as a parameter.  No worker clock decides anything,
 * and no volatile function runs inside an UPDATE.  Keep claim and commit
 * transactions short so that this clock stays close to the wall clock.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_H
#define DURABLE_H

#include "postgres.h"

#include "common/sha2.h"
#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "utils/jsonb.h"

#include "compat.h"
#include "durable_errcodes.h"

/* schema that holds durable's tables, views and internal functions */
#define DURABLE_SCHEMA "durable"

/* ---- digest.c ---- */
extern void DurableSha256(const void *data, size_t len,
						  uint8 digest[PG_SHA256_DIGEST_LENGTH]);
extern bytea *DurableJsonbHash(Jsonb *jb);

/* ---- decision.c: the pure decision tables of DESIGN section 3 ---- */
typedef enum DurableErrorClass
{
	DURABLE_ERROR_TRANSIENT,
	DURABLE_ERROR_PERMANENT,
	DURABLE_ERROR_UNKNOWN
} DurableErrorClass;

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
extern int64 DurableIntervalMicroseconds(const Interval *span, const char *what);

/* ---- idempotency.c ---- */
extern char *DurableIdempotencyKey(int nparts, text *const *parts);

/* ---- retry.c ---- */
extern int32 DurableRetryDelay(const char *activity_id, size_t len,
							   int32 attempt, int32 base, int32 cap);

#endif							/* DURABLE_H */
