/*-------------------------------------------------------------------------
 *
 * durable_errcodes.h
 *	  SQLSTATEs of durable.
 *
 * They keep class 55 ("object not in prerequisite state") with the
 * subclass letter U, as PostgreSQL keeps P for its own (55P03), so a
 * client that does not know them still falls back to the right class:
 * do not blindly retry.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_ERRCODES_H
#define DURABLE_ERRCODES_H

#include "utils/elog.h"

/* the caller's fencing token is no longer current: stop acting on the task */
#define ERRCODE_DURABLE_STALE_FENCING_TOKEN		MAKE_SQLSTATE('5','5','U','0','1')
/* compare-and-swap on a version found another version */
#define ERRCODE_DURABLE_VERSION_MISMATCH		MAKE_SQLSTATE('5','5','U','0','2')
/* an idempotency key came back with a different request */
#define ERRCODE_DURABLE_IDEMPOTENCY_CONFLICT	MAKE_SQLSTATE('5','5','U','0','3')
/* the state machine has no edge from the current state to the requested one */
#define ERRCODE_DURABLE_INVALID_TRANSITION		MAKE_SQLSTATE('5','5','U','0','4')
/* a step's reserve does not fit what a spend budget has left */
#define ERRCODE_DURABLE_BUDGET_EXHAUSTED		MAKE_SQLSTATE('5','5','U','0','5')

#endif							/* DURABLE_ERRCODES_H */
