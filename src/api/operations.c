/*-------------------------------------------------------------------------
 *
 * operations.c
 *	  The operations of the SQL API (README, "The reconciler and
 *	  operations"): resolving tasks in review, replaying dead letters, the
 *	  recovery action of a task, and one tick of reconciliation on demand
 *	  (durable_reconcile, the tick the background worker runs, core/tick.c).
 *	  Each checks its arguments and calls the core.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

/*
 * durable_resolve(task_id bigint, decision text, operator text,
 *				   evidence jsonb, step text = NULL, spent numeric = NULL)
 *		RETURNS text
 *
 * Settles a task in NEEDS_REVIEW; returns its new state.  A decision about
 * a step in doubt names it (it may be left out when there is only one):
 * mark_committed (it took effect: committed), mark_not_executed (it did
 * not: planned again with the same key), mark_failed (it failed, and so
 * does the task).  The task leaves review only when none of its steps is in
 * doubt any more, READY to resume, or FAILED when a step failed; until then
 * it stays in review for the next decision.  retry is refused while a step is in
 * doubt.  Without one, the marks apply to the task itself.  cancel
 * cancels.  spent is what a step marked committed spent, charged to its
 * task's budgets (its reservation when NULL; 22023 with another decision).
 * Raises 55U04 for a task that is not in review.
 */
PG_FUNCTION_INFO_V1(durable_resolve);
Datum
durable_resolve(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	DurableResolveDecision decision;
	char	   *operator_name;
	Jsonb	   *evidence;
	char	   *step_name = NULL;
	const char *new_state;

	DurableRequireArg(fcinfo, 1, "decision");
	decision = DurableParseResolveDecision(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	operator_name = DurableNameArg(fcinfo, 2, "operator");
	DurableRequireArg(fcinfo, 3, "evidence");
	evidence = DurableJsonbArg(fcinfo, 3, "evidence");
	if (PG_NARGS() > 4 && !PG_ARGISNULL(4))
		step_name = DurableNameArg(fcinfo, 4, "step name");

	SPI_connect();
	DurableCheckOperatorTask(task_id);
	new_state = DurableResolve(task_id, decision, operator_name, evidence,
							   step_name, DurableNumericArg(fcinfo, 5));
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(new_state));
}

/*
 * durable_replay_dead_letters(queue text, batch int = 10,
 *							   partition int = NULL, reason text = NULL)
 *		RETURNS TABLE(task_id bigint, action text)
 *
 * Gives up to batch failed tasks of a queue, oldest first, a new run: READY
 * now, with their attempts counted from zero (their deadline still counts
 * from their creation).  With a partition (a partition_key of the queue),
 * only that partition's; with a reason, only those that stopped for it:
 * their stop code ('attempts_exhausted', 'quarantined', ...) or the reason
 * a quarantine gave (durable.dead_letters shows both).  Committed steps
 * stay committed, so the replay resumes where the task stopped.  A task
 * with a failed step is no dead letter to replay: a failed step is final,
 * and a new run would only meet it again.
 */
PG_FUNCTION_INFO_V1(durable_replay_dead_letters);
Datum
durable_replay_dead_letters(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	int32		batch = DurableBatchArg(fcinfo, 1);
	int32		partition = -1;
	char	   *reason = NULL;
	const char *actor;
	uint64		n;
	int64	   *ids;

	if (PG_NARGS() > 2 && !PG_ARGISNULL(2))
		partition = DurableIntArgAtLeast(fcinfo, 2, "partition", 0);
	if (PG_NARGS() > 3 && !PG_ARGISNULL(3))
		reason = DurableTextArgCString(fcinfo, 3, "reason");
	InitMaterializedSRF(fcinfo, 0);
	actor = DurableCallerName();
	SPI_connect();
	DurableCheckOperatorQueue(queue);
	n = DurableReplayDeadLetters(queue, batch, partition, reason, actor, &ids);
	for (uint64 i = 0; i < n; i++)
	{
		Datum		values[2];
		bool		nulls[2] = {false, false};

		values[0] = Int64GetDatum(ids[i]);
		values[1] = CStringGetTextDatum("replayed");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}

/*
 * durable_replay_dead_letters(task_ids bigint[])
 *		RETURNS TABLE(task_id bigint, action text)
 *
 * The same, for the failed tasks named, in the order given: a row for
 * each, its action 'replayed', or why not ('not_found', 'not_failed',
 * 'step_failed').  At most DURABLE_MAX_BATCH ids; a NULL one is 22004.
 */
PG_FUNCTION_INFO_V1(durable_replay_dead_letters_by_id);
Datum
durable_replay_dead_letters_by_id(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum	   *ids;
	bool	   *id_nulls;
	int			n;
	const char *actor;

	DurableRequireArg(fcinfo, 0, "task_ids");
	n = DurableArrayArg(fcinfo, 0, INT8OID, "task_ids", &ids, &id_nulls);
	if (n > DURABLE_MAX_BATCH)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("at most %d task ids can be replayed in one call", DURABLE_MAX_BATCH),
				errdetail("%d were given.", n));
	for (int i = 0; i < n; i++)
		if (id_nulls[i])
			ereport(ERROR,
					errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					errmsg("task_ids must not contain NULL"));
	InitMaterializedSRF(fcinfo, 0);
	actor = DurableCallerName();
	SPI_connect();
	for (int i = 0; i < n; i++)
	{
		Datum		values[2];
		bool		nulls[2] = {false, false};
		int64		id = DatumGetInt64(ids[i]);

		if (id > 0)
			DurableCheckOperatorTask(id);
		values[0] = Int64GetDatum(id);
		values[1] = CStringGetTextDatum(id > 0 ? DurableReplayDeadLetter(id, actor) : "not_found");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}

/*
 * durable_quarantine(task_id bigint, reason text) RETURNS void
 *
 * Puts an unfinished task among the dead letters with a reason: FAILED,
 * stop code 'quarantined', its lease revoked; the event names the caller.
 * Refused (55U04) while a step is started or unknown, and for a finished
 * task; 42704 for no such task.  durable_replay_dead_letters(queue,
 * reason => ...) gives it a new run after the fix.
 */
PG_FUNCTION_INFO_V1(durable_quarantine);
Datum
durable_quarantine(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	char	   *reason = DurableReasonArg(fcinfo, 1,
										  "Say why the task is quarantined: the replay finds it by its reason.");

	SPI_connect();
	DurableCheckOperatorTask(task_id);
	DurableQuarantine(task_id, reason, DurableCallerName());
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_expire_lease(task_id bigint, reason text) RETURNS text
 *
 * Ends a running task's lease now and settles it through the recovery
 * table, as the reconciler would once the lease ran out: against a hung
 * worker, or in a test of one's own worker's recovery, without waiting.
 * The event names the caller and the reason.  Returns the action taken.
 */
PG_FUNCTION_INFO_V1(durable_expire_lease);
Datum
durable_expire_lease(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	char	   *reason = DurableReasonArg(fcinfo, 1,
										  "Say why the lease is ended: the task's events keep it.");
	const char *action;

	SPI_connect();
	DurableCheckOperatorTask(task_id);
	action = DurableExpireLease(task_id, reason, DurableCallerName());
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(action));
}

/*
 * durable.recovery_action_of(task_id bigint) RETURNS text
 *
 * The recovery action the reconciler would take for a running task now,
 * without taking it: 'wait' while its lease runs, else the most cautious
 * action of its steps in doubt, or the task's own.  The recovery package
 * recommends what this says, so that it can never disagree with recovery.
 */
PG_FUNCTION_INFO_V1(durable_recovery_action_of);
Datum
durable_recovery_action_of(PG_FUNCTION_ARGS)
{
	int64		task_id = DurableTaskIdArg(fcinfo, 0);
	const char *action;

	SPI_connect();
	action = DurableRecoveryActionOf(task_id);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(action));
}

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
 * durable_reconcile(batch int = 1000, queue text = NULL)
 *		RETURNS TABLE(task_id bigint, action text)
 *
 * One tick of reconciliation, as the background worker runs it: settles up
 * to batch expired leases, raises up to batch stuck alarms, and removes up
 * to batch finished tasks past retention, and enqueues the occurrences of
 * up to batch schedules that are due; returns each task with what was done
 * ('removed', 'stuck_alarm' and 'scheduled' besides the recovery actions).
 * A part that fails is skipped and shown in durable.status, not raised.
 *
 * With a queue, that queue's expired leases and stuck alarms only, up to
 * batch of each, in the caller's transaction, its errors raised
 * (core/tick.c); 42704 for no such queue.  0.8.0's SQL calls it with the
 * batch alone.
 */
PG_FUNCTION_INFO_V1(durable_reconcile);
Datum
durable_reconcile(PG_FUNCTION_ARGS)
{
	int32		batch = DurableBatchArg(fcinfo, 0);
	char	   *queue = NULL;

	if (PG_NARGS() > 1 && !PG_ARGISNULL(1))
		queue = DurableNameArg(fcinfo, 1, "queue name");
	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	if (queue != NULL)
		DurableReconcileQueue(queue, batch, report_settled, fcinfo->resultinfo);
	else
		DurableReconcileTick(batch, report_settled, fcinfo->resultinfo);
	SPI_finish();
	return (Datum) 0;
}
