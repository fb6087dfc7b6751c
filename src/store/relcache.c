/*-------------------------------------------------------------------------
 *
 * relcache.c
 *	  One relcache callback for all of durable's caches of relations.
 *
 * A backend has room for few relcache callbacks (ten), Citus takes half of
 * them, and during an upgrade a session runs this library beside the
 * preloaded library of the version before, with that library's callbacks
 * too (docs/design.md section 14).  So durable registers one callback,
 * which calls each of its caches' own.
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "utils/inval.h"

#define DURABLE_RELCACHE_FORGETS 8

static RelcacheCallbackFunction forgets[DURABLE_RELCACHE_FORGETS];
static int	nforgets = 0;

static void
call_forgets(Datum arg, Oid relid)
{
	for (int i = 0; i < nforgets; i++)
		forgets[i] (arg, relid);
}

/*
 * DurableForgetOnRelcacheInvalidation
 *		Call forget(0, relid) on every relcache invalidation from now on, as
 *		CacheRegisterRelcacheCallback would; once, however often asked.
 */
void
DurableForgetOnRelcacheInvalidation(void (*forget) (Datum arg, Oid relid))
{
	for (int i = 0; i < nforgets; i++)
		if (forgets[i] == forget)
			return;
	if (nforgets == DURABLE_RELCACHE_FORGETS)
		elog(ERROR, "more than %d caches of relations in durable", DURABLE_RELCACHE_FORGETS);
	if (nforgets == 0)
		CacheRegisterRelcacheCallback(call_forgets, (Datum) 0);
	forgets[nforgets++] = forget;
}
