/*-------------------------------------------------------------------------
 *
 * digest.c
 *	  SHA-256 through PostgreSQL's own cryptohash API.
 *
 * Retry jitter, request hashes and idempotency keys all hash with this one
 * routine, so that a replay anywhere computes the same bytes.
 *
 *-------------------------------------------------------------------------
 */
#include "pure/pure.h"

#include "common/cryptohash.h"
#include "lib/stringinfo.h"
#include "utils/fmgrprotos.h"
#include "utils/numeric.h"

/*
 * DurableSha256
 *		Hash len bytes of data into digest; any failure of the hash
 *		implementation is an internal error.
 */
void
DurableSha256(const void *data, size_t len,
			  uint8 digest[PG_SHA256_DIGEST_LENGTH])
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) data, len) < 0 ||
		pg_cryptohash_final(ctx, digest, PG_SHA256_DIGEST_LENGTH) < 0)
	{
		const char *reason = pg_cryptohash_error(ctx);

		pg_cryptohash_free(ctx);
		elog(ERROR, "could not compute SHA-256 digest: %s", reason);
	}
	pg_cryptohash_free(ctx);
}

/* SHA-256 of the text form of a jsonb value, as a bytea */
static bytea *
jsonb_text_hash(Jsonb *jb)
{
	StringInfoData text;
	bytea	   *result;

	initStringInfo(&text);
	(void) JsonbToCString(&text, &jb->root, VARSIZE(jb));

	result = (bytea *) palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	SET_VARSIZE(result, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	DurableSha256(text.data, text.len, (uint8 *) VARDATA(result));
	pfree(text.data);
	return result;
}

/*
 * jsonb_trim_numbers
 *		The same value with every number written without trailing zeros in
 *		its fraction (1.0 as 1, 2.50 as 2.5), as trim_scale() writes it.
 *		jsonb keeps a number's scale as given, but compares 1 and 1.0 as
 *		equal, and so does JSON: the two are one request.
 */
static Jsonb *
jsonb_trim_numbers(Jsonb *jb)
{
	JsonbIterator *it = JsonbIteratorInit(&jb->root);
	JsonbParseState *state = NULL;
	JsonbValue	v;
	JsonbValue *result = NULL;
	JsonbIteratorToken token;

	while ((token = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if ((token == WJB_VALUE || token == WJB_ELEM) && v.type == jbvNumeric)
			v.val.numeric = DatumGetNumeric(DirectFunctionCall1(numeric_trim_scale,
																NumericGetDatum(v.val.numeric)));
		/*
		 * Keys and scalars are pushed with their value; a container start
		 * with none, except the pseudo-array that wraps a top-level scalar,
		 * which must say so.
		 */
		result = pushJsonbValue(&state, token,
								token == WJB_KEY || token == WJB_VALUE ||
								token == WJB_ELEM ||
								(token == WJB_BEGIN_ARRAY && v.val.array.rawScalar) ?
								&v : NULL);
	}
	return JsonbValueToJsonb(result);
}

/*
 * DurableJsonbHash
 *		SHA-256 of the canonical text of a jsonb value, as a bytea.
 *
 * jsonb already stores objects with sorted, de-duplicated keys and prints
 * them with fixed spacing, so its text form is canonical but for numbers,
 * which keep the scale they were written with: they are trimmed first, so
 * that {"a": 1} and {"a": 1.0}, equal as jsonb, hash alike.
 */
bytea *
DurableJsonbHash(Jsonb *jb)
{
	return jsonb_text_hash(jsonb_trim_numbers(jb));
}

/*
 * DurableJsonbHashUntrimmed
 *		The hash durable 0.1.0 stored: of the text with numbers as given.  A
 *		key stored before the update is matched against it too, so that a
 *		replay of the same request is never taken for another one.
 */
bytea *
DurableJsonbHashUntrimmed(Jsonb *jb)
{
	return jsonb_text_hash(jb);
}
