/*-------------------------------------------------------------------------
 *
 * delegate.c
 *	  On Citus, a statement of one partition called on a node that does not
 *	  hold the partition's shards runs on the node that does, as one call
 *	  of durable.execute_in_partition(), which Citus delegates there.
 *
 * Run through Citus instead, such a statement is planned again here on
 * every call, written out as text, parsed and planned again on the other
 * node, with a round trip for each step of its split.  Delegated, it is one
 * round trip in the caller's transaction, and runs there in the partition's
 * shards with a plan kept as on one server (shard.c).  durable_enable_citus
 * distributes the function by its first argument, the partition, with
 * force_delegation: the node it runs on joins the caller's transaction, and
 * may not reach another node from within the call.  Where Citus does not
 * delegate the call (a node without metadata, a call from within Citus's
 * own connections), it runs on the calling node, through Citus, as it
 * would have without it.
 *
 * The values travel in their binary send format, which no setting of
 * either session (DateStyle, TimeZone, ...) changes.  plan.c keeps the
 * call's plan; core/delegated.c runs the statement on the other side.
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "access/transam.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

/* whether execute_in_partition is delegated: unknown until first asked */
static enum
{
	DELEGATION_UNKNOWN,
	DELEGATION_OFF,
	DELEGATION_ON
}			delegation = DELEGATION_UNKNOWN;

static const char *const delegated_function =
"SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_object"
" WHERE classid = 'pg_catalog.pg_proc'::pg_catalog.regclass"
" AND objid = pg_catalog.to_regprocedure("
"  'durable.execute_in_partition(pg_catalog.int4, pg_catalog.text,"
"  pg_catalog.bytea[], pg_catalog.int4)')"
" AND force_delegation)";

/*
 * DurableDelegationReady
 *		Whether durable_enable_citus has made execute_in_partition a
 *		function Citus delegates (an installation distributed before 0.8.0
 *		gets it when it is updated), read once per backend.
 */
bool
DurableDelegationReady(void)
{
	bool		isnull;

	if (delegation == DELEGATION_UNKNOWN)
	{
		DurableSavedResult caller;

		DurableSaveResult(&caller);
		if (SPI_execute(delegated_function, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read whether durable.execute_in_partition is delegated");
		delegation = SPI_processed == 1 &&
			DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1, &isnull)) ?
			DELEGATION_ON : DELEGATION_OFF;
		DurableRestoreResult(&caller);
	}
	return delegation == DELEGATION_ON;
}

/* DurableDelegationReady asks again, after the installation changed */
void
DurableDelegationForget(void)
{
	delegation = DELEGATION_UNKNOWN;
}

/*
 * DurableDelegable
 *		Whether a statement runs on its partition's node when called
 *		elsewhere: one marked so, whose parameters are all of built-in
 *		types, whose values the other node reads as this one sends them.
 */
bool
DurableDelegable(const DurableStatement *stmt)
{
	if (!stmt->delegated || stmt->ncolumns == 0)
		return false;
	for (int i = 0; i < stmt->nargs; i++)
		if (stmt->argtypes[i] >= FirstGenbkiObjectId)
			return false;
	return DurableDelegationReady();
}

/*
 * DurableDelegatedCall
 *		The text of the call that runs stmt on its partition's node, its
 *		result declared as the statement's columns: ($1 partition,
 *		$2 statement, $3 values, $4 expected SPI result).
 */
char *
DurableDelegatedCall(const DurableStatement *stmt)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "SELECT * FROM durable.execute_in_partition("
						   "$1, $2, $3, $4) AS r(");
	for (int c = 0; c < stmt->ncolumns; c++)
		appendStringInfo(&buf, "%s%s %s", c > 0 ? ", " : "",
						 quote_identifier(stmt->columns[c].name),
						 format_type_be_qualified(stmt->columns[c].type));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * DurableDelegatedValues
 *		The values of a statement's parameters as the bytea[] of the call:
 *		each in its type's binary send format, NULL for a null.
 */
Datum
DurableDelegatedValues(const DurableStatement *stmt, Datum *values,
					   const char *nulls)
{
	Datum		sent[DURABLE_MAX_ARGS];
	bool		isnull[DURABLE_MAX_ARGS];
	int			dims[1] = {stmt->nargs};
	int			lbs[1] = {1};

	for (int i = 0; i < stmt->nargs; i++)
	{
		Oid			send;
		bool		varlena;

		isnull[i] = nulls != NULL && nulls[i] == 'n';
		sent[i] = (Datum) 0;
		if (isnull[i])
			continue;
		getTypeBinaryOutputInfo(stmt->argtypes[i], &send, &varlena);
		sent[i] = PointerGetDatum(OidSendFunctionCall(send, values[i]));
	}
	return PointerGetDatum(construct_md_array(sent, isnull, 1, dims, lbs, BYTEAOID,
											  -1, false, TYPALIGN_INT));
}

/*
 * DurableReceiveValues
 *		The parameters of a statement from the bytea[] of a delegated call,
 *		into values and nulls (SPI's convention).  A value that its type
 *		does not read whole is an ERROR, as a malformed binary value is.
 */
void
DurableReceiveValues(const DurableStatement *stmt, ArrayType *array,
					 Datum *values, char *nulls)
{
	Datum	   *sent;
	bool	   *isnull;
	int			n;

	if (ARR_NDIM(array) > 1 || ARR_ELEMTYPE(array) != BYTEAOID)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("the values of statement \"%s\" must be a one-dimensional bytea array",
					   stmt->name));
	deconstruct_array(array, BYTEAOID, -1, false, TYPALIGN_INT, &sent, &isnull, &n);
	if (n != stmt->nargs)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("statement \"%s\" takes %d values, not %d",
					   stmt->name, stmt->nargs, n));
	for (int i = 0; i < n; i++)
	{
		bytea	   *bytes;
		StringInfoData buf;
		Oid			receive;
		Oid			ioparam;

		nulls[i] = isnull[i] ? 'n' : ' ';
		values[i] = (Datum) 0;
		if (isnull[i])
			continue;
		bytes = DatumGetByteaPP(sent[i]);
		initStringInfo(&buf);
		appendBinaryStringInfo(&buf, VARDATA_ANY(bytes), VARSIZE_ANY_EXHDR(bytes));
		getTypeBinaryInputInfo(stmt->argtypes[i], &receive, &ioparam);
		values[i] = OidReceiveFunctionCall(receive, &buf, ioparam, -1);
		if (buf.cursor != buf.len)
			ereport(ERROR,
					errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					errmsg("incorrect binary data format in value %d of statement \"%s\"",
						   i + 1, stmt->name));
	}
}

