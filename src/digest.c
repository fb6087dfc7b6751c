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
#include "durable.h"

#include "common/cryptohash.h"
#include "lib/stringinfo.h"

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

/*
 * DurableJsonbHash
 *		SHA-256 of the canonical text of a jsonb value, as a bytea.
 *
 * jsonb already stores objects with sorted, de-duplicated keys and prints
 * them with fixed spacing, so its text form is canonical: neither key order
 * nor white space in the input changes the hash.
 */
bytea *
DurableJsonbHash(Jsonb *jb)
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
