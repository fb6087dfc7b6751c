/*-------------------------------------------------------------------------
 *
 * detail.c
 *	  The detail of events, and who caused them.
 *
 * Every change of a task is one row of durable.events, written by the
 * statement that changes the task (see core/task.c: a claim is written
 * with the event that ends its lease, a finished task's last event is its
 * row in history).  This file builds the jsonb detail that explains a
 * decision: its action and its evidence.
 *
 *-------------------------------------------------------------------------
 */
#include "pure/pure.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/timestamp.h"

void
DurableDetailInit(DurableDetail *detail)
{
	initStringInfo(&detail->buf);
	appendStringInfoChar(&detail->buf, '{');
}

static void
detail_key(DurableDetail *detail, const char *key)
{
	if (detail->buf.len > 1)
		appendStringInfoString(&detail->buf, ", ");
	escape_json(&detail->buf, key);
	appendStringInfoString(&detail->buf, ": ");
}

void
DurableDetailText(DurableDetail *detail, const char *key, const char *value)
{
	detail_key(detail, key);
	if (value == NULL)
		appendStringInfoString(&detail->buf, "null");
	else
		escape_json(&detail->buf, value);
}

void
DurableDetailInt(DurableDetail *detail, const char *key, int64 value)
{
	detail_key(detail, key);
	appendStringInfo(&detail->buf, INT64_FORMAT, value);
}

/*
 * A time as JSON writes it, in UTC ("2026-01-01T00:00:00.5+00:00") whatever
 * the session's TimeZone: what is stored, and compared, is one text.
 */
void
DurableDetailTime(DurableDetail *detail, const char *key, TimestampTz value)
{
	char		buf[MAXDATELEN + 1];
	int			utc = 0;

	DurableDetailText(detail, key,
					  JsonEncodeDateTime(buf, TimestampTzGetDatum(value),
										 TIMESTAMPTZOID, &utc));
}

void
DurableDetailJsonb(DurableDetail *detail, const char *key, Jsonb *value)
{
	detail_key(detail, key);
	if (value == NULL)
		appendStringInfoString(&detail->buf, "null");
	else
		(void) JsonbToCString(&detail->buf, &value->root, VARSIZE(value));
}

/*
 * A list of objects under a key: DurableDetailListStart, then each item
 * built as a detail of its own and handed over with DurableDetailListAdd
 * (which frees it), then DurableDetailListEnd.
 */
void
DurableDetailListStart(DurableDetail *detail, const char *key)
{
	detail_key(detail, key);
	appendStringInfoChar(&detail->buf, '[');
}

void
DurableDetailListAdd(DurableDetail *detail, DurableDetail *item)
{
	if (detail->buf.data[detail->buf.len - 1] != '[')
		appendStringInfoString(&detail->buf, ", ");
	appendStringInfoString(&detail->buf, item->buf.data);
	appendStringInfoChar(&detail->buf, '}');
	pfree(item->buf.data);
}

void
DurableDetailListEnd(DurableDetail *detail)
{
	appendStringInfoChar(&detail->buf, ']');
}

Jsonb *
DurableDetailFinish(DurableDetail *detail)
{
	Jsonb	   *result;

	appendStringInfoChar(&detail->buf, '}');
	result = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
												CStringGetDatum(detail->buf.data)));
	pfree(detail->buf.data);
	return result;
}

/* an interval as a document that compares equal whatever IntervalStyle */
void
DurableIntervalDetail(DurableDetail *detail, const char *key,
					  const Interval *span)
{
	DurableDetail item;

	if (span == NULL)
	{
		DurableDetailText(detail, key, NULL);
		return;
	}
	DurableDetailInit(&item);
	DurableDetailInt(&item, "months", span->month);
	DurableDetailInt(&item, "days", span->day);
	DurableDetailInt(&item, "microseconds", span->time);
	appendStringInfoChar(&item.buf, '}');
	if (detail->buf.len > 1)
		appendStringInfoString(&detail->buf, ", ");
	escape_json(&detail->buf, key);
	appendStringInfo(&detail->buf, ": %s", item.buf.data);
	pfree(item.buf.data);
}

/*
 * DurableCallerName
 *		The role that called the API: the outer user, not the definer whose
 *		rights the function runs with.
 */
const char *
DurableCallerName(void)
{
	return GetUserNameFromId(GetOuterUserId(), false);
}
