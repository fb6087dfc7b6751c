/*-------------------------------------------------------------------------
 *
 * samples.c
 *	  The queues' counts and counters, sampled once a minute by the tick
 *	  into durable.samples (read through the view durable.queue_samples)
 *	  and kept for two days: what charts over
 *	  hours read (the console's), whoever was connected meanwhile.
 *
 * A sample is a row per queue at the start of its minute (UTC, on the
 * epoch's minutes): the unfinished tasks by state and the age of the
 * oldest due one, from durable.queue_gauges, and the counters of this
 * server since they last started (durable.queue_counters(), preloaded
 * only; NULL without), from which a reader takes rates.  One tick of
 * one reconciler takes a minute's sample: another at work meanwhile (a
 * second reconciler, durable_reconcile() from a session) skips it,
 * without waiting.  On Citus the coordinator samples, with its own
 * counters.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/pg_type.h"
#include "utils/timestamp.h"

/* how often, and for how long samples are kept (48 hours: no calendar day) */
#define DURABLE_SAMPLE_EVERY_USECS	(60 * USECS_PER_SEC)
#define DURABLE_SAMPLES_KEPT_USECS	(48 * USECS_PER_HOUR)

enum
{
	SAMPLE_AT,
	SAMPLE_NPARAMS
};
static const DurableParam sample_params[SAMPLE_NPARAMS] = {
	[SAMPLE_AT] = {"at", TIMESTAMPTZOID},
};

/*
 * Whether this transaction takes the minute's sample: nobody took it, and
 * no other maintainer takes it now.  The lock is the one transaction-
 * scoped advisory lock on the table's OID, as durable.maintain_history
 * takes on its own table's.
 */
static const DurableColumn sample_due_columns[] = {
	{"due", BOOLOID},
};
static DurableStatement sample_due = {
	.name = "sample_due",
	.sql = "SELECT pg_catalog.pg_try_advisory_xact_lock("
	"  'durable.samples'::pg_catalog.regclass::pg_catalog.oid::pg_catalog.int8)"
	" AND NOT EXISTS (SELECT FROM durable.samples s WHERE s.at = $at) AS due",
	DURABLE_PARAMS(sample_params),
	DURABLE_COLUMNS(sample_due_columns),
};

/*
 * The gauges of every queue, then this server's counters: two statements,
 * so that on Citus the first reads the shards and the second only this
 * node's shared memory.
 */
static DurableStatement take_sample = {
	.name = "take_sample",
	.sql = "INSERT INTO durable.samples (at, queue_name, ready, running, waiting,"
	" needs_review, oldest_ready_age_seconds)"
	" SELECT $at, g.queue_name, g.ready, g.running, g.waiting, g.needs_review,"
	" g.oldest_ready_age_seconds FROM durable.queue_gauges g",
	DURABLE_PARAMS(sample_params),
};

static DurableStatement count_sample = {
	.name = "count_sample",
	.sql = "UPDATE durable.samples s SET enqueued = c.enqueued, completed = c.completed,"
	" failed = c.failed, dead_lettered = c.dead_lettered,"
	" leases_expired = c.leases_expired, sent_to_review = c.sent_to_review,"
	" counters_since = c.stats_reset"
	" FROM durable.queue_counters() c"
	" WHERE s.at = $at AND s.queue_name = c.queue_name",
	DURABLE_PARAMS(sample_params),
};

enum
{
	FORGET_BEFORE,
	FORGET_NPARAMS
};
static const DurableParam forget_params[FORGET_NPARAMS] = {
	[FORGET_BEFORE] = {"before", TIMESTAMPTZOID},
};
static DurableStatement forget_samples = {
	.name = "forget_samples",
	.sql = "DELETE FROM durable.samples WHERE at < $before",
	DURABLE_PARAMS(forget_params),
};

static uint64
sample_queues(void *arg)
{
	TimestampTz at = *(TimestampTz *) arg;
	Datum		args[SAMPLE_NPARAMS];
	Datum		before[FORGET_NPARAMS];
	uint64		taken;

	args[SAMPLE_AT] = TimestampTzGetDatum(at);
	if (!DurableGetBool(DurableRun(&sample_due, args, NULL, SPI_OK_SELECT, 1), 0, 0))
		return 0;
	taken = DurableRun(&take_sample, args, NULL, SPI_OK_INSERT, 0).rows;
	(void) DurableRun(&count_sample, args, NULL, SPI_OK_UPDATE, 0);
	before[FORGET_BEFORE] = TimestampTzGetDatum(at - DURABLE_SAMPLES_KEPT_USECS);
	(void) DurableRun(&forget_samples, before, NULL, SPI_OK_DELETE, 0);
	return taken;
}

/*
 * DurableSampleQueues
 *		The tick's part that samples the queues, once a minute: returns how
 *		many rows it wrote (none when this minute has its sample).
 */
uint64
DurableSampleQueues(TimestampTz now)
{
	static TimestampTz last_minute = 0;
	TimestampTz minute = now - (now % DURABLE_SAMPLE_EVERY_USECS);
	uint64		taken = 0;

	/* a timestamp before 2000 is negative: its minute starts earlier */
	if (now < 0 && now % DURABLE_SAMPLE_EVERY_USECS != 0)
		minute -= DURABLE_SAMPLE_EVERY_USECS;
	if (DurableCitusWorker() || minute == last_minute)
		return 0;
	last_minute = minute;
	(void) DurableRunPart("queue samples", sample_queues, &minute, &taken);
	return taken;
}
