/*-------------------------------------------------------------------------
 *
 * process.h
 *	  The process layer: _PG_init and the settings, the launcher, and the
 *	  reconciler's loop, which holds no logic of its own.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_PROCESS_H
#define DURABLE_PROCESS_H

#include "api/api.h"
#include "postmaster/bgworker.h"

/* ---- durable.c ---- */
extern bool durable_preloaded;
extern char *durable_database;
extern int	durable_reconcile_interval;
extern int	durable_reconcile_batch;
extern bool durable_reconciler_enabled;
extern bool durable_beside;

/* ---- reconciler.c ---- */
/* how long the launcher waits before it starts a reconciler that stopped */
#define DURABLE_RESTART_SECONDS 10
extern PGDLLEXPORT void durable_launcher_main(Datum main_arg);
extern PGDLLEXPORT void durable_reconciler_main(Datum main_arg);

/* ---- upgrade.c ---- */
extern void DurableStartReconcilerAtUpdate(void);
extern BackgroundWorkerHandle *DurableStartReconcilerOfVersion(const char *version);

/* ---- settings.c ---- */
extern void DurableKeepServerSettings(void);
extern void DurablePinSettings(void);

/* ---- extension.c ---- */
extern char *DurableLockExtension(void);

/* ---- days_worker.c ---- */
extern PGDLLEXPORT void durable_days_main(Datum main_arg);

#endif							/* DURABLE_PROCESS_H */
