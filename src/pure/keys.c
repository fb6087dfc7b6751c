/*-------------------------------------------------------------------------
 *
 * keys.c
 *	  Request hashes and idempotency keys.
 *
 * An idempotency key names a logical operation, never an attempt, and is
 * bound to the hash of the request it was first used with: the same key
 * with another request is a bug in the caller, reported as 55U03, never a
 * second effect.
 *
 *-------------------------------------------------------------------------
 */
#include "pure/pure.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

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
