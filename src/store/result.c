/*-------------------------------------------------------------------------
 *
 * result.c
 *	  Typed access to the columns of a statement's result (DurableRun,
 *	  plan.c), by its declaration's constants.
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/timestamp.h"

/*
 * Accessors for column col (counted from 0, by the declaration's
 * constants) of a row of a statement's result.  Each checks that the
 * column is one of the statement's, of the type it reads, and the row one
 * of its rows: a constant of another statement's columns is an ERROR
 * naming the statement, never another column's value.  Null handling is
 * explicit: only DurableGetDatum, DurableGetText and DurableGetIsNull
 * accept a NULL.
 */
static void
check_column(DurableResult res, uint64 row, int col, Oid type)
{
	const DurableStatement *stmt = res.stmt;

	if (stmt == NULL || res.tuptable == NULL)
		elog(ERROR, "a column read of a statement that returned no rows");
	if (col < 0 || col >= stmt->ncolumns)
		elog(ERROR, "statement \"%s\" has no column %d", stmt->name, col + 1);
	if (type != InvalidOid && stmt->columns[col].type != type &&
		!(type == INT8OID && stmt->columns[col].type == INT4OID))
		elog(ERROR, "column \"%s\" of statement \"%s\" is not of type %s",
			 stmt->columns[col].name, stmt->name, format_type_be(type));
	if (row >= res.rows)
		elog(ERROR, "statement \"%s\" returned " UINT64_FORMAT " rows, not row " UINT64_FORMAT,
			 stmt->name, res.rows, row + 1);
}

/* a whole row, for a caller that passes rows on as the statement shapes them */
HeapTuple
DurableGetRow(DurableResult res, uint64 row)
{
	check_column(res, row, 0, InvalidOid);
	return res.tuptable->vals[row];
}

Datum
DurableGetDatum(DurableResult res, uint64 row, int col, bool *isnull)
{
	check_column(res, row, col, InvalidOid);
	return SPI_getbinval(res.tuptable->vals[row], res.tuptable->tupdesc,
						 col + 1, isnull);
}

bool
DurableGetIsNull(DurableResult res, uint64 row, int col)
{
	bool		isnull;

	(void) DurableGetDatum(res, row, col, &isnull);
	return isnull;
}

/* a column's value, which must not be NULL */
static Datum
column_value(DurableResult res, uint64 row, int col, Oid type)
{
	bool		isnull;
	Datum		d;

	check_column(res, row, col, type);
	d = SPI_getbinval(res.tuptable->vals[row], res.tuptable->tupdesc,
					  col + 1, &isnull);
	if (isnull)
		elog(ERROR, "unexpected null in column \"%s\" of statement \"%s\"",
			 res.stmt->columns[col].name, res.stmt->name);
	return d;
}

/* an int8 or int4 column */
int64
DurableGetInt64(DurableResult res, uint64 row, int col)
{
	Datum		d = column_value(res, row, col, INT8OID);

	return res.stmt->columns[col].type == INT8OID ?
		DatumGetInt64(d) : (int64) DatumGetInt32(d);
}

int32
DurableGetInt32(DurableResult res, uint64 row, int col)
{
	return DatumGetInt32(column_value(res, row, col, INT4OID));
}

bool
DurableGetBool(DurableResult res, uint64 row, int col)
{
	return DatumGetBool(column_value(res, row, col, BOOLOID));
}

/*
 * A column as text (NULL for NULL), valid until SPI_finish.  An interval
 * or a time is written in one style whatever the session's IntervalStyle,
 * DateStyle and TimeZone (an interval as IntervalStyle postgres writes it,
 * a time as JSON does, in UTC): what durable keeps of it is one text.
 */
char *
DurableGetText(DurableResult res, uint64 row, int col)
{
	bool		isnull;
	Datum		value = DurableGetDatum(res, row, col, &isnull);
	char		buf[MAXDATELEN + 1];

	if (isnull)
		return NULL;
	switch (res.stmt->columns[col].type)
	{
		case INTERVALOID:
			{
				Interval   *span = DatumGetIntervalP(value);
				struct pg_itm itm;

#ifdef INTERVAL_NOT_FINITE
				/* "infinity" and "-infinity" (PostgreSQL 17) have one style */
				if (INTERVAL_NOT_FINITE(span))
					break;
#endif
				interval2itm(*span, &itm);
				EncodeInterval(&itm, INTSTYLE_POSTGRES, buf);
				return pstrdup(buf);
			}
		case TIMESTAMPTZOID:
			{
				int			utc = 0;

				return pstrdup(JsonEncodeDateTime(buf, value, TIMESTAMPTZOID, &utc));
			}
		default:
			break;
	}
	return SPI_getvalue(res.tuptable->vals[row], res.tuptable->tupdesc, col + 1);
}
