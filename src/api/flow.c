/*-------------------------------------------------------------------------
 *
 * flow.c
 *	  The README's "Flow control": durable_debounce and durable_throttle,
 *	  which a trigger may call to turn a burst of changes into one task,
 *	  durable_set_fairness, and the definitions of rate limits.
 *
 * Each checks its arguments, connects to SPI and calls the core
 * (core/flow_keys.c, core/fairness.c, core/rate_limits.c).
 *
 *-------------------------------------------------------------------------
 */
#include "api/api.h"

#include "utils/builtins.h"

/* the key and the payload, the second and third arguments of both */
static char *
required_key(FunctionCallInfo fcinfo)
{
	DurableRequireArg(fcinfo, 1, "key");
	return DurableTextArgCString(fcinfo, 1, "key");
}

static Jsonb *
required_payload(FunctionCallInfo fcinfo)
{
	DurableRequireArg(fcinfo, 2, "payload");
	return DurableJsonbArg(fcinfo, 2, "payload");
}

/*
 * durable_debounce(queue text, key text, payload jsonb, delay interval,
 *		max_wait interval = NULL, mode text = 'trailing') RETURNS bigint
 *
 * The calls of a key before its task is claimed make one task, which runs
 * delay after the last of them, never later than max_wait after the first,
 * with the last call's payload (trailing) or the first's (leading); a call
 * after the claim makes a new one.  Returns the task's id.  22023 for a
 * negative delay, a max_wait not greater than zero or another mode.
 */
PG_FUNCTION_INFO_V1(durable_debounce);
Datum
durable_debounce(PG_FUNCTION_ARGS)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	char	   *key = required_key(fcinfo);
	Jsonb	   *payload = required_payload(fcinfo);
	Interval   *delay = DurableNonNegativeIntervalArg(fcinfo, 3, "delay");
	Interval   *max_wait = NULL;
	char	   *mode;
	int64		task_id;

	DurableRequireArg(fcinfo, 5, "mode");
	mode = DurableTextArgCString(fcinfo, 5, "mode");
	if (!PG_ARGISNULL(4))
		max_wait = DurablePositiveIntervalArg(fcinfo, 4, "max_wait");
	if (strcmp(mode, "trailing") != 0 && strcmp(mode, "leading") != 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("invalid debounce mode \"%s\"", mode),
				errhint("The mode is \"trailing\" (the last call's payload) or \"leading\" (the first call's)."));

	SPI_connect();
	task_id = DurableDebounce(queue, key, payload, delay, max_wait,
							  strcmp(mode, "trailing") == 0);
	SPI_finish();
	PG_RETURN_INT64(task_id);
}

/*
 * durable_throttle(queue text, key text, payload jsonb, per interval)
 *		RETURNS bigint
 *
 * At most one task of a key per period: a call within per of the call
 * that made the key's task returns that task's id, a later one enqueues a
 * new task with its payload.  22023 for a period not greater than zero.
 */
PG_FUNCTION_INFO_V1(durable_throttle);
Datum
durable_throttle(PG_FUNCTION_ARGS)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	char	   *key = required_key(fcinfo);
	Jsonb	   *payload = required_payload(fcinfo);
	Interval   *per = DurablePositiveIntervalArg(fcinfo, 3, "per");
	int64		task_id;

	SPI_connect();
	task_id = DurableThrottle(queue, key, payload, per);
	SPI_finish();
	PG_RETURN_INT64(task_id);
}

/*
 * durable_set_fairness(queue text, fairness_key text, weight real = 1)
 *		RETURNS void
 *
 * Sets the weight of a fairness key of a queue, which makes the queue
 * fair: claims serve the keys with ready work in proportion to their
 * weights.  22023 for a weight not greater than zero or above 1,000,000.
 */
PG_FUNCTION_INFO_V1(durable_set_fairness);
Datum
durable_set_fairness(PG_FUNCTION_ARGS)
{
	char	   *queue = DurableNameArg(fcinfo, 0, "queue name");
	char	   *key;
	float4		weight;

	DurableRequireArg(fcinfo, 1, "fairness_key");
	key = DurableTextArgCString(fcinfo, 1, "fairness_key");
	DurableCheckKey(key, "fairness key");
	DurableRequireArg(fcinfo, 2, "weight");
	weight = PG_GETARG_FLOAT4(2);
	if (!(weight > 0 && weight <= DURABLE_MAX_FAIRNESS_WEIGHT))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("weight must be greater than zero and at most %d",
					   DURABLE_MAX_FAIRNESS_WEIGHT),
				errdetail("The value given was %g.", (double) weight));

	SPI_connect();
	DurableSetFairness(queue, key, (double) weight);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_set_rate_limit(name text, rate int, per interval, burst int = NULL)
 *		RETURNS void
 *
 * Creates or replaces a rate limit: claims take at most burst units of it
 * at once (rate when NULL) and rate units per per after that.  22023 for
 * a rate or burst not greater than zero, a per not greater than zero, or
 * a name with a colon.
 */
PG_FUNCTION_INFO_V1(durable_set_rate_limit);
Datum
durable_set_rate_limit(PG_FUNCTION_ARGS)
{
	char	   *name;
	int32		rate;
	int32		burst;
	Interval   *per;

	DurableRequireArg(fcinfo, 0, "name");
	name = DurableTextArgCString(fcinfo, 0, "name");
	DurableCheckRateLimitName(name);
	DurableRequireArg(fcinfo, 1, "rate");
	rate = DurableIntArgAtLeast(fcinfo, 1, "rate", 1);
	per = DurablePositiveIntervalArg(fcinfo, 2, "per");
	burst = PG_ARGISNULL(3) ? rate : DurableIntArgAtLeast(fcinfo, 3, "burst", 1);

	SPI_connect();
	DurableSetRateLimit(name, rate, per, burst);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * durable_drop_rate_limit(name text) RETURNS void
 *
 * Drops a rate limit and its buckets; 42704 when there is none.
 */
PG_FUNCTION_INFO_V1(durable_drop_rate_limit);
Datum
durable_drop_rate_limit(PG_FUNCTION_ARGS)
{
	char	   *name;

	DurableRequireArg(fcinfo, 0, "name");
	name = DurableTextArgCString(fcinfo, 0, "name");

	SPI_connect();
	DurableDropRateLimit(name);
	SPI_finish();
	PG_RETURN_VOID();
}
