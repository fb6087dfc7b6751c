/*-------------------------------------------------------------------------
 *
 * metrics.c
 *	  Metrics from the database (README, "Metrics"): the counters durable
 *	  keeps in shared memory (store/counters.c) per queue, and all of it in
 *	  Prometheus' text exposition format, with the gauges of the live
 *	  tasks, for a scraper that has nothing but SQL.
 *
 * Nothing here reads history: the counters are monotonic in shared memory,
 * and the gauges count durable.live_tasks, which holds unfinished tasks
 * only, so a scrape costs the same with ten million finished tasks kept.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* a counter's name in SQL (durable.queue_counters) and in Prometheus */
typedef struct CounterName
{
	const char *column;
	const char *metric;
	const char *help;
	const char *decision;		/* a resolve decision: one metric, labelled */
} CounterName;

static const CounterName counter_names[DURABLE_NCOUNTERS] = {
	[DURABLE_COUNT_ENQUEUED] = {"enqueued", "durable_tasks_enqueued_total", "Tasks enqueued (not counting idempotent replays).", NULL},
	[DURABLE_COUNT_CLAIMED] = {"claimed", "durable_tasks_claimed_total", "Tasks handed out by claims.", NULL},
	[DURABLE_COUNT_COMPLETED] = {"completed", "durable_tasks_completed_total", "Tasks that completed.", NULL},
	[DURABLE_COUNT_FAILED] = {"failed", "durable_attempts_failed_total", "Attempts that failed (durable_fail, a failed step).", NULL},
	[DURABLE_COUNT_CANCELLED] = {"cancelled", "durable_tasks_cancelled_total", "Tasks cancelled.", NULL},
	[DURABLE_COUNT_RETRIED] = {"retried", "durable_retries_scheduled_total", "Retries scheduled, after a failure or an expired lease.", NULL},
	[DURABLE_COUNT_LEASES_EXPIRED] = {"leases_expired", "durable_leases_expired_total", "Expired leases settled through the recovery table.", NULL},
	[DURABLE_COUNT_SENT_TO_REVIEW] = {"sent_to_review", "durable_tasks_sent_to_review_total", "Tasks that went to needs_review.", NULL},
	[DURABLE_COUNT_RESOLVED_MARK_COMMITTED] = {"resolved_mark_committed", "durable_reviews_resolved_total", "Decisions of durable_resolve(), by decision.", "mark_committed"},
	[DURABLE_COUNT_RESOLVED_MARK_NOT_EXECUTED] = {"resolved_mark_not_executed", "durable_reviews_resolved_total", NULL, "mark_not_executed"},
	[DURABLE_COUNT_RESOLVED_MARK_FAILED] = {"resolved_mark_failed", "durable_reviews_resolved_total", NULL, "mark_failed"},
	[DURABLE_COUNT_RESOLVED_RETRY] = {"resolved_retry", "durable_reviews_resolved_total", NULL, "retry"},
	[DURABLE_COUNT_RESOLVED_CANCEL] = {"resolved_cancel", "durable_reviews_resolved_total", NULL, "cancel"},
	[DURABLE_COUNT_DEAD_LETTERED] = {"dead_lettered", "durable_tasks_dead_lettered_total", "Tasks that ended failed (dead letters).", NULL},
	[DURABLE_COUNT_QUARANTINED] = {"quarantined", "durable_tasks_quarantined_total", "Tasks quarantined into dead letters.", NULL},
	[DURABLE_COUNT_REPLAYED] = {"replayed", "durable_tasks_replayed_total", "Dead letters replayed.", NULL},
	[DURABLE_COUNT_MIGRATED] = {"migrated", "durable_tasks_migrated_total", "Tasks migrated to other versions.", NULL},
	[DURABLE_COUNT_STALE_WRITES] = {"stale_writes", "durable_stale_writes_refused_total", "Writes refused for a stale fence (55U01).", NULL},
	[DURABLE_COUNT_VERSION_CONFLICTS] = {"version_conflicts", "durable_version_conflicts_total", "Compare-and-swap conflicts (55U02).", NULL},
	[DURABLE_COUNT_IDEMPOTENT_REPLAYS] = {"idempotent_replays", "durable_idempotent_replays_total", "Enqueues that returned the task of their idempotency key.", NULL},
	[DURABLE_COUNT_EVENTS_EMITTED] = {"events_emitted", "durable_events_emitted_total", "Events emitted for the first time.", NULL},
	[DURABLE_COUNT_WAKEUPS] = {"wakeups", "durable_wakeups_total", "Waiting tasks woken by an event or a child.", NULL},
	[DURABLE_COUNT_RATE_LIMITED] = {"rate_limited", "durable_rate_limited_total", "Tasks a claim deferred for want of room in a rate limit.", NULL},
};

static const char *const histogram_names[DURABLE_NHISTOGRAMS][2] = {
	[DURABLE_HIST_QUEUE_LATENCY] = {"durable_queue_latency_seconds", "Time from a task's due time to its claim."},
	[DURABLE_HIST_RUN_TIME] = {"durable_run_time_seconds", "Time from a task's last claim to its finish."},
};

/*
 * durable.queue_counters() RETURNS SETOF record
 *
 * Each queue's counters (queue "" for the queues past
 * durable.counters_queues), and when they were last reset: the rows of
 * the view durable.queue_counters.  No row without preloading.
 */
PG_FUNCTION_INFO_V1(durable_queue_counters);
Datum
durable_queue_counters(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DurableQueueCounters *queues;
	DurableTickCounters ticks;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != DURABLE_NCOUNTERS + 2)
		elog(ERROR, "durable.queue_counters() is declared with %d columns, not %d",
			 rsinfo->setDesc->natts, DURABLE_NCOUNTERS + 2);
	n = DurableCountersRead(&queues, &ticks);
	for (int i = 0; i < n; i++)
	{
		Datum		values[DURABLE_NCOUNTERS + 2];
		bool		nulls[DURABLE_NCOUNTERS + 2] = {0};

		values[0] = CStringGetTextDatum(queues[i].queue);
		for (int c = 0; c < DURABLE_NCOUNTERS; c++)
			values[c + 1] = Int64GetDatum((int64) queues[i].counts[c]);
		values[DURABLE_NCOUNTERS + 1] = TimestampTzGetDatum(ticks.reset_at);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * durable_reset_counters() RETURNS void
 *
 * Zeroes every counter and histogram; Prometheus' rate() takes a reset
 * as one.
 */
PG_FUNCTION_INFO_V1(durable_reset_counters);
Datum
durable_reset_counters(PG_FUNCTION_ARGS)
{
	if (!DurableCountersAvailable())
		ereport(ERROR,
				errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				errmsg("durable must be loaded via \"shared_preload_libraries\" to keep counters"),
				errhint("Add durable to shared_preload_libraries and restart the server."));
	DurableCountersReset();
	PG_RETURN_VOID();
}

/* a label value as the exposition format quotes it */
static void
append_label(StringInfo buf, const char *name, const char *value)
{
	appendStringInfo(buf, "%s=\"", name);
	for (const char *p = value; *p; p++)
	{
		if (*p == '\\' || *p == '"')
			appendStringInfoChar(buf, '\\');
		if (*p == '\n')
			appendStringInfoString(buf, "\\n");
		else
			appendStringInfoChar(buf, *p);
	}
	appendStringInfoChar(buf, '"');
}

static void
append_header(StringInfo buf, const char *metric, const char *type,
			  const char *help)
{
	appendStringInfo(buf, "# HELP %s %s\n# TYPE %s %s\n", metric, help, metric, type);
}

static void
append_counters(StringInfo buf, DurableQueueCounters *queues, int n)
{
	for (int c = 0; c < DURABLE_NCOUNTERS; c++)
	{
		const CounterName *name = &counter_names[c];

		if (name->help != NULL)
			append_header(buf, name->metric, "counter", name->help);
		for (int i = 0; i < n; i++)
		{
			appendStringInfo(buf, "%s{", name->metric);
			append_label(buf, "queue", queues[i].queue);
			if (name->decision != NULL)
			{
				appendStringInfoChar(buf, ',');
				append_label(buf, "decision", name->decision);
			}
			appendStringInfo(buf, "} " UINT64_FORMAT "\n", queues[i].counts[c]);
		}
	}
	for (int h = 0; h < DURABLE_NHISTOGRAMS; h++)
	{
		const char *metric = histogram_names[h][0];

		append_header(buf, metric, "histogram", histogram_names[h][1]);
		for (int i = 0; i < n; i++)
		{
			uint64		cumulative = 0;

			for (int b = 0; b <= DURABLE_HISTOGRAM_BUCKETS; b++)
			{
				cumulative += queues[i].buckets[h][b];
				appendStringInfo(buf, "%s_bucket{", metric);
				append_label(buf, "queue", queues[i].queue);
				if (b < DURABLE_HISTOGRAM_BUCKETS)
					appendStringInfo(buf, ",le=\"%g\"} " UINT64_FORMAT "\n",
									 durable_histogram_bounds[b], cumulative);
				else
					appendStringInfo(buf, ",le=\"+Inf\"} " UINT64_FORMAT "\n", cumulative);
			}
			appendStringInfo(buf, "%s_sum{", metric);
			append_label(buf, "queue", queues[i].queue);
			appendStringInfo(buf, "} %.6f\n", (double) queues[i].sum_us[h] / USECS_PER_SEC);
			appendStringInfo(buf, "%s_count{", metric);
			append_label(buf, "queue", queues[i].queue);
			appendStringInfo(buf, "} " UINT64_FORMAT "\n", cumulative);
		}
	}
}

/* the gauges of a queue: the live tasks, and the reconciler's failures */
enum
{
	GAUGE_QUEUE,
	GAUGE_PAUSED,
	GAUGE_READY,
	GAUGE_RUNNING,
	GAUGE_WAITING,
	GAUGE_NEEDS_REVIEW,
	GAUGE_SCHEDULED,
	GAUGE_OLDEST_READY,
	GAUGE_OLDEST_HEARTBEAT,
	GAUGE_NCOLUMNS
};

static const DurableColumn gauge_columns[GAUGE_NCOLUMNS] = {
	[GAUGE_QUEUE] = {"queue_name", TEXTOID},
	[GAUGE_PAUSED] = {"paused", BOOLOID},
	[GAUGE_READY] = {"ready", INT8OID},
	[GAUGE_RUNNING] = {"running", INT8OID},
	[GAUGE_WAITING] = {"waiting", INT8OID},
	[GAUGE_NEEDS_REVIEW] = {"needs_review", INT8OID},
	[GAUGE_SCHEDULED] = {"scheduled", INT8OID},
	[GAUGE_OLDEST_READY] = {"oldest_ready", FLOAT8OID},
	[GAUGE_OLDEST_HEARTBEAT] = {"oldest_heartbeat", FLOAT8OID},
};

/* the view durable.queue_gauges: the live tasks only */
static DurableStatement live_gauges = {
	.name = "live_gauges",
	.sql = "SELECT queue_name, paused OR paused_partitions <> '{}' AS paused,"
	" ready, running, waiting, needs_review, scheduled,"
	" oldest_ready_age_seconds AS oldest_ready,"
	" oldest_heartbeat_age_seconds AS oldest_heartbeat"
	" FROM durable.queue_gauges ORDER BY queue_name",
	.nargs = 0,
	DURABLE_COLUMNS(gauge_columns),
};

enum
{
	FAILING_PARTS,
	FAILING_NCOLUMNS
};

static const DurableColumn failing_columns[FAILING_NCOLUMNS] = {
	[FAILING_PARTS] = {"parts", INT8OID},
};

static DurableStatement failing_parts = {
	.name = "failing_parts",
	.sql = "SELECT pg_catalog.count(*) AS parts FROM durable.tick_failures",
	.nargs = 0,
	DURABLE_COLUMNS(failing_columns),
};

/* the fair queues' keys, per queue (the view durable.fairness_keys) */
enum
{
	FAIR_QUEUE,
	FAIR_KEYS_READY,
	FAIR_UNADMITTED,
	FAIR_OLDEST_READY,
	FAIR_NCOLUMNS
};

static const DurableColumn fair_columns[FAIR_NCOLUMNS] = {
	[FAIR_QUEUE] = {"queue_name", TEXTOID},
	[FAIR_KEYS_READY] = {"keys_ready", INT8OID},
	[FAIR_UNADMITTED] = {"unadmitted", INT8OID},
	[FAIR_OLDEST_READY] = {"oldest_ready", FLOAT8OID},
};

static DurableStatement fair_gauges = {
	.name = "fair_gauges",
	.sql = "SELECT queue_name, pg_catalog.count(*) FILTER (WHERE ready > 0) AS keys_ready,"
	" pg_catalog.sum(unadmitted)::int8 AS unadmitted,"
	" pg_catalog.max(oldest_ready_age_seconds) AS oldest_ready"
	" FROM durable.fairness_keys GROUP BY queue_name ORDER BY queue_name",
	.nargs = 0,
	DURABLE_COLUMNS(fair_columns),
};

/* the spend budgets (the view durable.budgets), but the tasks' own */
enum
{
	BUDGET_NAME,
	BUDGET_AMOUNT,
	BUDGET_RESERVED,
	BUDGET_SPENT,
	BUDGET_REMAINING,
	BUDGET_NCOLUMNS
};

static const DurableColumn budget_columns[BUDGET_NCOLUMNS] = {
	[BUDGET_NAME] = {"name", TEXTOID},
	[BUDGET_AMOUNT] = {"amount", FLOAT8OID},
	[BUDGET_RESERVED] = {"reserved", FLOAT8OID},
	[BUDGET_SPENT] = {"spent", FLOAT8OID},
	[BUDGET_REMAINING] = {"remaining", FLOAT8OID},
};

static DurableStatement budget_gauges = {
	.name = "budget_gauges",
	.sql = "SELECT name, amount::float8 AS amount, reserved::float8 AS reserved,"
	" spent::float8 AS spent, remaining::float8 AS remaining"
	" FROM durable.budgets WHERE name NOT LIKE 'task:%' ORDER BY name",
	.nargs = 0,
	DURABLE_COLUMNS(budget_columns),
};

static void
append_gauge(StringInfo buf, const char *metric, const char *queue,
			 const char *state, double value)
{
	appendStringInfo(buf, "%s{", metric);
	append_label(buf, "queue", queue);
	if (state != NULL)
	{
		appendStringInfoChar(buf, ',');
		append_label(buf, "state", state);
	}
	appendStringInfo(buf, "} %.15g\n", value);
}

/* a gauge of each queue of res (its first column), from a bigint or float8 column */
static void
append_queue_gauge(StringInfo buf, const char *metric, const char *help,
				   DurableResult res, int column, bool integer)
{
	bool		isnull;

	append_header(buf, metric, "gauge", help);
	for (uint64 r = 0; r < res.rows; r++)
		append_gauge(buf, metric, DurableGetText(res, r, 0), NULL,
					 integer ? (double) DurableGetInt64(res, r, column) :
					 DatumGetFloat8(DurableGetDatum(res, r, column, &isnull)));
}

/* each spend budget's amount, what is reserved, spent (this period) and left */
static void
append_budget_gauges(StringInfo buf)
{
	DurableResult res = DurableRun(&budget_gauges, NULL, NULL, SPI_OK_SELECT, 0);
	static const struct
	{
		int			column;
		const char *metric;
		const char *help;
	}			gauges[] = {
		{BUDGET_AMOUNT, "durable_budget_amount", "A spend budget's amount (per period, when it has one)."},
		{BUDGET_RESERVED, "durable_budget_reserved", "What started steps have reserved from a spend budget and not settled."},
		{BUDGET_SPENT, "durable_budget_spent", "What settled steps spent of a spend budget in its current period."},
		{BUDGET_REMAINING, "durable_budget_remaining", "What a spend budget has left: amount - reserved - spent."},
	};

	for (int g = 0; g < (int) lengthof(gauges); g++)
	{
		append_header(buf, gauges[g].metric, "gauge", gauges[g].help);
		for (uint64 r = 0; r < res.rows; r++)
		{
			bool		isnull;

			appendStringInfo(buf, "%s{", gauges[g].metric);
			append_label(buf, "budget", DurableGetText(res, r, BUDGET_NAME));
			appendStringInfo(buf, "} %.15g\n",
							 DatumGetFloat8(DurableGetDatum(res, r, gauges[g].column, &isnull)));
		}
	}
}

static void
append_gauges(StringInfo buf)
{
	DurableResult res = DurableRun(&live_gauges, NULL, NULL, SPI_OK_SELECT, 0);
	uint64		n = res.rows;
	static const struct
	{
		int			column;
		const char *state;
	}			states[] = {
		{GAUGE_READY, "ready"}, {GAUGE_RUNNING, "running"},
		{GAUGE_WAITING, "waiting"}, {GAUGE_NEEDS_REVIEW, "needs_review"},
		{GAUGE_SCHEDULED, "scheduled"},
	};

	append_header(buf, "durable_tasks", "gauge",
				  "Unfinished tasks by state: ready (due), running, waiting (not due: a wait or a retry), needs_review, scheduled (due later, of those ready or waiting).");
	for (uint64 r = 0; r < n; r++)
		for (int s = 0; s < (int) lengthof(states); s++)
			append_gauge(buf, "durable_tasks", DurableGetText(res, r, GAUGE_QUEUE),
						 states[s].state,
						 (double) DurableGetInt64(res, r, states[s].column));
	append_queue_gauge(buf, "durable_oldest_ready_age_seconds",
					   "Age of the oldest task that is due and not claimed (0 for none).",
					   res, GAUGE_OLDEST_READY, false);
	append_queue_gauge(buf, "durable_oldest_heartbeat_age_seconds",
					   "Age of the oldest heartbeat of a running task (0 for none).",
					   res, GAUGE_OLDEST_HEARTBEAT, false);
	append_header(buf, "durable_queue_paused", "gauge",
				  "1 when the queue or one of its partitions is paused.");
	for (uint64 r = 0; r < n; r++)
		append_gauge(buf, "durable_queue_paused", DurableGetText(res, r, GAUGE_QUEUE), NULL,
					 DurableGetBool(res, r, GAUGE_PAUSED) ? 1 : 0);

	res = DurableRun(&fair_gauges, NULL, NULL, SPI_OK_SELECT, 0);
	append_queue_gauge(buf, "durable_fairness_keys_ready",
					   "Fairness keys of a fair queue with a task due and not claimed.",
					   res, FAIR_KEYS_READY, true);
	append_queue_gauge(buf, "durable_fairness_unadmitted_tasks",
					   "Tasks of a fair queue that are due and still wait for their pass (the reconciler gives it).",
					   res, FAIR_UNADMITTED, true);
	append_queue_gauge(buf, "durable_fairness_oldest_ready_age_seconds",
					   "Of a fair queue's keys, the largest age of a key's oldest task that is due and not claimed.",
					   res, FAIR_OLDEST_READY, false);
	append_budget_gauges(buf);
}

/*
 * durable_metrics_prometheus() RETURNS text
 *
 * Every counter and histogram, per queue, and the gauges of the live
 * tasks and of the reconciler, in Prometheus' text exposition format
 * (version 0.0.4).  Without preloading the counters are not kept:
 * durable_counters_available is 0, and the gauges are there all the same.
 */
PG_FUNCTION_INFO_V1(durable_metrics_prometheus);
Datum
durable_metrics_prometheus(PG_FUNCTION_ARGS)
{
	DurableResult res;
	TimestampTz now = GetCurrentTimestamp();
	StringInfoData buf;
	DurableQueueCounters *queues;
	DurableTickCounters ticks;
	int			n;

	initStringInfo(&buf);
	n = DurableCountersRead(&queues, &ticks);
	append_header(&buf, "durable_counters_available", "gauge",
				  "1 when durable keeps its counters: it is preloaded (shared_preload_libraries) and durable.counters is on.");
	appendStringInfo(&buf, "durable_counters_available %d\n",
					 DurableCountersAvailable() && durable_counting ? 1 : 0);
	append_counters(&buf, queues, n);

	append_header(&buf, "durable_reconciler_ticks_total", "counter",
				  "Ticks of reconciliation run (the reconciler's and durable_reconcile()'s).");
	appendStringInfo(&buf, "durable_reconciler_ticks_total " UINT64_FORMAT "\n", ticks.ticks);
	append_header(&buf, "durable_reconciler_lag_seconds", "gauge",
				  "Time since the last tick of reconciliation ended (NaN before the first).");
	if (ticks.last_tick_at == 0)
		appendStringInfoString(&buf, "durable_reconciler_lag_seconds NaN\n");
	else
		appendStringInfo(&buf, "durable_reconciler_lag_seconds %.6f\n",
						 (double) (now - ticks.last_tick_at) / USECS_PER_SEC);

	SPI_connect();
	append_gauges(&buf);
	res = DurableRun(&failing_parts, NULL, NULL, SPI_OK_SELECT, 1);
	append_header(&buf, "durable_reconciler_failing_parts", "gauge",
				  "Parts of the tick that fail (durable.status).");
	appendStringInfo(&buf, "durable_reconciler_failing_parts " INT64_FORMAT "\n",
					 DurableGetInt64(res, 0, FAILING_PARTS));
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}
