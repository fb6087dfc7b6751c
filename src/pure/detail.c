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
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

/*
 * A detail is built as a jsonb value, key by key, and never as text to be
 * parsed: the reconciler writes one for every lease it settles, and
 * parsing them was a twelfth of its time.  The keys of an object are
 * sorted, and of a key given twice the last value kept, as jsonb_in does.
 */

/*
 * Every part of a document is made in the memory context it was begun in,
 * as a text buffer grows in its own: a caller may add to it from code that
 * runs in shorter-lived contexts.
 */
static JsonbValue *
push(DurableDetail *detail, JsonbIteratorToken token, JsonbValue *value)
{
	MemoryContext old = MemoryContextSwitchTo(detail->context);
	JsonbValue *result = pushJsonbValue(&detail->state, token, value);

	MemoryContextSwitchTo(old);
	return result;
}

/* a text, copied: the document keeps it until DurableDetailFinish */
static void
push_string(DurableDetail *detail, JsonbIteratorToken token, const char *value)
{
	JsonbValue	v;

	if (value == NULL)
		v.type = jbvNull;
	else
	{
		v.type = jbvString;
		v.val.string.len = strlen(value);
		v.val.string.val = MemoryContextStrdup(detail->context, value);
	}
	(void) push(detail, token, &v);
}

static void
push_int(DurableDetail *detail, int64 value)
{
	JsonbValue	v;
	MemoryContext old = MemoryContextSwitchTo(detail->context);

	v.type = jbvNumeric;
	v.val.numeric = int64_to_numeric(value);
	MemoryContextSwitchTo(old);
	(void) push(detail, WJB_VALUE, &v);
}

void
DurableDetailInit(DurableDetail *detail)
{
	detail->state = NULL;
	detail->context = CurrentMemoryContext;
	(void) push(detail, WJB_BEGIN_OBJECT, NULL);
}

void
DurableDetailText(DurableDetail *detail, const char *key, const char *value)
{
	push_string(detail, WJB_KEY, key);
	push_string(detail, WJB_VALUE, value);
}

void
DurableDetailInt(DurableDetail *detail, const char *key, int64 value)
{
	push_string(detail, WJB_KEY, key);
	push_int(detail, value);
}

/* a numeric amount, copied into the document's context */
void
DurableDetailNumeric(DurableDetail *detail, const char *key, Numeric value)
{
	JsonbValue	v;
	MemoryContext old = MemoryContextSwitchTo(detail->context);

	push_string(detail, WJB_KEY, key);
	v.type = jbvNumeric;
	v.val.numeric = DatumGetNumericCopy(NumericGetDatum(value));
	MemoryContextSwitchTo(old);
	(void) push(detail, WJB_VALUE, &v);
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

/*
 * A jsonb value under a key: a scalar as itself, a container whole.  The
 * document points into the value: it keeps a copy.
 */
static void
push_jsonb(DurableDetail *detail, JsonbIteratorToken token, Jsonb *value)
{
	JsonbValue	v;

	if (value != NULL)
	{
		Jsonb	   *copy = MemoryContextAlloc(detail->context, VARSIZE(value));

		memcpy(copy, value, VARSIZE(value));
		value = copy;
	}
	if (value == NULL)
		v.type = jbvNull;
	else if (!JsonbExtractScalar(&value->root, &v))
	{
		v.type = jbvBinary;
		v.val.binary.data = &value->root;
		v.val.binary.len = VARSIZE(value) - VARHDRSZ;
	}
	(void) push(detail, token, &v);
}

void
DurableDetailJsonb(DurableDetail *detail, const char *key, Jsonb *value)
{
	push_string(detail, WJB_KEY, key);
	push_jsonb(detail, WJB_VALUE, value);
}

/*
 * A list under a key: DurableDetailListStart, then each item, an object
 * built as a detail of its own and handed over with DurableDetailListAdd
 * (which frees it) or a text (DurableDetailListText), then
 * DurableDetailListEnd.
 */
void
DurableDetailListStart(DurableDetail *detail, const char *key)
{
	push_string(detail, WJB_KEY, key);
	(void) push(detail, WJB_BEGIN_ARRAY, NULL);
}

void
DurableDetailListAdd(DurableDetail *detail, DurableDetail *item)
{
	Jsonb	   *object = DurableDetailFinish(item);

	push_jsonb(detail, WJB_ELEM, object);
	pfree(object);
}

void
DurableDetailListText(DurableDetail *detail, const char *value)
{
	push_string(detail, WJB_ELEM, value);
}

void
DurableDetailListEnd(DurableDetail *detail)
{
	(void) push(detail, WJB_END_ARRAY, NULL);
}

Jsonb *
DurableDetailFinish(DurableDetail *detail)
{
	return JsonbValueToJsonb(push(detail, WJB_END_OBJECT, NULL));
}

/* an interval as a document that compares equal whatever IntervalStyle */
void
DurableIntervalDetail(DurableDetail *detail, const char *key,
					  const Interval *span)
{
	if (span == NULL)
	{
		DurableDetailText(detail, key, NULL);
		return;
	}
	push_string(detail, WJB_KEY, key);
	(void) push(detail, WJB_BEGIN_OBJECT, NULL);
	DurableDetailInt(detail, "months", span->month);
	DurableDetailInt(detail, "days", span->day);
	DurableDetailInt(detail, "microseconds", span->time);
	(void) push(detail, WJB_END_OBJECT, NULL);
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
