/*-------------------------------------------------------------------------
 *
 * bounds.c
 *	  The bounds every value durable keeps is held to: times on the UTC
 *	  calendar that stay finite, payloads no larger than
 *	  durable.max_payload_size, names clipped for messages.
 *
 *-------------------------------------------------------------------------
 */
#include "pure/pure.h"

#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

/* durable.max_payload_size in kB (process/durable.c defines the setting) */
int			durable_max_payload_size = 1024;

/*
 * DurableClipName
 *		The first bytes of a name, at most maxbytes of them and never part of
 *		a character, followed by "..." when something was cut: for messages,
 *		which a client in another encoding must be able to convert.
 */
char *
DurableClipName(const char *name, int maxbytes)
{
	int			len = strlen(name);
	int			clip;

	if (len <= maxbytes)
		return pstrdup(name);
	clip = pg_mbcliplen(name, len, maxbytes);
	return psprintf("%.*s...", clip, name);
}

/*
 * DurableTimePlus
 *		t + span on the UTC calendar, whatever the session's TimeZone: what
 *		timestamptz + interval is under TimeZone UTC (a day is 24 hours, a
 *		month ends at the same UTC time of day).  A timestamptz counts from
 *		midnight UTC, so timestamp without time zone's arithmetic on it is
 *		exactly that.
 */
TimestampTz
DurableTimePlus(TimestampTz t, const Interval *span)
{
	return DatumGetTimestampTz(DirectFunctionCall2(timestamp_pl_interval,
												   TimestampTzGetDatum(t),
												   IntervalPGetDatum(span)));
}

/* now + span, which must stay a finite time */
TimestampTz
DurableTimeAfter(TimestampTz now, const Interval *span, const char *what)
{
	TimestampTz result;

	result = DurableTimePlus(now, span);
	if (TIMESTAMP_NOT_FINITE(result))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must end at a finite time", what));
	return result;
}

/* 54000 for a value (what: its name) larger than durable.max_payload_size */
void
DurableCheckPayloadSize(Size size, const char *name)
{
	if (size > (Size) durable_max_payload_size * 1024)
		ereport(ERROR,
				errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				errmsg("%s is too large", name),
				errdetail("It takes %zu bytes; durable.max_payload_size allows %d kB.",
						  size, durable_max_payload_size),
				errhint("Store large data elsewhere and pass a reference to it."));
}

/*
 * DurableCheckAmount
 *		An amount (a spend budget's, a reserve, what was spent): finite and
 *		not negative (22023); what names it in errors.
 */
void
DurableCheckAmount(Numeric amount, const char *what)
{
	if (numeric_is_nan(amount) || numeric_is_inf(amount) ||
		DatumGetBool(DirectFunctionCall2(numeric_lt, NumericGetDatum(amount),
										 DirectFunctionCall1(int4_numeric,
															 Int32GetDatum(0)))))
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must be finite and not negative", what));
}
