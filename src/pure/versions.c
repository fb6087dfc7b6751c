/*-------------------------------------------------------------------------
 *
 * versions.c
 *	  Versions as a contract (docs/design.md section 15): the versions a task is
 *	  pinned to, the versions a worker runs, and whether the one runs the
 *	  other.
 *
 * A task's versions are an object of names to one version each,
 * {"workflow": "2", "model": "m-1"}: what it started under, kept for its
 * life.  A worker says what it runs as names to a version or to a list of
 * them, {"workflow": ["3", "4"], "model": "m-1"}; the last version of a
 * list is the one it starts new work under.  A worker runs a task when it
 * runs the task's version of every name the task is pinned to; a name the
 * task is not pinned to yet is pinned by the first claim that says it.
 *
 *-------------------------------------------------------------------------
 */
#include "pure/pure.h"

#include "utils/jsonb.h"

/* a version is a name of code, not a document */
#define DURABLE_MAX_VERSION_LEN 255

/* 22023 unless a name (a key) or a version has an acceptable length */
static void
check_length(const JsonbValue *v, int limit, const char *what,
			 const char *of)
{
	if (v->val.string.len == 0 || v->val.string.len > limit)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("every %s in %s must have between 1 and %d bytes",
					   what, of, limit));
}

/* 22023 unless versions is an object with at least one name */
static void
check_object(Jsonb *versions, const char *of)
{
	if (!JB_ROOT_IS_OBJECT(versions) || JB_ROOT_COUNT(versions) == 0)
		ereport(ERROR,
				errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				errmsg("%s must be a JSON object of names and versions", of),
				errhint("For example '{\"workflow\": \"4\", \"model\": \"m-1\"}'."));
}

/*
 * DurableVersionsCheckPinned
 *		22023 unless versions (named of in messages) is what a task can be
 *		pinned to: an object of names to one version (a string) each.
 */
void
DurableVersionsCheckPinned(Jsonb *versions, const char *of)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken token;

	check_object(versions, of);
	it = JsonbIteratorInit(&versions->root);
	while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (token == WJB_KEY)
			check_length(&v, DURABLE_MAX_NAME_LEN, "name", of);
		else if (token == WJB_VALUE)
		{
			if (v.type != jbvString)
				ereport(ERROR,
						errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("every version in %s must be a string", of),
						errhint("A task runs under one version of each name."));
			check_length(&v, DURABLE_MAX_VERSION_LEN, "version", of);
		}
	}
}

/*
 * DurableVersionsRuns
 *		Check what a worker says it runs (22023 unless it is an object of
 *		names to a version or to a non-empty list of versions) and return the
 *		versions it pins an unpinned task to: the last of each list.
 */
Jsonb *
DurableVersionsRuns(Jsonb *runs)
{
	JsonbParseState *state = NULL;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbValue	last = {0};
	JsonbIteratorToken token;
	int			depth = 0;
	const char *of = "versions";

	check_object(runs, of);
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	it = JsonbIteratorInit(&runs->root);
	while ((token = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		switch (token)
		{
			case WJB_BEGIN_OBJECT:
			case WJB_BEGIN_ARRAY:
				if (++depth > 2 || (depth == 2 && token == WJB_BEGIN_OBJECT))
					ereport(ERROR,
							errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("every version in %s must be a string or a list of strings", of));
				last.type = jbvNull;
				break;
			case WJB_END_ARRAY:
				depth--;
				if (last.type != jbvString)
					ereport(ERROR,
							errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("a list of versions in %s must not be empty", of));
				pushJsonbValue(&state, WJB_VALUE, &last);
				break;
			case WJB_END_OBJECT:
				depth--;
				break;
			case WJB_KEY:
				check_length(&v, DURABLE_MAX_NAME_LEN, "name", of);
				pushJsonbValue(&state, WJB_KEY, &v);
				break;
			case WJB_VALUE:
			case WJB_ELEM:
				if (v.type != jbvString)
					ereport(ERROR,
							errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							errmsg("every version in %s must be a string or a list of strings", of));
				check_length(&v, DURABLE_MAX_VERSION_LEN, "version", of);
				if (token == WJB_VALUE)
					pushJsonbValue(&state, WJB_VALUE, &v);
				else
					last = v;
				break;
			default:
				break;
		}
	}
	return JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
}

/*
 * DurableVersionsRun
 *		Whether a worker that runs runs (as DurableVersionsRuns takes it)
 *		runs a task pinned to pinned: for every name of pinned, the worker
 *		names that version, alone or in its list.
 */
bool
DurableVersionsRun(Jsonb *pinned, Jsonb *runs)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbValue	key = {0};
	JsonbIteratorToken token;

	if (!JB_ROOT_IS_OBJECT(pinned) || !JB_ROOT_IS_OBJECT(runs))
		return false;
	it = JsonbIteratorInit(&pinned->root);
	while ((token = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		JsonbValue *offered;
		bool		found;

		if (token == WJB_KEY)
		{
			key = v;
			continue;
		}
		if (token != WJB_VALUE)
			continue;
		offered = getKeyJsonValueFromContainer(&runs->root,
											   key.val.string.val,
											   key.val.string.len, NULL);
		if (offered == NULL)
			return false;
		if (offered->type == jbvBinary)
			found = (JsonContainerIsArray(offered->val.binary.data) &&
					 findJsonbValueFromContainer(offered->val.binary.data,
												 JB_FARRAY, &v) != NULL);
		else
			found = offered->type == jbvString && v.type == jbvString &&
				offered->val.string.len == v.val.string.len &&
				memcmp(offered->val.string.val, v.val.string.val,
					   v.val.string.len) == 0;
		if (!found)
			return false;
	}
	return true;
}
