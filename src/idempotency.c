/*-------------------------------------------------------------------------
 *
 * idempotency.c
 *	  Request hashes and idempotency keys.
 *
 * An idempotency key names a logical operation, never an attempt, and is
 * bound to the hash of the request it was first used with: the same key
 * with another request is a bug in the caller, reported as 55U03, never a
 * second effect.
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

/*
 * durable_request_hash(request jsonb) RETURNS bytea
 *
 * SHA-256 of the canonical text of the request.  Immutable; a NULL
 * request is 22004 (since 0.2.0: a NULL hash would compare as unknown, and
 * a caller that binds keys to it would bind them to nothing).
 */
PG_FUNCTION_INFO_V1(durable_request_hash);
Datum
durable_request_hash(PG_FUNCTION_ARGS)
{
	DurableRequireArg(fcinfo, 0, "request");
	PG_RETURN_BYTEA_P(DurableJsonbHash(PG_GETARG_JSONB_P(0)));
}

/*
 * DurableIdempotencyKey
 *		Hex SHA-256 over the parts, each written as "<length>:<bytes>" so that
 *		no two different lists of parts encode alike (('a','bc') differs from
 *		('ab','c')).
 */
char *
DurableIdempotencyKey(int nparts, text *const *parts)
{
	StringInfoData buf;
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char	   *hex = palloc(PG_SHA256_DIGEST_LENGTH * 2 + 1);

	initStringInfo(&buf);
	for (int i = 0; i < nparts; i++)
	{
		int			len = VARSIZE_ANY_EXHDR(parts[i]);

		appendStringInfo(&buf, "%d:", len);
		appendBinaryStringInfo(&buf, VARDATA_ANY(parts[i]), len);
	}
	DurableSha256(buf.data, buf.len, digest);
	pfree(buf.data);

	hex_encode((const char *) digest, PG_SHA256_DIGEST_LENGTH, hex);
	hex[PG_SHA256_DIGEST_LENGTH * 2] = '\0';
	return hex;
}

/*
 * DurableInstallationId
 *		The id of this installation of durable, as text: a random UUID made
 *		by CREATE EXTENSION (or by the update to 0.2.0).  The keys durable
 *		derives from task ids mix it in, so that a task id that a later
 *		installation hands out again never yields an earlier installation's
 *		key.  A restore runs CREATE EXTENSION before it copies the dumped
 *		row in, so the newest row wins: a restored copy derives keys of its
 *		own.  Read on every use, never cached: a DROP and CREATE EXTENSION
 *		in the life of a backend must not leave it with the old id.
 */
char *
DurableInstallationId(void)
{
	Oid			schema = get_namespace_oid(DURABLE_SCHEMA, true);

	if (!OidIsValid(schema) ||
		!OidIsValid(get_relname_relid("installation", schema)))
		ereport(ERROR,
				errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				errmsg("durable's installed SQL is older than its library"),
				errdetail("Table \"%s.installation\" does not exist.",
						  DURABLE_SCHEMA),
				errhint("Run ALTER EXTENSION durable UPDATE."));
	if (DurableExecute(STMT_INSTALLATION_ID, NULL, NULL, SPI_OK_SELECT, 1) != 1)
		elog(ERROR, "durable.installation has no row");
	return DurableResultText(0, 1);
}

/*
 * DurableKeyPartition
 *		The partition of a key made of one or two names (an inbox's consumer
 *		and message id, a request's scope and key): a hash of their
 *		unambiguous encoding, so that uniqueness within a partition is
 *		uniqueness everywhere.
 */
int32
DurableKeyPartition(const char *a, const char *b)
{
	StringInfoData buf;
	uint8		digest[PG_SHA256_DIGEST_LENGTH];

	initStringInfo(&buf);
	appendStringInfo(&buf, "%zu:%s%zu:%s", strlen(a), a, strlen(b), b);
	DurableSha256(buf.data, buf.len, digest);
	pfree(buf.data);
	return (int32) ((((uint32) digest[0] << 8) | digest[1]) %
					DURABLE_PARTITION_SPACE);
}

/* two request hashes (NULL for none) are the same */
bool
DurableHashesEqual(bytea *a, bytea *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

/*
 * DurableRequestMatches
 *		A stored request hash (NULL for none) is the hash of this request
 *		(NULL for none): its hash now, or, for a hash stored by 0.1.0, the
 *		hash of its untrimmed text.
 */
bool
DurableRequestMatches(bytea *stored, bytea *hash, Jsonb *request)
{
	if (DurableHashesEqual(stored, hash))
		return true;
	return stored != NULL && request != NULL &&
		DurableHashesEqual(stored, DurableJsonbHashUntrimmed(request));
}

/*
 * durable_idempotency_key(VARIADIC parts text[]) RETURNS text
 *
 * Strict and immutable.  A NULL part is 22004; no part at all, or a
 * multi-dimensional array, is 22023.
 */
PG_FUNCTION_INFO_V1(durable_idempotency_key);
Datum
durable_idempotency_key(PG_FUNCTION_ARGS)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("idempotency key parts must be a one-dimensional array"));

	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &nelems);
	if (nelems == 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("an idempotency key needs at least one part"));
	for (int i = 0; i < nelems; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					errmsg("idempotency key part %d is null", i + 1),
					errhint("Every part of the logical operation's name must be known when its key is derived."));
		elems[i] = PointerGetDatum(PG_DETOAST_DATUM_PACKED(elems[i]));
	}

	PG_RETURN_TEXT_P(cstring_to_text(DurableIdempotencyKey(nelems,
														   (text *const *) elems)));
}
