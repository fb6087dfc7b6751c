/*-------------------------------------------------------------------------
 *
 * versions.c
 *	  The SQL functions of versions (README, "Versions"): migrating tasks
 *	  to other versions, and the test the claims filter with.  Each checks
 *	  its arguments and calls the core (core/versions.c) or the pure layer.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

/*
 * durable.versions_run(pinned jsonb, runs jsonb) RETURNS boolean
 *
 * Whether a worker that runs runs (names to a version or a list of them)
 * runs a task pinned to pinned (names to one version each): the filter of
 * the claims that say what their worker runs.  IMMUTABLE STRICT.
 */
PG_FUNCTION_INFO_V1(durable_versions_run);
Datum
durable_versions_run(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(DurableVersionsRun(PG_GETARG_JSONB_P(0),
									  PG_GETARG_JSONB_P(1)));
}

static void
put_migrated_row(int64 task_id, const char *state, Jsonb *from, Jsonb *to,
				const char *action, void *arg)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[5];
	bool		nulls[5] = {false, false, from == NULL, false, false};

	values[0] = Int64GetDatum(task_id);
	values[1] = CStringGetTextDatum(state);
	values[2] = JsonbPGetDatum(from);
	values[3] = JsonbPGetDatum(to);
	values[4] = CStringGetTextDatum(action);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * The arguments both forms share, from argument 1 on: from_versions,
 * to_versions, operator, evidence, dry_run.
 */
static void
migration_args(FunctionCallInfo fcinfo, DurableMigration *m)
{
	DurableRequireArg(fcinfo, 1, "from_versions");
	m->from = DurableJsonbArg(fcinfo, 1, "from_versions");
	if (!(JB_ROOT_IS_OBJECT(m->from) && JB_ROOT_COUNT(m->from) == 0))
		DurableVersionsCheckPinned(m->from, "from_versions");
	DurableRequireArg(fcinfo, 2, "to_versions");
	m->to = DurableJsonbArg(fcinfo, 2, "to_versions");
	DurableVersionsCheckPinned(m->to, "to_versions");
	m->operator_name = DurableNameArg(fcinfo, 3, "operator");
	DurableRequireArg(fcinfo, 4, "evidence");
	m->evidence = DurableJsonbArg(fcinfo, 4, "evidence");
	DurableRequireArg(fcinfo, 5, "dry_run");
	m->dry_run = PG_GETARG_BOOL(5);
	InitMaterializedSRF(fcinfo, 0);
	m->report = put_migrated_row;
	m->arg = fcinfo->resultinfo;
}

/*
 * durable_migrate(task_id bigint, from_versions jsonb, to_versions jsonb,
 *				   operator text, evidence jsonb, dry_run boolean = false)
 *		RETURNS TABLE(task_id bigint, state text, from_versions jsonb,
 *					  to_versions jsonb, action text)
 *
 * Moves a task pinned to from_versions (a subset of its versions; '{}' for
 * any) to its versions with to_versions' names changed, with a 'migrated'
 * event naming the operator, the evidence, and both versions.  A running
 * task loses its lease (its worker runs the old code) and is ready again;
 * one in review because no worker ran its versions is ready again; every
 * other keeps its state, with fence + 1.  With dry_run, says what it would
 * do ('would_migrate') and changes nothing.  Raises 55U04 for a finished
 * task or one with a step started or unknown, 55U02 for one not pinned to
 * from_versions, 42704 for no such task.
 */
PG_FUNCTION_INFO_V1(durable_migrate_task);
Datum
durable_migrate_task(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	DurableMigration m = {0};

	migration_args(fcinfo, &m);
	SPI_connect();
	DurableCheckOperatorTask(task_id);
	DurableMigrateTask(task_id, &m);
	SPI_finish();
	return (Datum) 0;
}

/*
 * durable_migrate(queue text, from_versions jsonb, to_versions jsonb,
 *				   operator text, evidence jsonb, dry_run boolean = false,
 *				   batch int = 1000)
 *		RETURNS TABLE(task_id bigint, state text, from_versions jsonb,
 *					  to_versions jsonb, action text)
 *
 * The same for up to batch unfinished tasks of a queue pinned to
 * from_versions and not yet to to_versions, lowest id first; call again
 * while it migrates any.  A task with a step in doubt is returned with
 * action 'in_doubt' and not moved, on every call until it is settled.
 */
PG_FUNCTION_INFO_V1(durable_migrate_queue);
Datum
durable_migrate_queue(PG_FUNCTION_ARGS)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	int32		batch = DurableBatchArg(fcinfo, 6);
	DurableMigration m = {0};

	migration_args(fcinfo, &m);
	SPI_connect();
	DurableCheckOperatorQueue(queue);
	DurableMigrateQueue(queue, batch, &m);
	SPI_finish();
	return (Datum) 0;
}
