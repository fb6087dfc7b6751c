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
 * The grants are PostgreSQL's own: the privileges on a sequence of schema
 * durable that the queue's first grant creates (named in the queue's row,
 * grants_sequence), UPDATE for enqueue and USAGE for work.  So a grant
 * names its role the way every other ACL does: pg_shdepend keeps DROP
 * ROLE from leaving it behind (DROP OWNED or a revoke takes it away),
 * ALTER ROLE ... RENAME keeps it, and pg_dump writes it as GRANT ... TO
 * the role's name, which a restore into another cluster gives to the role
 * of that name, whatever its OID there.  The sequence is no member of the
 * extension, so pg_dump dumps it with its privileges; nothing else uses
 * it.  Its owner keeps no privilege on it: only superusers get past a
 * restricted queue without a grant.
 *
 * Fences are small numbers a foreign worker could guess, so the check is
 * made on every fenced write of a restricted queue's task, before anything
 * about the task is told; an open queue costs one look-up of its flag in
 * the statement that writes.  A task call that is refused says the same
 * whether the task exists, and whatever the fence (DurableReportTaskDenied).
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

static const char *const privilege_names[] = {
	[DURABLE_PRIV_ENQUEUE] = "enqueue",
	[DURABLE_PRIV_WORK] = "work",
};

/* the privilege on the grants sequence that stands for each */
static const char *const privilege_sql[] = {
	[DURABLE_PRIV_ENQUEUE] = "UPDATE",
	[DURABLE_PRIV_WORK] = "USAGE",
};

static const AclMode privilege_modes[] = {
	[DURABLE_PRIV_ENQUEUE] = ACL_UPDATE,
	[DURABLE_PRIV_WORK] = ACL_USAGE,
};

/* whether a queue is restricted, and the sequence that holds its grants */
enum
{
	ACCESS_RESTRICTED,
	ACCESS_SEQUENCE,
	ACCESS_NCOLUMNS
};

static const DurableColumn access_columns[ACCESS_NCOLUMNS] = {
	[ACCESS_RESTRICTED] = {"restricted", BOOLOID},
	[ACCESS_SEQUENCE] = {"grants_sequence", TEXTOID},
};

enum
{
	ACCESS_QUEUE,
	ACCESS_NPARAMS
};
static const DurableParam queue_access_params[ACCESS_NPARAMS] = {
	[ACCESS_QUEUE] = {"queue", TEXTOID},
};
static DurableStatement queue_access = {
	.name = "queue_access",
	.sql = "SELECT restricted, grants_sequence FROM durable.queues"
	" WHERE queue_name = $queue",
	DURABLE_PARAMS(queue_access_params),
	DURABLE_COLUMNS(access_columns),
};

/* every queue, whether it is restricted, and its grants sequence */
enum
{
	SCOPE_QUEUE,
	SCOPE_RESTRICTED,
	SCOPE_SEQUENCE,
	SCOPE_NCOLUMNS
};

static const DurableColumn queue_scope_columns[SCOPE_NCOLUMNS] = {
	[SCOPE_QUEUE] = {"queue_name", TEXTOID},
	[SCOPE_RESTRICTED] = {"restricted", BOOLOID},
	[SCOPE_SEQUENCE] = {"grants_sequence", TEXTOID},
};

static DurableStatement every_queue_access = {
	.name = "every_queue_access",
	.sql = "SELECT queue_name, restricted, grants_sequence FROM durable.queues"
	" ORDER BY queue_name",
	DURABLE_COLUMNS(queue_scope_columns),
};

static DurableStatement restricted_queues = {
	.name = "restricted_queues",
	.sql = "SELECT restricted, grants_sequence FROM durable.queues"
	" WHERE restricted",
	DURABLE_COLUMNS(access_columns),
};

/* the grants sequence of that name in schema durable, or InvalidOid */
static Oid
grants_relid(const char *name)
{
	Oid			schema = get_namespace_oid(DURABLE_SCHEMA, true);

	if (name == NULL || !OidIsValid(schema))
		return InvalidOid;
	return get_relname_relid(name, schema);
}

/* whether the calling role holds what on a restricted queue's sequence */
static bool
caller_holds(const char *sequence, DurableQueuePrivilege what)
{
	Oid			caller = GetOuterUserId();
	Oid			relid;

	if (superuser_arg(caller))
		return true;
	relid = grants_relid(sequence);
	return OidIsValid(relid) &&
		pg_class_aclcheck(relid, caller, privilege_modes[what]) == ACLCHECK_OK;
}

/* the grants sequence of a row of queue_access or queue_restrict, or NULL */
static char *
row_sequence(DurableResult res, uint64 row)
{
	return DurableGetIsNull(res, row, ACCESS_SEQUENCE) ? NULL :
		DurableGetText(res, row, ACCESS_SEQUENCE);
}

/* a queue's row by queue_access: none when there is no such queue */
static DurableResult
read_access(const char *queue)
{
	Datum		args[ACCESS_NPARAMS];

	args[ACCESS_QUEUE] = CStringGetTextDatum(queue);
	return DurableRun(&queue_access, args, NULL, SPI_OK_SELECT, 1);
}

/*
 * DurableMayUseQueue
 *		Whether the calling role may use the queue for what: true for an
 *		open queue, and for one that does not exist.
 */
bool
DurableMayUseQueue(const char *queue, DurableQueuePrivilege what)
{
	DurableResult res = read_access(queue);

	if (res.rows == 0 || !DurableGetBool(res, 0, ACCESS_RESTRICTED))
		return true;
	return caller_holds(row_sequence(res, 0), what);
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
	if (!DurableMayUseQueue(queue, what))
		ereport(ERROR,
				errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				errmsg("permission denied for queue \"%s\"", queue),
				errdetail("Role \"%s\" has no \"%s\" grant on the queue.",
						  DurableCallerName(), privilege_names[what]),
				errhint("An operator grants it with durable_grant_queue()."));
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
 * DurableReportTaskDenied
 *		The refusal of a call on a task whose queue the calling role may not
 *		work on: 42501, the same words whether the task exists or not and
 *		whatever fence the call gave, naming nothing but the task id the
 *		caller gave.
 */
void
DurableReportTaskDenied(int64 task_id)
{
	ereport(ERROR,
			errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			errmsg("permission denied for task %lld", (long long) task_id),
			errdetail("Role \"%s\" has no \"work\" grant on the task's queue, or there is no such task.",
					  DurableCallerName()),
			errhint("An operator grants it with durable_grant_queue()."));
}

/*
 * DurableCheckTaskAccess
 *		42501 (DurableReportTaskDenied) unless the calling role may work on
 *		the tasks of queue, which is restricted or not.
 */
void
DurableCheckTaskAccess(int64 task_id, const char *queue, bool restricted)
{
	if (restricted && !DurableMayUseQueue(queue, DURABLE_PRIV_WORK))
		DurableReportTaskDenied(task_id);
}

/*
 * DurableCheckTasksAccess
 *		DurableCheckTaskAccess for n tasks of a batch, each queue checked
 *		once; a task whose queue is NULL is skipped.  The check runs
 *		statements of its own: the caller collects the queues from its
 *		result first.
 */
void
DurableCheckTasksAccess(const int64 *task_ids, char **queues,
						const bool *restricted, int n)
{
	char	  **allowed = palloc(sizeof(char *) * Max(n, 1));
	int			nallowed = 0;

	for (int i = 0; i < n; i++)
	{
		bool		seen = false;

		if (queues[i] == NULL || !restricted[i])
			continue;
		for (int j = 0; j < nallowed && !seen; j++)
			seen = strcmp(allowed[j], queues[i]) == 0;
		if (seen)
			continue;
		DurableCheckTaskAccess(task_ids[i], queues[i], true);
		allowed[nallowed++] = queues[i];
	}
	pfree(allowed);
}

/* whether the calling role may work on the tasks of every queue */
bool
DurableMayWorkOnEveryQueue(void)
{
	DurableResult res;

	if (superuser_arg(GetOuterUserId()))
		return true;
	res = DurableRun(&restricted_queues, NULL, NULL, SPI_OK_SELECT, 0);
	for (uint64 r = 0; r < res.rows; r++)
		if (!caller_holds(row_sequence(res, r), DURABLE_PRIV_WORK))
			return false;
	return true;
}

/*
 * DurableCallerIsQueueOperator
 *		Whether the calling role operates some queues only: a member of
 *		durable_queue_operator that is neither a superuser nor a member of
 *		durable_operator, which operates every queue.  Such a role reads
 *		the tasks of the open queues and of the restricted ones it holds a
 *		grant of (DurableQueuesInScope), and acts on those it may work on.
 */
bool
DurableCallerIsQueueOperator(void)
{
	Oid			caller = GetOuterUserId();
	Oid			some = get_role_oid("durable_queue_operator", true);
	Oid			every = get_role_oid("durable_operator", true);

	if (superuser_arg(caller) || !OidIsValid(some) ||
		!has_privs_of_role(caller, some))
		return false;
	return !(OidIsValid(every) && has_privs_of_role(caller, every));
}

/*
 * The calling role's scope, kept for its transaction: the views ask for
 * every row.  scope_every for a role that is no queue operator; else the
 * queues it may read, in TopTransactionContext.  load_scope reads
 * durable.queues and so runs with the owner's rights, in
 * durable.queues_in_scope(); a view's per-row test, with the reader's,
 * calls that when the scope is not loaded yet (ensure_scope).
 */
static LocalTransactionId scope_lxid = InvalidLocalTransactionId;
static Oid	scope_role = InvalidOid;
static bool scope_every = true;
static char **scope_queues = NULL;
static int	scope_count = 0;

/*
 * load_scope_of
 *		Load the calling role's scope: every queue, or the open ones and
 *		the restricted ones it holds a grant of, read from durable.queues.
 */
static void
load_scope_of(bool every)
{
	DurableResult res;

	scope_every = every;
	scope_queues = NULL;
	scope_count = 0;
	if (!every)
	{
		res = DurableRun(&every_queue_access, NULL, NULL, SPI_OK_SELECT, 0);
		scope_queues = MemoryContextAlloc(TopTransactionContext,
										  sizeof(char *) * Max(res.rows, 1));
		for (uint64 r = 0; r < res.rows; r++)
		{
			char	   *sequence = DurableGetIsNull(res, r, SCOPE_SEQUENCE) ? NULL :
				DurableGetText(res, r, SCOPE_SEQUENCE);

			if (!DurableGetBool(res, r, SCOPE_RESTRICTED) ||
				caller_holds(sequence, DURABLE_PRIV_ENQUEUE) ||
				caller_holds(sequence, DURABLE_PRIV_WORK))
				scope_queues[scope_count++] =
					MemoryContextStrdup(TopTransactionContext,
										DurableGetText(res, r, SCOPE_QUEUE));
		}
	}
	/* loaded only once whole: an error above leaves it to load again */
	scope_lxid = DURABLE_MY_LXID;
	scope_role = GetOuterUserId();
}

/* the scope, for a function that runs with the owner's rights */
static void
load_scope(void)
{
	if (!DurableScopeLoaded())
		load_scope_of(!DurableCallerIsQueueOperator());
}

/* whether the calling role's scope is loaded: then no statement is run */
bool
DurableScopeLoaded(void)
{
	return scope_lxid == DURABLE_MY_LXID && scope_role == GetOuterUserId();
}

static const DurableColumn scope_load_columns[] = {
	{"queues", TEXTARRAYOID},
};
static DurableStatement scope_load = {
	.name = "scope_load",
	.sql = "SELECT durable.queues_in_scope() AS queues",
	DURABLE_COLUMNS(scope_load_columns),
};

/*
 * ensure_scope
 *		The scope, for a view's per-row test, which runs with the reader's
 *		rights: a role that is no queue operator sees every queue, and
 *		nothing is read; else durable.queues_in_scope() loads it, deciding
 *		again with the owner's rights (it takes no caller's word).
 */
static void
ensure_scope(void)
{
	if (DurableScopeLoaded())
		return;
	if (!DurableCallerIsQueueOperator())
		load_scope_of(true);
	else
		(void) DurableRun(&scope_load, NULL, NULL, SPI_OK_SELECT, 1);
}

/* whether durable's views show the calling role every queue's rows */
bool
DurableCallerSeesEveryQueue(void)
{
	ensure_scope();
	return scope_every;
}

/*
 * DurableQueueInScope
 *		Whether durable's views show the calling role the rows of queue, of
 *		len bytes (not terminated: a view's per-row test passes a row's text
 *		as it is): every queue's to a role that is no queue operator, else
 *		those of the open queues and of the restricted ones it holds the
 *		enqueue or the work grant of, as reading a stream asks.
 */
bool
DurableQueueInScope(const char *queue, int len)
{
	ensure_scope();
	if (scope_every)
		return true;
	for (int i = 0; i < scope_count; i++)
		if (strncmp(scope_queues[i], queue, len) == 0 && scope_queues[i][len] == '\0')
			return true;
	return false;
}

/*
 * DurableQueuesInScope
 *		The queues of DurableQueueInScope, made in result_context: NULL for
 *		every queue.  Reads durable.queues: for a function that runs with
 *		the owner's rights.
 */
ArrayType *
DurableQueuesInScope(MemoryContext result_context)
{
	MemoryContext old;
	Datum	   *names;
	ArrayType  *queues;

	load_scope();
	if (scope_every)
		return NULL;
	old = MemoryContextSwitchTo(result_context);
	names = palloc(sizeof(Datum) * Max(scope_count, 1));
	for (int i = 0; i < scope_count; i++)
		names[i] = CStringGetTextDatum(scope_queues[i]);
	queues = construct_array(names, scope_count, TEXTOID, -1, false, TYPALIGN_INT);
	MemoryContextSwitchTo(old);
	return queues;
}

/*
 * DurableCheckOperatorQueue
 *		An operator's call on a queue: a queue operator acts on the queues
 *		it may work on only (42501); an operator of every queue passes.
 *		DurableCheckOperatorTask is its task's.
 */
void
DurableCheckOperatorQueue(const char *queue)
{
	if (DurableCallerIsQueueOperator())
		DurableCheckQueueAccess(queue, DURABLE_PRIV_WORK);
}

/*
 * DurableReportUnknownTask
 *		A worker's call named a task that does not exist.  A role that may
 *		not work on some restricted queue is told what it is told about
 *		that queue's tasks (42501), or the answer would tell which ids
 *		exist there; anyone else is told the task does not exist (42704).
 */
void
DurableReportUnknownTask(int64 task_id)
{
	if (!DurableMayWorkOnEveryQueue())
		DurableReportTaskDenied(task_id);
	ereport(ERROR,
			errcode(ERRCODE_UNDEFINED_OBJECT),
			errmsg("task %lld does not exist", (long long) task_id));
}

/*
 * The queue restricted from now on, and the name of its grants sequence:
 * the one it has, or $grants_sequence (grants_sequence_name).  The name
 * is computed here and not in the statement: Citus refuses a function that
 * is not immutable inside COALESCE in an UPDATE of a reference table
 * (0A000).
 */
enum
{
	RESTRICT_QUEUE,
	RESTRICT_GRANTS_SEQUENCE,
	RESTRICT_NPARAMS
};
static const DurableParam queue_restrict_params[RESTRICT_NPARAMS] = {
	[RESTRICT_QUEUE] = {"queue", TEXTOID},
	[RESTRICT_GRANTS_SEQUENCE] = {"grants_sequence", TEXTOID},
};
static DurableStatement queue_restrict = {
	.name = "queue_restrict",
	.sql = "UPDATE durable.queues SET restricted = true,"
	" grants_sequence = COALESCE(grants_sequence, $grants_sequence)"
	" WHERE queue_name = $queue"
	" RETURNING restricted, grants_sequence",
	DURABLE_PARAMS(queue_restrict_params),
	DURABLE_COLUMNS(access_columns),
};

/*
 * grants_sequence_name
 *		The name a queue's grants sequence gets: queue_grants_ and the first
 *		16 bytes of the SHA-256 of the queue's name in UTF-8, in hex (as the
 *		update to 0.9.0 names those of the queues restricted before it).
 */
static char *
grants_sequence_name(const char *queue)
{
	char	   *utf8 = pg_server_to_any(queue, strlen(queue), PG_UTF8);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char		hex[32 + 1];

	DurableSha256(utf8, strlen(utf8), digest);
	hex[hex_encode((const char *) digest, 16, hex)] = '\0';
	return psprintf("queue_grants_%s", hex);
}

/* run one utility statement of the grants */
static void
run_utility(const char *sql)
{
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not run \"%s\"", sql);
}

/*
 * create_grants_sequence
 *		The queue's grants sequence, of which the owner (durable's, whose
 *		rights the API runs with) keeps no privilege.  It is owned by the
 *		column that names it, so that DROP EXTENSION takes it along: the
 *		dependency that OWNED BY records, recorded here, since Citus
 *		refuses a sequence OWNED BY a column of its tables (0A000), and
 *		durable.queues is one on a cluster.
 */
static void
create_grants_sequence(const char *queue, const char *name)
{
	const char *qualified = quote_qualified_identifier(DURABLE_SCHEMA, name);
	Oid			queues = get_relname_relid("queues",
										   get_namespace_oid(DURABLE_SCHEMA, false));
	ObjectAddress sequence;
	ObjectAddress column;

	run_utility(psprintf("CREATE SEQUENCE %s", qualified));
	ObjectAddressSet(sequence, RelationRelationId, grants_relid(name));
	ObjectAddressSubSet(column, RelationRelationId, queues,
						get_attnum(queues, "grants_sequence"));
	if (!OidIsValid(sequence.objectId) || column.objectSubId == InvalidAttrNumber)
		elog(ERROR, "could not find the grants sequence of queue \"%s\"", queue);
	recordDependencyOn(&sequence, &column, DEPENDENCY_AUTO);
	run_utility(psprintf("REVOKE ALL ON SEQUENCE %s FROM CURRENT_USER", qualified));
	run_utility(psprintf("COMMENT ON SEQUENCE %s IS %s", qualified,
						 quote_literal_cstr(psprintf("the grants of queue \"%s\" (durable_grant_queue): UPDATE to enqueue, USAGE to work; nothing else uses it",
													 queue))));
}

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
	DurableResult res;
	char	   *name;
	const char *role;
	const char *privileges;

	DurableQueueGet(queue, &settings);
	if (grant)
	{
		Datum		args[RESTRICT_NPARAMS];

		args[RESTRICT_QUEUE] = CStringGetTextDatum(queue);
		args[RESTRICT_GRANTS_SEQUENCE] = CStringGetTextDatum(grants_sequence_name(queue));
		res = DurableRun(&queue_restrict, args, NULL, SPI_OK_UPDATE_RETURNING, 1);
	}
	else
		res = read_access(queue);
	name = row_sequence(res, 0);
	if (!OidIsValid(grants_relid(name)))
	{
		/* a revoke of a queue never granted has nothing to take back */
		if (!grant)
			return;
		create_grants_sequence(queue, name);
	}
	role = OidIsValid(grantee) ?
		quote_identifier(GetUserNameFromId(grantee, false)) : "PUBLIC";
	privileges = enqueue && work ?
		psprintf("%s, %s", privilege_sql[DURABLE_PRIV_ENQUEUE],
				 privilege_sql[DURABLE_PRIV_WORK]) :
		privilege_sql[enqueue ? DURABLE_PRIV_ENQUEUE : DURABLE_PRIV_WORK];
	run_utility(psprintf("%s %s ON SEQUENCE %s %s %s",
						 grant ? "GRANT" : "REVOKE", privileges,
						 quote_qualified_identifier(DURABLE_SCHEMA, name),
						 grant ? "TO" : "FROM", role));
}

/*
 * DurableDropQueueGrants
 *		Drop the grants sequence of a queue that is being dropped, if it has
 *		one: its grants go with the queue.
 */
void
DurableDropQueueGrants(const char *queue)
{
	DurableResult res = read_access(queue);
	char	   *name;

	if (res.rows == 0)
		return;
	name = row_sequence(res, 0);
	if (OidIsValid(grants_relid(name)))
		run_utility(psprintf("DROP SEQUENCE %s",
							 quote_qualified_identifier(DURABLE_SCHEMA, name)));
}
