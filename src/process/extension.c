/*-------------------------------------------------------------------------
 *
 * extension.c
 *	  Whether durable is installed in the worker's database, and at which
 *	  version, for the background workers that use its objects.
 *
 * A worker looks before it uses durable's tables and functions, and what
 * it saw must hold while it uses them: a DROP EXTENSION committed between
 * the look and the use leaves it statements on relations that no longer
 * exist (an ERROR on one server, where nothing catches it).  So the look
 * share-locks the extension for the rest of the transaction, as any
 * dependent object's use would: DROP EXTENSION locks it exclusively.
 *
 *-------------------------------------------------------------------------
 */
#include "process/process.h"

#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/syscache.h"

/*
 * DurableLockExtension
 *		The version of durable installed in this database, its extension
 *		share-locked until the end of the transaction; NULL when it is not
 *		installed or is being created.  Taking the lock waits for a DROP
 *		EXTENSION under way, and reads the invalidations it sent: the
 *		extension is looked up again after it.
 */
char *
DurableLockExtension(void)
{
	Oid			ext = get_extension_oid("durable", true);
	HeapTuple	tuple;
	Datum		d;
	bool		isnull;
	char	   *version;

	if (!OidIsValid(ext) || creating_extension)
		return NULL;
	LockDatabaseObject(ExtensionRelationId, ext, 0, AccessShareLock);
	tuple = SearchSysCache1(EXTENSIONOID, ObjectIdGetDatum(ext));
	if (!HeapTupleIsValid(tuple))
		return NULL;
	d = SysCacheGetAttr(EXTENSIONOID, tuple, Anum_pg_extension_extversion,
						&isnull);
	version = isnull ? pstrdup("") : TextDatumGetCString(d);
	ReleaseSysCache(tuple);
	return version;
}
