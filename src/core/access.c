/*-------------------------------------------------------------------------
 *
 * access.c
 *	  Which roles may use a queue: durable_grant_queue, durable_revoke_queue
 *	  and the check every call that acts on a queue or its tasks makes.
 *
 * The durable_producer and durable_worker roles open the API; a queue can
 * narrow it to roles of its own, so that one application's workers cannot
 * claim, commit or otherwise act on another's tasks.  A queue is open to
 * every holder of those roles until its first grant, and restricted from
 * then on: only the roles granted (and their members, and superusers) may
 * enqueue into it or work on its tasks; a grant to 'public' opens it again
 * for that privilege.  The role checked is the session's (the outer user),
 * not the definer whose rights the API runs with.
 *
 * Fences are small numbers a foreign worker could guess, so the check is
 * made on every fenced write of a restricted queue's task, before anything
 * about the task is told; an open queue costs one look-up of its flag in
 * the statement that writes.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

static const char *const privilege_names[] = {
	[DURABLE_PRIV_ENQUEUE] = "enqueue",
	[DURABLE_PRIV_WORK] = "work",
};

static void
report_denied(const char *queue, DurableQueuePrivilege what)
{
	ereport(ERROR,
			errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			errmsg("permission denied for queue \"%s\"", queue),
			errdetail("Role \"%s\" has no \"%s\" grant on the queue.",
					  DurableCallerName(), privilege_names[what]),
			errhint("An operator grants it with durable_grant_queue()."));
}

/*
 * DurableCheckQueueAccess
 *		Raise 42501 unless the calling role may use the queue for what.
 *		Nothing is checked for a queue that does not exist: the caller says
 *		so in its own words.
 */
void
DurableCheckQueueAccess(const char *queue, DurableQueuePrivilege what)
{
	Datum		args[2];
	bool		isnull;
	ArrayType  *grantees;
	Datum	   *values;
	int			n;
	Oid			caller = GetOuterUserId();

	args[0] = CStringGetTextDatum(queue);
	args[1] = CStringGetTextDatum(privilege_names[what]);
	if (DurableExecuteStmt(STMT_QUEUE_ACCESS, args, NULL, SPI_OK_SELECT, 1) == 0)
		return;
	if (!DatumGetBool(DurableResultDatum(0, 1, &isnull)))
		return;
	grantees = DatumGetArrayTypeP(DurableResultDatum(0, 2, &isnull));
	deconstruct_array(grantees, OIDOID, sizeof(Oid), true, TYPALIGN_INT,
					  &values, NULL, &n);
	for (int i = 0; i < n; i++)
	{
		Oid			grantee = DatumGetObjectId(values[i]);

		if (grantee == InvalidOid || has_privs_of_role(caller, grantee))
			return;
	}
	if (superuser_arg(caller))
		return;
	report_denied(queue, what);
}

/* the same, for a caller that already knows whether the queue is restricted */
void
DurableCheckRestrictedQueue(const char *queue, bool restricted,
							DurableQueuePrivilege what)
{
	if (restricted)
		DurableCheckQueueAccess(queue, what);
}

/*
 * DurableCheckQueuesAccess
 *		42501 unless the caller may use, for what, the queue of each of n
 *		tasks (of a batch) whose queue is restricted; each queue is checked
 *		once.  The check runs statements of its own: the caller collects
 *		the queues from its result first.
 */
void
DurableCheckQueuesAccess(char **queues, const bool *restricted, uint64 n,
						 DurableQueuePrivilege what)
{
	char	  **seen = palloc(sizeof(char *) * Max(n, 1));
	uint64		nseen = 0;

	for (uint64 r = 0; r < n; r++)
	{
		bool		found = false;

		if (!restricted[r])
			continue;
		for (uint64 i = 0; i < nseen && !found; i++)
			found = strcmp(seen[i], queues[r]) == 0;
		if (!found)
			seen[nseen++] = queues[r];
	}
	for (uint64 i = 0; i < nseen; i++)
		DurableCheckQueueAccess(seen[i], what);
	pfree(seen);
}

/* 'enqueue', 'work' or 'all' */
static ArrayType *
privileges_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *name;
	Datum		names[2];
	int			n = 0;

	DurableRequireArg(fcinfo, argno, "privilege");
	name = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	if (strcmp(name, "enqueue") == 0 || strcmp(name, "all") == 0)
		names[n++] = CStringGetTextDatum(privilege_names[DURABLE_PRIV_ENQUEUE]);
	if (strcmp(name, "work") == 0 || strcmp(name, "all") == 0)
		names[n++] = CStringGetTextDatum(privilege_names[DURABLE_PRIV_WORK]);
	if (n == 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("unknown queue privilege \"%s\"", name),
				errhint("The privilege must be \"enqueue\", \"work\" or \"all\"."));
	return construct_array(names, n, TEXTOID, -1, false, TYPALIGN_INT);
}

/* a role by name, or InvalidOid for 'public' */
static Oid
grantee_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *name = DurableNameArg(fcinfo, argno, "role");

	if (strcmp(name, "public") == 0)
		return InvalidOid;
	return get_role_oid(name, false);
}

static Datum
change_grant(FunctionCallInfo fcinfo, DurableStmt stmt)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	Oid			grantee = grantee_arg(fcinfo, 1);
	ArrayType  *privileges = privileges_arg(fcinfo, 2);
	DurableQueue settings;
	Datum		args[3];

	args[0] = CStringGetTextDatum(queue);
	args[1] = ObjectIdGetDatum(grantee);
	args[2] = PointerGetDatum(privileges);
	SPI_connect();
	DurableQueueGet(queue, &settings);
	DurableExecuteStmt(stmt, args, NULL,
				   stmt == STMT_QUEUE_GRANT ? SPI_OK_INSERT_RETURNING :
				   SPI_OK_DELETE, 0);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_grant_queue(queue text, role text, privilege text) RETURNS void
 *
 * Lets role ('public' for everyone holding the API roles) enqueue into the
 * queue ('enqueue'), work on its tasks ('work': claim, heartbeat, steps,
 * commit, fail, reconcile), or both ('all'); the queue is restricted to its
 * grants from the first one on.  Granting twice changes nothing.
 */
PG_FUNCTION_INFO_V1(durable_grant_queue);
Datum
durable_grant_queue(PG_FUNCTION_ARGS)
{
	return change_grant(fcinfo, STMT_QUEUE_GRANT);
}

/*
 * durable_revoke_queue(queue text, role text, privilege text) RETURNS void
 *
 * Takes a grant back; the queue stays restricted, also with no grant left
 * (then only superusers may use it).
 */
PG_FUNCTION_INFO_V1(durable_revoke_queue);
Datum
durable_revoke_queue(PG_FUNCTION_ARGS)
{
	return change_grant(fcinfo, STMT_QUEUE_REVOKE);
}
