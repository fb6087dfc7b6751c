/*-------------------------------------------------------------------------
 *
 * loader.c
 *	  durable.so: the name shared_preload_libraries keeps across versions.
 *
 * All of durable's code is in the library of its version, durable-V.so,
 * to which the scripts of version V bind their functions.  This loader
 * only loads that library, of the version it was built with, as the
 * postmaster preloads it: the library then registers its reconciler and
 * reserves its shared memory as if it had been named itself.
 *
 * A server that preloaded an earlier durable keeps that library, and the
 * functions bound to it keep working, after the files of a new version
 * replace it on disk; ALTER EXTENSION durable UPDATE binds the functions
 * to the new version's library, which each session then loads beside the
 * old one, and a restart makes this loader preload it (docs/design.md
 * section 14).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "compat.h"
#include "fmgr.h"

DURABLE_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	load_file("$libdir/" DURABLE_LIBRARY, false);
}
