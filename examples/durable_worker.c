/*-------------------------------------------------------------------------
 *
 * durable_worker.c
 *	  A worker program on libpq: claims tasks from a durable queue and runs
 *	  their workflow of steps against a stand-in external service, as a real
 *	  worker would, and settles unknown queryable steps as a reconcile
 *	  handler.
 *
 * The stand-in service lives in another database (tables created by
 * examples/service.sql) and is reached over its own connection: it records
 * every effect it performs, honours idempotency keys for idempotent calls,
 * answers look-ups by key for queryable ones, and does neither for unsafe
 * ones.  It shares no code with durable, so it can count what durable must
 * prevent: an effect performed twice.
 *
 * A task's payload names its steps: {"steps": [["reserve", "idempotent"],
 * ["charge", "queryable"], ["email", "unsafe"]]}.  For each step the worker
 * plans it (a committed step is skipped), starts it, calls the service with
 * the step's idempotency key, records the receipt and commits the step;
 * then it commits the task.  It heartbeats between steps.
 *
 * A step may also be a wait, named like a step: ["nap", "sleep", "2
 * seconds"], ["paid", "await", "payment:7", "3 days"] (an event, with an
 * optional timeout), ["labels", "spawn", "QUEUE", "N"] (N children named
 * labels-1.., each a task of one idempotent step) and ["labels", "join"].
 * A wait that has not ended ends the lease: the worker leaves the task,
 * and the claim that wakes it runs the workflow from the top, where each
 * step and wait done before returns as it was.
 *
 * On durable's errors: 55U01 (stale fence) abandons the task, 55U02
 * (version conflict) re-reads the step, 55P03 backs off.  Anything else
 * abandons the task too; its lease runs out and the reconciler decides.
 *
 * Fault injection for tests: --crash-at POINT sends SIGKILL to the worker
 * itself at that point; --pause-at POINT prints "paused at POINT" and stops
 * the worker with SIGSTOP, to go on when it gets SIGCONT (a worker frozen
 * while others take its task over); --stall-at POINT keeps heartbeating
 * with unchanged progress for three seconds there (a stuck worker).  POINT
 * is one of before_claim, after_claim, before_start, before_call,
 * after_call, after_receipt, after_step_commit, before_commit,
 * after_commit, before_wait, after_wait (a wait that left the task
 * waiting); POINT:CLASS limits it to steps of that class (or kind of
 * wait).
 *
 * Usage: durable_worker --db CONNINFO --service CONNINFO --queue NAME
 *		  --name WORKER [--lease INTERVAL] [--max-tasks N] [--idle-exit MS]
 *		  [--call-ms MS: time each service call takes]
 *		  [--crash-at POINT] [--pause-at POINT] [--stall-at POINT] [--quiet]
 *
 * Exit status: 0 when it stopped by itself, 2 when the server went away.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

#define MAX_STEPS 16

typedef struct Options
{
	const char *db;
	const char *service;
	const char *queue;
	const char *name;
	const char *lease;
	long		max_tasks;
	long		idle_exit_ms;
	const char *crash_at;
	const char *pause_at;
	const char *stall_at;
	long		call_ms;
	bool		quiet;
} Options;

typedef struct Stats
{
	long		completed;
	long		steps_run;
	long		steps_skipped;
	long		reconciled;
	long		stale;
	long		conflicts;
	long		abandoned;
	long		waits;			/* tasks left waiting */
} Stats;

/* what went wrong in one call: nothing, a durable error, or the server */
typedef enum Outcome
{
	OK,
	STALE,						/* 55U01: someone else holds the task */
	CONFLICT,					/* 55U02: re-read and decide again */
	BUSY,						/* 55P03: back off */
	FAILED,						/* any other error: abandon the task */
	GONE,						/* the connection is lost */
	WAITS						/* a wait ended the lease: leave the task */
} Outcome;

static Options opt = {.idle_exit_ms = 2000};
static Stats stats;

static void say(const char *fmt,...) __attribute__((format(printf, 1, 2)));

static void
say(const char *fmt,...)
{
	va_list		ap;

	if (opt.quiet)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "[%s] ", opt.name);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void sleep_ms(long ms);
static const char *api_sql(const char *sql);

/* does a --*-at specification name this point (and class)? */
static bool
at_point(const char *spec, const char *where, const char *class)
{
	size_t		len = strlen(where);

	if (spec == NULL || strncmp(spec, where, len) != 0)
		return false;
	if (spec[len] == '\0')
		return true;
	return spec[len] == ':' && class != NULL && strcmp(spec + len + 1, class) == 0;
}

/* the task the worker holds, for --stall-at */
static PGconn *held_conn;
static const char *held_task;
static const char *held_fence;

/* the fault injection points */
static void
point(const char *where, const char *class)
{
	if (at_point(opt.crash_at, where, class))
	{
		printf("killed at %s\n", where);
		fflush(NULL);
		kill(getpid(), SIGKILL);
	}
	if (at_point(opt.pause_at, where, class))
	{
		printf("paused at %s\n", where);
		fflush(NULL);
		raise(SIGSTOP);
	}
	if (at_point(opt.stall_at, where, class) && held_conn != NULL)
	{
		const char *beat[2] = {held_task, held_fence};

		printf("stalled at %s\n", where);
		fflush(NULL);
		for (int i = 0; i < 30; i++)
		{
			PQclear(PQexecParams(held_conn,
								 api_sql("SELECT @api.durable_heartbeat($1::pg_catalog.int8,"
										 " $2::pg_catalog.int8)"),
								 2, NULL, beat, NULL, NULL, 0));
			sleep_ms(100);
		}
	}
}

static void
sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/*
 * What the worker sends resolves only to pg_catalog and durable's objects,
 * whatever the role's search_path and whatever a database owner put in
 * public (an overload such as public.&(bigint, integer) wins over
 * pg_catalog's even when pg_catalog comes first): durable's API functions
 * are called in the schema the extension is installed in, looked up once
 * (@api in a statement's text), with every argument cast to its
 * parameter's type; built-in functions as pg_catalog.f, operators as
 * OPERATOR(pg_catalog.x), casts to pg_catalog's types.
 */
static char api_schema[2 * 64 + 3];

static bool
look_up_api(PGconn *conn)
{
	PGresult   *r = PQexec(conn,
						   "SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e"
						   " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace"
						   " WHERE e.extname OPERATOR(pg_catalog.=) 'durable'");
	bool		ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;

	if (ok)
		snprintf(api_schema, sizeof(api_schema), "%s", PQgetvalue(r, 0, 0));
	else
		say("durable is not installed in this database: %s", PQresultErrorMessage(r));
	PQclear(r);
	return ok;
}

/* sql with the API's schema in place of @api (a static buffer) */
static const char *
api_sql(const char *sql)
{
	static char buf[4096];
	size_t		n = 0;

	for (const char *p = sql; *p && n < sizeof(buf) - 1;)
	{
		if (strncmp(p, "@api.", 5) == 0)
		{
			n += snprintf(buf + n, sizeof(buf) - n, "%s.", api_schema);
			p += 5;
		}
		else
			buf[n++] = *p++;
	}
	buf[n < sizeof(buf) ? n : sizeof(buf) - 1] = '\0';
	return buf;
}

/*
 * Run a parameterized statement; on success *res holds the result (the
 * caller clears it).  Classifies failures by SQLSTATE.
 */
static Outcome
run(PGconn *conn, PGresult **res, const char *sql, int nparams,
	const char *const *params)
{
	PGresult   *r = PQexecParams(conn, api_sql(sql), nparams, NULL, params, NULL, NULL, 0);
	ExecStatusType status = PQresultStatus(r);
	const char *state;

	if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK)
	{
		if (res)
			*res = r;
		else
			PQclear(r);
		return OK;
	}
	state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	if (PQstatus(conn) != CONNECTION_OK || state == NULL ||
		strncmp(state, "08", 2) == 0 || strcmp(state, "57P01") == 0 ||
		strcmp(state, "57P02") == 0 || strcmp(state, "57P03") == 0)
	{
		PQclear(r);
		return GONE;
	}
	say("%s: %s", state, PQresultErrorMessage(r));
	PQclear(r);
	if (strcmp(state, "55U01") == 0)
		return STALE;
	if (strcmp(state, "55U02") == 0)
		return CONFLICT;
	if (strcmp(state, "55P03") == 0)
		return BUSY;
	return FAILED;
}

/*
 * The stand-in service.  Idempotent calls are deduplicated by key, the
 * others are not; pure steps call nothing.  Returns the effect id.
 */
static Outcome
service_call(PGconn *svc, const char *class, const char *key, char *effect,
			 size_t effect_len)
{
	const char *params[2] = {key, class};
	PGresult   *res;
	Outcome		o;

	if (strcmp(class, "pure") == 0)
	{
		snprintf(effect, effect_len, "computed");
		return OK;
	}
	/* the network and the remote side take their time */
	if (opt.call_ms > 0)
		sleep_ms(opt.call_ms);
	if (strcmp(class, "idempotent") == 0)
		o = run(svc, &res,
				"WITH ins AS (INSERT INTO effects (key, kind) VALUES ($1, $2)"
				" ON CONFLICT (key) WHERE kind = 'idempotent' DO NOTHING RETURNING id)"
				" SELECT id FROM ins UNION ALL"
				" SELECT id FROM effects WHERE key = $1 AND kind = 'idempotent'"
				" LIMIT 1", 2, params);
	else
		o = run(svc, &res,
				"INSERT INTO effects (key, kind) VALUES ($1, $2) RETURNING id",
				2, params);
	if (o != OK)
		return o;
	snprintf(effect, effect_len, "e-%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return OK;
}

/* a queryable step's outcome, looked up by its key: true when it happened */
static Outcome
service_lookup(PGconn *svc, const char *key, bool *found, char *effect,
			   size_t effect_len)
{
	const char *params[1] = {key};
	PGresult   *res;
	Outcome		o = run(svc, &res, "SELECT id FROM effects WHERE key = $1 ORDER BY id LIMIT 1",
						1, params);

	if (o != OK)
		return o;
	*found = PQntuples(res) > 0;
	if (*found)
		snprintf(effect, effect_len, "e-%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return OK;
}

/*
 * Run one step of a held task.  Returns OK when the step is committed
 * (now or before).
 */
static Outcome
run_step(PGconn *conn, PGconn *svc, const char *task, const char *fence,
		 const char *step, const char *class)
{
	for (int tries = 0; tries < 3; tries++)
	{
		const char *plan[4] = {task, fence, step, class};
		PGresult   *res;
		Outcome		o;
		char		version[16];
		char		key[80];
		char		state[16];
		char		effect[64];
		char		evidence[128];

		o = run(conn, &res,
				"SELECT state, version, idempotency_key FROM @api.durable_step($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text, $4::pg_catalog.text,"
				" pg_catalog.jsonb_build_object('step', $3::pg_catalog.text))", 4, plan);
		if (o != OK)
			return o;
		snprintf(state, sizeof(state), "%s", PQgetvalue(res, 0, 0));
		snprintf(version, sizeof(version), "%s", PQgetvalue(res, 0, 1));
		snprintf(key, sizeof(key), "%s", PQgetvalue(res, 0, 2));
		PQclear(res);

		if (strcmp(state, "committed") == 0 || strcmp(state, "compensated") == 0)
		{
			stats.steps_skipped++;
			return OK;
		}
		if (strcmp(state, "planned") != 0)
		{
			/* in doubt: only evidence or a person may settle it */
			say("step %s of task %s is %s; leaving it to recovery", step, task, state);
			return FAILED;
		}

		point("before_start", class);
		{
			const char *start[4] = {task, fence, step, version};

			o = run(conn, &res, "SELECT @api.durable_step_start($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text, $4::pg_catalog.int4)",
					4, start);
			if (o == CONFLICT)
				continue;
			if (o != OK)
				return o;
			snprintf(version, sizeof(version), "%s", PQgetvalue(res, 0, 0));
			PQclear(res);
		}

		point("before_call", class);
		o = service_call(svc, class, key, effect, sizeof(effect));
		if (o != OK)
			return o;
		point("after_call", class);

		snprintf(evidence, sizeof(evidence), "{\"effect\": \"%s\"}", effect);
		{
			const char *receipt[5] = {task, fence, step, effect, evidence};

			o = run(conn, NULL,
					"SELECT @api.durable_record_receipt($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text,"
					" 'succeeded'::pg_catalog.text, $4::pg_catalog.text, $5::pg_catalog.jsonb)",
					5, receipt);
			if (o != OK)
				return o;
			/* recording a receipt is a change of the step: its version moved */
			snprintf(version, sizeof(version), "%d", atoi(version) + 1);
		}
		point("after_receipt", class);
		{
			const char *commit[5] = {task, fence, evidence, step, version};

			o = run(conn, NULL,
					"SELECT @api.durable_commit($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.jsonb,"
					" step => $4::pg_catalog.text, expected_version => $5::pg_catalog.int4)",
					5, commit);
			if (o == CONFLICT)
				continue;
			if (o != OK)
				return o;
		}
		stats.steps_run++;
		point("after_step_commit", class);
		return OK;
	}
	return FAILED;
}

/*
 * Run one wait of a held task (see the file header): OK when it has ended
 * (the workflow goes on), WAITS when the task now waits.
 */
static Outcome
run_wait(PGconn *conn, const char *task, const char *fence, const char *name,
		 const char *kind, const char *arg, const char *arg2)
{
	PGresult   *res;
	Outcome		o;
	const char *status;
	bool		waiting;

	point("before_wait", kind);
	if (strcmp(kind, "spawn") == 0)
	{
		int			n = arg2 ? atoi(arg2) : 1;

		for (int i = 1; i <= n; i++)
		{
			char		child[80];
			const char *spawn[5] = {task, fence, child, arg, NULL};

			snprintf(child, sizeof(child), "%s-%d", name, i);
			spawn[4] = child;
			o = run(conn, NULL,
					"SELECT @api.durable_spawn($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text, $4::pg_catalog.text,"
					" pg_catalog.jsonb_build_object('steps', pg_catalog.jsonb_build_array("
					"pg_catalog.jsonb_build_array($5::pg_catalog.text, 'idempotent'::pg_catalog.text))))",
					5, spawn);
			if (o != OK)
				return o;
		}
		return OK;
	}
	if (strcmp(kind, "sleep") == 0)
	{
		const char *params[4] = {task, fence, name, arg};

		o = run(conn, &res, "SELECT @api.durable_sleep($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text, duration => $4::pg_catalog.interval)",
				4, params);
	}
	else if (strcmp(kind, "await") == 0)
	{
		const char *params[5] = {task, fence, name, arg, arg2};

		o = run(conn, &res,
				"SELECT status FROM @api.durable_await($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text, $4::pg_catalog.text, $5::pg_catalog.interval)",
				5, params);
	}
	else
	{
		const char *params[3] = {task, fence, name};

		o = run(conn, &res, "SELECT status FROM @api.durable_join($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text)", 3, params);
	}
	if (o != OK)
		return o;
	status = PQgetvalue(res, 0, 0);
	waiting = strcmp(status, "sleeping") == 0 || strcmp(status, "waiting") == 0;
	say("%s %s of task %s: %s", kind, name, task, status);
	PQclear(res);
	if (!waiting)
		return OK;
	stats.waits++;
	point("after_wait", kind);
	return WAITS;
}

static bool
is_wait(const char *kind)
{
	return strcmp(kind, "sleep") == 0 || strcmp(kind, "await") == 0 ||
		strcmp(kind, "spawn") == 0 || strcmp(kind, "join") == 0;
}

/* Claim one task and run it to its end; returns false when there was none. */
static Outcome
work_one(PGconn *conn, PGconn *svc, bool *claimed)
{
	const char *claim[3] = {opt.queue, opt.name, opt.lease};
	PGresult   *res;
	PGresult   *steps;
	Outcome		o;
	char		task[32];
	char		fence[32];

	*claimed = false;
	point("before_claim", NULL);
	o = run(conn, &res,
			"SELECT task_id, fence, payload FROM @api.durable_claim($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.interval)",
			3, claim);
	if (o != OK)
		return o;
	if (PQntuples(res) == 0)
	{
		PQclear(res);
		return OK;
	}
	*claimed = true;
	snprintf(task, sizeof(task), "%s", PQgetvalue(res, 0, 0));
	snprintf(fence, sizeof(fence), "%s", PQgetvalue(res, 0, 1));
	{
		const char *payload[1] = {PQgetvalue(res, 0, 2)};

		o = run(conn, &steps,
				"SELECT s OPERATOR(pg_catalog.->>) 0, s OPERATOR(pg_catalog.->>) 1,"
				" s OPERATOR(pg_catalog.->>) 2, s OPERATOR(pg_catalog.->>) 3"
				" FROM pg_catalog.jsonb_array_elements($1::pg_catalog.jsonb OPERATOR(pg_catalog.->) 'steps') s",
				1, payload);
	}
	PQclear(res);
	if (o != OK)
		return o;
	held_conn = conn;
	held_task = task;
	held_fence = fence;
	point("after_claim", NULL);
	{
		/* from here a lost lease spends the attempt: before, it is free */
		const char *begin[2] = {task, fence};

		o = run(conn, NULL, "SELECT @api.durable_begin($1::pg_catalog.int8, $2::pg_catalog.int8)", 2, begin);
		if (o != OK)
		{
			PQclear(steps);
			return o;
		}
	}

	for (int i = 0; i < PQntuples(steps) && i < MAX_STEPS; i++)
	{
		const char *hb[2] = {task, fence};
		char		progress[64];

		const char *name = PQgetvalue(steps, i, 0);
		const char *kind = PQgetvalue(steps, i, 1);

		if (is_wait(kind))
			o = run_wait(conn, task, fence, name, kind,
						 PQgetisnull(steps, i, 2) ? NULL : PQgetvalue(steps, i, 2),
						 PQgetisnull(steps, i, 3) ? NULL : PQgetvalue(steps, i, 3));
		else
			o = run_step(conn, svc, task, fence, name, kind);
		if (o != OK)
			break;
		snprintf(progress, sizeof(progress), "%d", i + 1);
		{
			const char *beat[3] = {hb[0], hb[1], progress};

			o = run(conn, NULL, "SELECT @api.durable_heartbeat($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text)", 3, beat);
		}
		if (o != OK)
			break;
	}
	PQclear(steps);

	if (o == OK)
	{
		const char *commit[2] = {task, fence};

		point("before_commit", NULL);
		o = run(conn, NULL,
				"SELECT @api.durable_commit($1::pg_catalog.int8, $2::pg_catalog.int8, pg_catalog.jsonb_build_object('by',"
				" pg_catalog.current_setting('application_name')))",
				2, commit);
		if (o == OK)
		{
			stats.completed++;
			point("after_commit", NULL);
		}
	}
	held_conn = NULL;
	if (o == WAITS)
		return OK;				/* the wait's wake-up claims it again */
	if (o == STALE)
		stats.stale++;
	if (o == STALE || o == FAILED || o == CONFLICT)
	{
		stats.abandoned++;
		return OK;				/* the task is recovery's now; go on */
	}
	return o;
}

/*
 * As a reconcile handler: look up one unknown queryable step by its key
 * and record what the service says.
 */
static Outcome
reconcile_one(PGconn *conn, PGconn *svc, bool *claimed)
{
	const char *claim[3] = {opt.queue, opt.name, opt.lease};
	PGresult   *res;
	Outcome		o;
	bool		found = false;
	char		effect[64] = "";
	char		evidence[128];

	*claimed = false;
	o = run(conn, &res,
			"SELECT task_id, fence, step, idempotency_key"
			" FROM @api.durable_claim_reconcile($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.interval)", 3, claim);
	if (o != OK)
		return o;
	if (PQntuples(res) == 0)
	{
		PQclear(res);
		return OK;
	}
	*claimed = true;
	o = service_lookup(svc, PQgetvalue(res, 0, 3), &found, effect, sizeof(effect));
	if (o == OK)
	{
		const char *receipt[6] = {PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
			PQgetvalue(res, 0, 2), found ? "succeeded" : "not_executed",
		found ? effect : NULL, evidence};

		snprintf(evidence, sizeof(evidence), "{\"lookup\": \"%s\"}",
				 found ? effect : "none");
		o = run(conn, NULL,
				"SELECT @api.durable_record_receipt($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text, $4::pg_catalog.text, $5::pg_catalog.text, $6::pg_catalog.jsonb)",
				6, receipt);
		if (o == OK)
			stats.reconciled++;
	}
	PQclear(res);
	if (o == STALE)
		stats.stale++;
	return o == GONE ? GONE : OK;
}

static PGconn *
connect_to(const char *conninfo)
{
	PGconn	   *conn = PQconnectdb(conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
	{
		say("could not connect: %s", PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: durable_worker --db CONNINFO --service CONNINFO --queue NAME --name WORKER\n"
			"       [--lease INTERVAL] [--max-tasks N] [--idle-exit MS] [--call-ms MS]\n"
			"       [--crash-at POINT[:CLASS]] [--pause-at POINT[:CLASS]]\n"
			"       [--stall-at POINT[:CLASS]] [--quiet]\n");
	exit(1);
}

int
main(int argc, char **argv)
{
	PGconn	   *conn;
	PGconn	   *svc;
	long		idle_ms = 0;
	long		tasks = 0;
	int			status = 0;
	char		appname[128];

	for (int i = 1; i < argc; i++)
	{
		const char *arg = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(arg, "--quiet") == 0)
		{
			opt.quiet = true;
			continue;
		}
		if (val == NULL)
			usage();
		i++;
		if (strcmp(arg, "--db") == 0)
			opt.db = val;
		else if (strcmp(arg, "--service") == 0)
			opt.service = val;
		else if (strcmp(arg, "--queue") == 0)
			opt.queue = val;
		else if (strcmp(arg, "--name") == 0)
			opt.name = val;
		else if (strcmp(arg, "--lease") == 0)
			opt.lease = val;
		else if (strcmp(arg, "--max-tasks") == 0)
			opt.max_tasks = atol(val);
		else if (strcmp(arg, "--idle-exit") == 0)
			opt.idle_exit_ms = atol(val);
		else if (strcmp(arg, "--crash-at") == 0)
			opt.crash_at = val;
		else if (strcmp(arg, "--pause-at") == 0)
			opt.pause_at = val;
		else if (strcmp(arg, "--stall-at") == 0)
			opt.stall_at = val;
		else if (strcmp(arg, "--call-ms") == 0)
			opt.call_ms = atol(val);
		else
			usage();
	}
	if (!opt.db || !opt.service || !opt.queue || !opt.name)
		usage();

	conn = connect_to(opt.db);
	svc = connect_to(opt.service);
	if (conn == NULL || svc == NULL || !look_up_api(conn))
		return 2;
	snprintf(appname, sizeof(appname), "SET application_name = '%s'", opt.name);
	PQclear(PQexec(conn, appname));

	while (opt.max_tasks == 0 || tasks < opt.max_tasks)
	{
		bool		claimed;
		Outcome		o = work_one(conn, svc, &claimed);

		if (o == OK && !claimed)
			o = reconcile_one(conn, svc, &claimed);
		if (o == GONE)
		{
			say("the server went away");
			status = 2;
			break;
		}
		if (o == BUSY)
			sleep_ms(100);
		if (claimed)
		{
			tasks++;
			idle_ms = 0;
			continue;
		}
		if (opt.idle_exit_ms >= 0 && idle_ms >= opt.idle_exit_ms)
			break;
		sleep_ms(20);
		idle_ms += 20;
	}

	printf("worker %s: completed %ld, steps run %ld, steps skipped %ld, reconciled %ld, "
		   "stale writes rejected %ld, abandoned %ld, left waiting %ld\n",
		   opt.name, stats.completed, stats.steps_run, stats.steps_skipped,
		   stats.reconciled, stats.stale, stats.abandoned, stats.waits);
	PQfinish(conn);
	PQfinish(svc);
	return status;
}
