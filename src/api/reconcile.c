/*-------------------------------------------------------------------------
 *
 * reconcile.c
 *	  durable_reconcile(): one tick of reconciliation, on demand.
 *
 * The tick itself is the core's (core/tick.c), the one the background
 * worker runs; this entry point runs it in the caller's transaction and
 * returns what it did.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

static void
report_settled(int64 task_id, const char *action, void *arg)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	/* a day of history dropped whole names no task */
	values[0] = Int64GetDatum(task_id);
	nulls[0] = task_id == 0;
	values[1] = CStringGetTextDatum(action);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * durable_reconcile(batch int = 1000) RETURNS TABLE(task_id bigint, action text)
 *
 * One tick of reconciliation, as the background worker runs it: settles up
 * to batch expired leases, raises up to batch stuck alarms, and removes up
 * to batch finished tasks past retention, and enqueues the occurrences of
 * up to batch schedules that are due; returns each task with what was done
 * ('removed', 'stuck_alarm' and 'scheduled' besides the recovery actions).
 * A part that fails is skipped and shown in durable.status, not raised.
 */
PG_FUNCTION_INFO_V1(durable_reconcile);
Datum
durable_reconcile(PG_FUNCTION_ARGS)
{
	int32		batch = DurableBatchArg(fcinfo, 0);

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	DurableReconcileTick(batch, report_settled, fcinfo->resultinfo);
	SPI_finish();
	return (Datum) 0;
}
