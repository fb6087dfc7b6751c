/*-------------------------------------------------------------------------
 *
 * upgrade.c
 *	  The reconciler of the extension's version while the server runs the
 *	  library of another version: between an upgrade's update and its
 *	  restart, in whichever order they come (docs/design.md section 14).
 *
 * The preloaded library's launcher starts that version's reconciler, which
 * works only for an extension of its own version.  So in the window:
 *
 *  - update first: at the update's commit, the session that ran it starts
 *    the new version's reconciler in a background worker of its own
 *    (DurableStartReconcilerAtUpdate), while the preloaded one waits;
 *  - restart first: the preloaded reconciler, newer than the extension,
 *    starts the extension's version's reconciler from that version's
 *    library, when its file is still installed
 *    (DurableStartReconcilerOfVersion), and stops it when it stops.
 *
 * On a Citus worker the update commits in two phases: its reconciler
 * starts when the update is prepared, and waits for the commit.  A
 * reconciler started beside the preloaded library of another version
 * exits once the extension is at a later version than its own (an update
 * committed): the reconciler of the version updated to then works.  The
 * entry point, durable_reconciler_main, keeps its name from version to
 * version, as a later version starts an earlier one's by it.
 *
 *-------------------------------------------------------------------------
 */
#include "process/process.h"

#include <unistd.h>

#include "miscadmin.h"
#include "postmaster/bgworker.h"

static void
reconciler_spec(BackgroundWorker *worker)
{
	DurableWorkerSpec(worker, "durable_reconciler_main", "durable reconciler",
					  DURABLE_RESTART_SECONDS);
}

/*
 * DurableStartReconcilerAtUpdate
 *		Start this version's reconciler beside the preloaded library of an
 *		earlier version: called at the commit of the update to this one, or
 *		when it is prepared.  The postmaster restarts it after an error, and
 *		forgets it at the restart that ends the upgrade, when this version's
 *		launcher takes over.
 */
void
DurableStartReconcilerAtUpdate(void)
{
	BackgroundWorker worker;

	reconciler_spec(&worker);
	if (!RegisterDynamicBackgroundWorker(&worker, NULL))
		ereport(WARNING,
				errmsg("durable reconciler cannot start: no background worker slot is free"),
				errdetail("The reconciler starts when the server restarts."),
				errhint("Raise max_worker_processes."));
}

/*
 * DurableStartReconcilerOfVersion
 *		Start the reconciler of version's library, installed beside this
 *		one's; NULL when its file is not there (the package of the next
 *		version removed it, or a version before 0.9.0, whose library had no
 *		version in its name) or no worker slot is free.  The postmaster
 *		restarts it after an error; it exits for good once the extension is
 *		at a later version than its own.
 */
BackgroundWorkerHandle *
DurableStartReconcilerOfVersion(const char *version)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	char		library[BGW_MAXLEN];
	char		path[MAXPGPATH];

	if (snprintf(library, sizeof(library), "durable-%s", version) >= (int) sizeof(library))
		return NULL;
	snprintf(path, sizeof(path), "%s/%s%s", pkglib_path, library, DLSUFFIX);
	if (access(path, R_OK) != 0)
		return NULL;

	reconciler_spec(&worker);
	strlcpy(worker.bgw_library_name, library, BGW_MAXLEN);
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		return NULL;
	return handle;
}
