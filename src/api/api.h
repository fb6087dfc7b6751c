/*-------------------------------------------------------------------------
 *
 * api.h
 *	  The api layer: the SQL entry points, grouped as the README's SQL API
 *	  is.  An entry point checks its arguments, connects to SPI, calls the
 *	  core, and returns its result; it never calls another entry point.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_API_H
#define DURABLE_API_H

#include "core/core.h"

/* ---- args.c: checking arguments ---- */
extern void DurableRequireArg(FunctionCallInfo fcinfo, int argno,
							  const char *name);
extern char *DurableNameArg(FunctionCallInfo fcinfo, int argno,
							const char *what);
extern Interval *DurablePositiveIntervalArg(FunctionCallInfo fcinfo, int argno,
											const char *name);
extern Interval *DurableNonNegativeIntervalArg(FunctionCallInfo fcinfo, int argno,
											   const char *name);
extern int64 DurableDelayArg(FunctionCallInfo fcinfo, int argno,
							 const char *name);
extern int32 DurableIntArgAtLeast(FunctionCallInfo fcinfo, int argno,
								  const char *name, int32 min);
extern int	DurableArrayArg(FunctionCallInfo fcinfo, int argno, Oid elemtype,
							const char *name, Datum **elems, bool **elnulls);
extern int32 DurableBatchArg(FunctionCallInfo fcinfo, int argno);
extern int64 DurableTaskIdArg(FunctionCallInfo fcinfo, int argno);
extern int64 DurableFenceArg(FunctionCallInfo fcinfo, int argno);
extern Numeric DurableNumericArg(FunctionCallInfo fcinfo, int argno);
extern Jsonb *DurableJsonbArg(FunctionCallInfo fcinfo, int argno,
							  const char *name);
extern text *DurableTextArg(FunctionCallInfo fcinfo, int argno,
							const char *name);
extern char *DurableTextArgCString(FunctionCallInfo fcinfo, int argno,
								   const char *name);
extern char *DurableReasonArg(FunctionCallInfo fcinfo, int argno,
							  const char *hint);

/* ---- waits.c: the row of an entry point that waits ---- */
extern void DurableWaitResult(FunctionCallInfo fcinfo, const char *status,
							  Jsonb *payload);

/* ---- tasks.c: helpers the api files share (not entry points) ---- */
extern Datum DurableClaimResult(FunctionCallInfo fcinfo, DurableClaimKind kind);
extern void DurableEnqueueArgs(FunctionCallInfo fcinfo, int argno,
							   int key_argno, DurableEnqueueRequest *req);

#endif							/* DURABLE_API_H */
