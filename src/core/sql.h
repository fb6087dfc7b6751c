/*-------------------------------------------------------------------------
 *
 * sql.h
 *	  Fragments of SQL that the statements of more than one core module
 *	  share: the queue of a moved task, times on the UTC calendar, a
 *	  lease renewed, the deadline of a wait.  The rows of a task and a step are row.h's.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_CORE_SQL_H
#define DURABLE_CORE_SQL_H


#define QUEUE_OF_U " LEFT JOIN durable.queues q ON q.queue_name = u.queue_name"

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
