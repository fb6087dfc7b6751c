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
 * The same samples come as rows from durable.metric_samples(), so that a
 * scraper that runs SQL exposes them under the same names.
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/json.h"
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
	[DURABLE_COUNT_STEPS_STARTED] = {"steps_started", "durable_steps_started_total", "Attempts of steps started.", NULL},
	[DURABLE_COUNT_STEPS_LEFT_IN_DOUBT] = {"steps_left_in_doubt", "durable_steps_left_in_doubt_total", "Steps a lost lease left started or unknown: outcomes nobody knew.", NULL},
	[DURABLE_COUNT_DUPLICATE_EFFECTS] = {"duplicate_effects", "durable_duplicate_effects_total", "Receipts whose effect id differs from the one their step recorded before (should stay 0).", NULL},
	[DURABLE_COUNT_FINISHED_AFTER_EXPIRY] = {"finished_after_expiry", "durable_tasks_finished_after_expiry_total", "Tasks that finished after a lease of theirs expired.", NULL},
	[DURABLE_COUNT_RECOVERED] = {"recovered", "durable_tasks_recovered_total", "Tasks that completed after a lease of theirs expired.", NULL},
};

static const char *const histogram_names[DURABLE_NHISTOGRAMS][2] = {
	[DURABLE_HIST_QUEUE_LATENCY] = {"durable_queue_latency_seconds", "Time from a task's due time to its claim."},
	[DURABLE_HIST_RUN_TIME] = {"durable_run_time_seconds", "Time from a task's last claim to its finish."},
	[DURABLE_HIST_RECOVERY_TIME] = {"durable_recovery_time_seconds", "Time from a task's first expired lease to its completion."},
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

/*
 * Where the samples go: the exposition text of durable_metrics_prometheus(),
 * or the rows of durable.metric_samples(), for a scraper that runs SQL
 * queries (a stock postgres_exporter) and must see the same names.  A
 * sink may want only some families: the groups of metrics it does not
 * want are not computed.
 */
typedef struct Sink
{
	StringInfo	text;			/* the exposition, or NULL */
	Tuplestorestate *rows;		/* else the rows, of desc */
	TupleDesc	desc;
	Datum	   *families;		/* the families wanted, or NULL for all */
	bool	   *family_nulls;
	int			nfamilies;
} Sink;

/* how a value is written in the exposition */
typedef enum ValueFormat
{
	AS_INTEGER,					/* a count */
	AS_FIXED,					/* seconds, to the microsecond */
	AS_GENERAL					/* any other gauge */
} ValueFormat;

/* a label: name and value */
typedef struct Label
{
	const char *name;
	const char *value;
} Label;

static bool
wants(const Sink *sink, const char *family)
{
	if (sink->families == NULL)
		return true;
	for (int i = 0; i < sink->nfamilies; i++)
		if (!sink->family_nulls[i] &&
			strcmp(TextDatumGetCString(sink->families[i]), family) == 0)
			return true;
	return false;
}

/* whether any of the families, a NULL-terminated list, is wanted */
static bool
wants_any(const Sink *sink, const char *const *families)
{
	for (; *families != NULL; families++)
		if (wants(sink, *families))
			return true;
	return false;
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

/* a family's HELP and TYPE, in the exposition */
static void
family_header(Sink *sink, const char *family, const char *type, const char *help)
{
	if (sink->text != NULL)
		appendStringInfo(sink->text, "# HELP %s %s\n# TYPE %s %s\n",
						 family, help, family, type);
}

/* one sample of a family (suffix: "_bucket", "_sum", "_count" or "") */
static void
emit(Sink *sink, const char *family, const char *suffix, const Label *labels,
	 int nlabels, double value, ValueFormat format)
{
	if (sink->text != NULL)
	{
		StringInfo	buf = sink->text;

		appendStringInfo(buf, "%s%s", family, suffix);
		for (int i = 0; i < nlabels; i++)
		{
			appendStringInfoChar(buf, i == 0 ? '{' : ',');
			append_label(buf, labels[i].name, labels[i].value);
		}
		if (nlabels > 0)
			appendStringInfoChar(buf, '}');
		if (isnan(value))
			appendStringInfoString(buf, " NaN\n");
		else if (format == AS_INTEGER)
			appendStringInfo(buf, " %.0f\n", value);
		else if (format == AS_FIXED)
			appendStringInfo(buf, " %.6f\n", value);
		else
			appendStringInfo(buf, " %.15g\n", value);
	}
	else
	{
		StringInfoData json;
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		initStringInfo(&json);
		appendStringInfoChar(&json, '{');
		for (int i = 0; i < nlabels; i++)
		{
			if (i > 0)
				appendStringInfoChar(&json, ',');
			escape_json(&json, labels[i].name);
			appendStringInfoChar(&json, ':');
			escape_json(&json, labels[i].value);
		}
		appendStringInfoChar(&json, '}');
		values[0] = CStringGetTextDatum(psprintf("%s%s", family, suffix));
		values[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(json.data));
		values[2] = Float8GetDatum(value);
		tuplestore_putvalues(sink->rows, sink->desc, values, nulls);
	}
}

static void
emit_counters(Sink *sink, DurableQueueCounters *queues, int n)
{
	for (int c = 0; c < DURABLE_NCOUNTERS; c++)
	{
		const CounterName *name = &counter_names[c];

		if (!wants(sink, name->metric))
			continue;
		if (name->help != NULL)
			family_header(sink, name->metric, "counter", name->help);
		for (int i = 0; i < n; i++)
		{
			Label		labels[2] = {{"queue", queues[i].queue}, {"decision", name->decision}};

			emit(sink, name->metric, "", labels, name->decision ? 2 : 1,
				 (double) queues[i].counts[c], AS_INTEGER);
		}
	}
	for (int h = 0; h < DURABLE_NHISTOGRAMS; h++)
	{
		const char *metric = histogram_names[h][0];

		if (!wants(sink, metric))
			continue;
		family_header(sink, metric, "histogram", histogram_names[h][1]);
		for (int i = 0; i < n; i++)
		{
			uint64		cumulative = 0;
			Label		labels[2] = {{"queue", queues[i].queue}, {"le", NULL}};

			for (int b = 0; b <= DURABLE_HISTOGRAM_BUCKETS; b++)
			{
				cumulative += queues[i].buckets[h][b];
				labels[1].value = b < DURABLE_HISTOGRAM_BUCKETS ?
					psprintf("%g", durable_histogram_bounds[b]) : "+Inf";
				emit(sink, metric, "_bucket", labels, 2, (double) cumulative, AS_INTEGER);
			}
			emit(sink, metric, "_sum", labels, 1,
				 (double) queues[i].sum_us[h] / USECS_PER_SEC, AS_FIXED);
			emit(sink, metric, "_count", labels, 1, (double) cumulative, AS_INTEGER);
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

/* running tasks whose progress has not moved for longer than their queue allows */
enum
{
	STUCK_QUEUE,
	STUCK_TASKS,
	STUCK_NCOLUMNS
};

static const DurableColumn stuck_columns[STUCK_NCOLUMNS] = {
	[STUCK_QUEUE] = {"queue_name", TEXTOID},
	[STUCK_TASKS] = {"tasks", INT8OID},
};

static DurableStatement stuck_gauges = {
	.name = "stuck_gauges",
	.sql = "SELECT queue_name, pg_catalog.count(*) AS tasks"
	" FROM durable.stuck_tasks GROUP BY queue_name",
	.nargs = 0,
	DURABLE_COLUMNS(stuck_columns),
};

/* a gauge of each queue of res (its first column), from a bigint or float8 column */
static void
emit_queue_gauge(Sink *sink, const char *metric, const char *help,
				 DurableResult res, int column, bool integer)
{
	bool		isnull;

	if (!wants(sink, metric))
		return;
	family_header(sink, metric, "gauge", help);
	for (uint64 r = 0; r < res.rows; r++)
	{
		Label		queue = {"queue", DurableGetText(res, r, 0)};

		emit(sink, metric, "", &queue, 1,
			 integer ? (double) DurableGetInt64(res, r, column) :
			 DatumGetFloat8(DurableGetDatum(res, r, column, &isnull)),
			 AS_GENERAL);
	}
}

/* each spend budget's amount, what is reserved, spent (this period) and left */
static void
emit_budget_gauges(Sink *sink)
{
	static const char *const families[] = {
		"durable_budget_amount", "durable_budget_reserved", "durable_budget_spent",
		"durable_budget_remaining", NULL,
	};
	static const char *const helps[] = {
		"A spend budget's amount (per period, when it has one).",
		"What started steps have reserved from a spend budget and not settled.",
		"What settled steps spent of a spend budget in its current period.",
		"What a spend budget has left: amount - reserved - spent.",
	};
	static const int columns[] = {BUDGET_AMOUNT, BUDGET_RESERVED, BUDGET_SPENT, BUDGET_REMAINING};
	DurableResult res;

	if (!wants_any(sink, families))
		return;
	res = DurableRun(&budget_gauges, NULL, NULL, SPI_OK_SELECT, 0);
	for (int g = 0; families[g] != NULL; g++)
	{
		if (!wants(sink, families[g]))
			continue;
		family_header(sink, families[g], "gauge", helps[g]);
		for (uint64 r = 0; r < res.rows; r++)
		{
			bool		isnull;
			Label		budget = {"budget", DurableGetText(res, r, BUDGET_NAME)};

			emit(sink, families[g], "", &budget, 1,
				 DatumGetFloat8(DurableGetDatum(res, r, columns[g], &isnull)), AS_GENERAL);
		}
	}
}

/* the live tasks' gauges, per queue, and how many are stuck */
static void
emit_live_gauges(Sink *sink)
{
	static const char *const families[] = {
		"durable_tasks", "durable_oldest_ready_age_seconds",
		"durable_oldest_heartbeat_age_seconds", "durable_queue_paused",
		"durable_stuck_tasks", NULL,
	};
	static const struct
	{
		int			column;
		const char *state;
	}			states[] = {
		{GAUGE_READY, "ready"}, {GAUGE_RUNNING, "running"},
		{GAUGE_WAITING, "waiting"}, {GAUGE_NEEDS_REVIEW, "needs_review"},
		{GAUGE_SCHEDULED, "scheduled"},
	};
	DurableResult res;
	DurableResult stuck = {0};

	if (!wants_any(sink, families))
		return;
	res = DurableRun(&live_gauges, NULL, NULL, SPI_OK_SELECT, 0);
	if (wants(sink, "durable_tasks"))
	{
		family_header(sink, "durable_tasks", "gauge",
					  "Unfinished tasks by state: ready (due), running, waiting (not due: a wait or a retry), needs_review, scheduled (due later, of those ready or waiting).");
		for (uint64 r = 0; r < res.rows; r++)
			for (int s = 0; s < (int) lengthof(states); s++)
			{
				Label		labels[2] = {{"queue", DurableGetText(res, r, GAUGE_QUEUE)},
				{"state", states[s].state}};

				emit(sink, "durable_tasks", "", labels, 2,
					 (double) DurableGetInt64(res, r, states[s].column), AS_GENERAL);
			}
	}
	emit_queue_gauge(sink, "durable_oldest_ready_age_seconds",
					 "Age of the oldest task that is due and not claimed (0 for none).",
					 res, GAUGE_OLDEST_READY, false);
	emit_queue_gauge(sink, "durable_oldest_heartbeat_age_seconds",
					 "Age of the oldest heartbeat of a running task (0 for none).",
					 res, GAUGE_OLDEST_HEARTBEAT, false);
	if (wants(sink, "durable_queue_paused"))
	{
		family_header(sink, "durable_queue_paused", "gauge",
					  "1 when the queue or one of its partitions is paused.");
		for (uint64 r = 0; r < res.rows; r++)
		{
			Label		queue = {"queue", DurableGetText(res, r, GAUGE_QUEUE)};

			emit(sink, "durable_queue_paused", "", &queue, 1,
				 DurableGetBool(res, r, GAUGE_PAUSED) ? 1 : 0, AS_GENERAL);
		}
	}
	if (!wants(sink, "durable_stuck_tasks"))
		return;
	/* the next statement replaces the gauges' result: take the names first */
	{
		uint64		nqueues = res.rows;
		char	  **queues = palloc(sizeof(char *) * Max(nqueues, 1));

		for (uint64 r = 0; r < nqueues; r++)
			queues[r] = pstrdup(DurableGetText(res, r, GAUGE_QUEUE));
		stuck = DurableRun(&stuck_gauges, NULL, NULL, SPI_OK_SELECT, 0);
		family_header(sink, "durable_stuck_tasks", "gauge",
					  "Running tasks whose lease is renewed while their progress has not moved for longer than the queue's progress_timeout (durable.stuck_tasks).");
		for (uint64 r = 0; r < nqueues; r++)
		{
			Label		queue = {"queue", queues[r]};
			double		tasks = 0;

			for (uint64 k = 0; k < stuck.rows; k++)
				if (strcmp(DurableGetText(stuck, k, STUCK_QUEUE), queues[r]) == 0)
					tasks = (double) DurableGetInt64(stuck, k, STUCK_TASKS);
			emit(sink, "durable_stuck_tasks", "", &queue, 1, tasks, AS_GENERAL);
		}
	}
}

static void
emit_fair_gauges(Sink *sink)
{
	static const char *const families[] = {
		"durable_fairness_keys_ready", "durable_fairness_unadmitted_tasks",
		"durable_fairness_oldest_ready_age_seconds", NULL,
	};
	DurableResult res;

	if (!wants_any(sink, families))
		return;
	res = DurableRun(&fair_gauges, NULL, NULL, SPI_OK_SELECT, 0);
	emit_queue_gauge(sink, "durable_fairness_keys_ready",
					 "Fairness keys of a fair queue with a task due and not claimed.",
					 res, FAIR_KEYS_READY, true);
	emit_queue_gauge(sink, "durable_fairness_unadmitted_tasks",
					 "Tasks of a fair queue that are due and still wait for their pass (the reconciler gives it).",
					 res, FAIR_UNADMITTED, true);
	emit_queue_gauge(sink, "durable_fairness_oldest_ready_age_seconds",
					 "Of a fair queue's keys, the largest age of a key's oldest task that is due and not claimed.",
					 res, FAIR_OLDEST_READY, false);
}

/*
 * emit_all
 *		Every family the sink wants, in the order of the exposition: the
 *		counters and histograms, the reconciler's, the gauges.
 */
static void
emit_all(Sink *sink)
{
	TimestampTz now = GetCurrentTimestamp();
	DurableQueueCounters *queues;
	DurableTickCounters ticks;
	int			n = DurableCountersRead(&queues, &ticks);

	if (wants(sink, "durable_counters_available"))
	{
		family_header(sink, "durable_counters_available", "gauge",
					  "1 when durable keeps its counters: it is preloaded (shared_preload_libraries) and durable.counters is on.");
		emit(sink, "durable_counters_available", "", NULL, 0,
			 DurableCountersAvailable() && durable_counting ? 1 : 0, AS_INTEGER);
	}
	emit_counters(sink, queues, n);
	if (wants(sink, "durable_reconciler_ticks_total"))
	{
		family_header(sink, "durable_reconciler_ticks_total", "counter",
					  "Ticks of reconciliation run (the reconciler's and durable_reconcile()'s).");
		emit(sink, "durable_reconciler_ticks_total", "", NULL, 0, (double) ticks.ticks, AS_INTEGER);
	}
	if (wants(sink, "durable_reconciler_lag_seconds"))
	{
		family_header(sink, "durable_reconciler_lag_seconds", "gauge",
					  "Time since the last tick of reconciliation ended (NaN before the first).");
		emit(sink, "durable_reconciler_lag_seconds", "", NULL, 0,
			 ticks.last_tick_at == 0 ? get_float8_nan() :
			 (double) (now - ticks.last_tick_at) / USECS_PER_SEC, AS_FIXED);
	}

	SPI_connect();
	emit_live_gauges(sink);
	emit_fair_gauges(sink);
	emit_budget_gauges(sink);
	if (wants(sink, "durable_reconciler_failing_parts"))
	{
		DurableResult res = DurableRun(&failing_parts, NULL, NULL, SPI_OK_SELECT, 1);

		family_header(sink, "durable_reconciler_failing_parts", "gauge",
					  "Parts of the tick that fail (durable.status).");
		emit(sink, "durable_reconciler_failing_parts", "", NULL, 0,
			 (double) DurableGetInt64(res, 0, FAILING_PARTS), AS_INTEGER);
	}
	SPI_finish();
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
	StringInfoData buf;
	Sink		sink = {0};

	initStringInfo(&buf);
	sink.text = &buf;
	emit_all(&sink);
	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}

/*
 * durable.metric_samples(families text[] = NULL)
 *		RETURNS TABLE(metric text, labels jsonb, value float8)
 *
 * The same samples as rows, of the families named (a histogram's by its
 * name, for its _bucket, _sum and _count), or of all: what a scraper that
 * runs SQL reads to expose the names durable_metrics_prometheus() does
 * (metrics/postgres_exporter.yaml).  Only the families named are computed.
 */
PG_FUNCTION_INFO_V1(durable_metric_samples);
Datum
durable_metric_samples(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Sink		sink = {0};

	if (!PG_ARGISNULL(0))
		sink.nfamilies = DurableArrayArg(fcinfo, 0, TEXTOID, "families",
										 &sink.families, &sink.family_nulls);
	InitMaterializedSRF(fcinfo, 0);
	sink.rows = rsinfo->setResult;
	sink.desc = rsinfo->setDesc;
	emit_all(&sink);
	return (Datum) 0;
}
