/*-------------------------------------------------------------------------
 *
 * result.c
 *	  Typed access to the columns of the result of the statement
 *	  DurableExecute ran last (plan.c), by its declaration's constants.
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/timestamp.h"

/*
 * Accessors for column col (counted from 0, by the declaration's
 * constants) of a row of the result of the last statement executed.  Null
 * handling is explicit: only DurableColumnDatum, DurableColumnText and
 * DurableColumnIsNull accept a NULL.
 */
static inline void
check_column(int col, Oid type)
{
#ifdef USE_ASSERT_CHECKING
	const DurableStatement *stmt = DurableLastExecuted();

	Assert(stmt != NULL && SPI_tuptable != NULL);
	Assert(col < stmt->ncolumns);
	Assert(type == InvalidOid || stmt->columns[col].type == type);
#endif
	(void) col;
	(void) type;
}

Datum
DurableColumnDatum(uint64 row, int col, bool *isnull)
{
	check_column(col, InvalidOid);
	Assert(row < SPI_processed);
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
						 col + 1, isnull);
}

bool
DurableColumnIsNull(uint64 row, int col)
{
	bool		isnull;

	(void) DurableColumnDatum(row, col, &isnull);
	return isnull;
}

/* a column's value, which must not be NULL */
static Datum
column_value(uint64 row, int col)
{
	bool		isnull;
	Datum		d = DurableColumnDatum(row, col, &isnull);

	if (isnull)
		elog(ERROR, "unexpected null in column %d of \"%s\"",
			 col + 1, DurableLastExecuted()->name);
	return d;
}

/* an int8 or int4 column */
int64
DurableColumnInt64(uint64 row, int col)
{
	Datum		d = column_value(row, col);

	return SPI_gettypeid(SPI_tuptable->tupdesc, col + 1) == INT8OID ?
		DatumGetInt64(d) : (int64) DatumGetInt32(d);
}

int32
DurableColumnInt32(uint64 row, int col)
{
	check_column(col, INT4OID);
	return DatumGetInt32(column_value(row, col));
}

bool
DurableColumnBool(uint64 row, int col)
{
	check_column(col, BOOLOID);
	return DatumGetBool(column_value(row, col));
}

/*
 * A column as text (NULL for NULL), valid until SPI_finish.  An interval
 * or a time is written in one style whatever the session's IntervalStyle,
 * DateStyle and TimeZone (an interval as IntervalStyle postgres writes it,
 * a time as JSON does, in UTC): what durable keeps of it is one text.
 */
char *
DurableColumnText(uint64 row, int col)
{
	bool		isnull;
	Datum		value = DurableColumnDatum(row, col, &isnull);
	char		buf[MAXDATELEN + 1];

	if (isnull)
		return NULL;
	switch (SPI_gettypeid(SPI_tuptable->tupdesc, col + 1))
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
	return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col + 1);
}
