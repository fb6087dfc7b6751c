/*-------------------------------------------------------------------------
 *
 * access.c
 *	  Which roles may use a queue: grants and revocations (the SQL
 *	  functions are api/queues.c's) and the check every call that acts on
 *	  a queue or its tasks makes.
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
#include "core/core.h"

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

/* whether a queue is restricted, and the roles granted a privilege on it */
enum
{
	ACCESS_RESTRICTED,
	ACCESS_GRANTEES,
	ACCESS_NCOLUMNS
};

static const DurableColumn access_columns[ACCESS_NCOLUMNS] = {
	[ACCESS_RESTRICTED] = {"restricted", BOOLOID},
	[ACCESS_GRANTEES] = {"grantees", OIDARRAYOID},
};

static DurableStatement queue_access = {
	.name = "queue_access",
	.sql = "SELECT q.restricted, ARRAY(SELECT g.grantee FROM durable.queue_grants g"
	"  WHERE g.queue_name = q.queue_name AND g.privilege = $2) AS grantees"
	" FROM durable.queues q WHERE q.queue_name = $1",
	.nargs = 2,
	.argtypes = {TEXTOID, TEXTOID},
	DURABLE_COLUMNS(access_columns),
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
	if (DurableExecute(&queue_access, args, NULL, SPI_OK_SELECT, 1) == 0)
		return;
	if (!DurableColumnBool(0, ACCESS_RESTRICTED))
		return;
	grantees = DatumGetArrayTypeP(DurableColumnDatum(0, ACCESS_GRANTEES, &isnull));
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

/* a grant returns a row per privilege it added */
enum
{
	GRANTED_ONE,
	GRANTED_NCOLUMNS
};

static const DurableColumn granted_columns[GRANTED_NCOLUMNS] = {
	[GRANTED_ONE] = {"?column?", INT4OID},
};

static DurableStatement queue_grant = {
	.name = "queue_grant",
	.sql = "WITH q AS (UPDATE durable.queues SET restricted = true"
	"  WHERE queue_name = $1 RETURNING queue_name)"
	" INSERT INTO durable.queue_grants (queue_name, grantee, privilege)"
	" SELECT q.queue_name, $2, p FROM q, pg_catalog.unnest($3::text[]) p"
	" ON CONFLICT DO NOTHING"
	" RETURNING 1",
	.nargs = 3,
	.argtypes = {TEXTOID, OIDOID, TEXTARRAYOID},
	DURABLE_COLUMNS(granted_columns),
};

static DurableStatement queue_revoke = {
	.name = "queue_revoke",
	.sql = "DELETE FROM durable.queue_grants"
	" WHERE queue_name = $1 AND grantee = $2 AND privilege = ANY ($3)",
	.nargs = 3,
	.argtypes = {TEXTOID, OIDOID, TEXTARRAYOID},
};

/*
 * DurableChangeQueueGrant
 *		Grant (or revoke, when not grant) grantee (InvalidOid for 'public')
 *		the privileges to enqueue into a queue and/or to work on its tasks.
 *		A grant restricts the queue to its grants from then on; granting
 *		twice changes nothing.  42704 for an unknown queue.
 */
void
DurableChangeQueueGrant(const char *queue, Oid grantee, bool enqueue,
						bool work, bool grant)
{
	DurableQueue settings;
	Datum		names[2];
	int			n = 0;
	Datum		args[3];

	if (enqueue)
		names[n++] = CStringGetTextDatum(privilege_names[DURABLE_PRIV_ENQUEUE]);
	if (work)
		names[n++] = CStringGetTextDatum(privilege_names[DURABLE_PRIV_WORK]);
	args[0] = CStringGetTextDatum(queue);
	args[1] = ObjectIdGetDatum(grantee);
	args[2] = PointerGetDatum(construct_array(names, n, TEXTOID, -1, false,
											  TYPALIGN_INT));
	DurableQueueGet(queue, &settings);
	if (grant)
		DurableExecute(&queue_grant, args, NULL, SPI_OK_INSERT_RETURNING, 0);
	else
		DurableExecute(&queue_revoke, args, NULL, SPI_OK_DELETE, 0);
}
