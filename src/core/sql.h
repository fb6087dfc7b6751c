/*-------------------------------------------------------------------------
 *
 * sql.h
 *	  Fragments of SQL that the statements of more than one core module
 *	  share: the queue of a moved task, times on the UTC calendar, a
 *	  lease renewed, the deadline of a wait, what an enqueue records of a
 *	  task's version.  The rows of a task and a step are row.h's.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_CORE_SQL_H
#define DURABLE_CORE_SQL_H


#define QUEUE_OF_U " LEFT JOIN durable.queues q ON q.queue_name = u.queue_name"

/* the event of an enqueue: the versions it pinned the task to, if any */
#define ENQUEUE_DETAIL(param) \
	"CASE WHEN " param "::text IS NOT NULL" \
	" THEN pg_catalog.jsonb_build_object('versions'," \
	"  pg_catalog.jsonb_build_object('workflow', " param "::text)) END"

/* a task enqueued with a workflow_version is pinned to it */
#define PINNED_AT_ENQUEUE(param) \
	"CASE WHEN " param "::text IS NOT NULL" \
	" THEN pg_catalog.jsonb_build_object('workflow', " param "::text) END"

/*
 * A time plus or minus an interval on the UTC calendar, whatever the
 * session's TimeZone (as DurableTimePlus adds in C): a day is 24 hours.
 */
#define UTC_PLUS(time, op, span) \
	"pg_catalog.timezone('UTC', pg_catalog.timezone('UTC', " time ") " op " " span ")"

/*
 * The SET clause that renews the lease of a task (of table alias, "t." or
 * "") to $now + $lease, or its own lease where $lease is NULL.
 */
#define RENEW_LEASE(alias) \
	" lease = COALESCE($lease, " alias "lease)," \
	" lease_until = " UTC_PLUS("$now", "+", "COALESCE($lease, " alias "lease)") "," \
	" heartbeat_at = $now"

/* where a wait's deadline is kept in its entry of a task's waits */
#define WAIT_UNTIL(entry) "(" entry " ->> 'until')::pg_catalog.timestamptz"


#endif							/* DURABLE_CORE_SQL_H */
