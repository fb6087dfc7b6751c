/*-------------------------------------------------------------------------
 *
 * params.c
 *	  Statements whose parameters are named: "$queue" in the text, bound
 *	  by the declaration's constants.
 *
 * A statement may declare its parameters as it declares its result
 * columns, by name and type in an array indexed by an enum of its module,
 * and name them in its text:
 *
 *		enum { QUEUE_GET_QUEUE, QUEUE_GET_NPARAMS };
 *		static const DurableParam queue_get_params[QUEUE_GET_NPARAMS] = {
 *			[QUEUE_GET_QUEUE] = {"queue", TEXTOID},
 *		};
 *		... .sql = "... WHERE queue_name = $queue",
 *			DURABLE_PARAMS(queue_get_params), ...
 *		args[QUEUE_GET_QUEUE] = CStringGetTextDatum(queue);
 *
 * so that the text, the declaration and the code that binds a value name
 * the same thing, and a value is never bound to the wrong position.  On
 * the statement's first use its texts are rewritten once, in
 * TopMemoryContext, with $n for each name (n counted from 1 in the
 * declaration's order), and its parameter types taken from the
 * declaration: everything after that (the plan cache, Citus's splits and
 * delegated calls, tools/statements) sees positional parameters.  A name
 * the declaration lacks, or a positional parameter among named ones, is an
 * ERROR naming the statement, as is a statement with parameters that does
 * not name them; a declared name the text never uses is caught with the
 * positional ones (DurableCheckParameters, when plan.c prepares it).  The steps
 * of a split read their input's columns by position after the named
 * parameters ("$*", or $n past the last of them).
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/memutils.h"

/*
 * DurableNextDollar
 *		The next "$" of a statement's text at or after scan->p that is
 *		outside quoted literals and identifiers, or NULL at its end; scan->p
 *		is then just past it, for the caller to move further over what it
 *		reads there.  The one walk over "$" that the statements' rewriting
 *		and checking share (here, and plan.c's).
 */
const char *
DurableNextDollar(DurableSqlScan *scan)
{
	for (; *scan->p; scan->p++)
	{
		if (scan->quote != '\0')
		{
			if (*scan->p == scan->quote)
				scan->quote = '\0';
		}
		else if (*scan->p == '\'' || *scan->p == '"')
			scan->quote = *scan->p;
		else if (*scan->p == '$')
			return scan->p++;
	}
	return NULL;
}

static bool
name_start(char c)
{
	return (c >= 'a' && c <= 'z') || c == '_';
}

static bool
name_char(char c)
{
	return name_start(c) || (c >= '0' && c <= '9');
}

/*
 * resolve_text
 *		sql with each $name of the declaration replaced by its $n, outside
 *		quoted literals and identifiers; a step of a split (step >= 0) may
 *		also read its input's columns by position, past the parameters.
 */
static char *
resolve_text(const DurableStatement *stmt, int step, const char *sql)
{
	StringInfoData buf;
	DurableSqlScan scan = {sql, '\0'};
	const char *copied = sql;
	const char *dollar;

	initStringInfo(&buf);
	while ((dollar = DurableNextDollar(&scan)) != NULL)
	{
		if (name_start(dollar[1]))
		{
			const char *name = dollar + 1;
			int			len = 0;
			int			found = -1;

			while (name_char(name[len]))
				len++;
			for (int i = 0; i < stmt->nargs && found < 0; i++)
				if (strlen(stmt->params[i].name) == (size_t) len &&
					strncmp(stmt->params[i].name, name, len) == 0)
					found = i;
			if (found < 0)
				elog(ERROR, "%sstatement \"%s\" uses parameter $%.*s, which it does not declare",
					 step >= 0 ? "a step of " : "", stmt->name, len, name);
			appendBinaryStringInfo(&buf, copied, dollar - copied);
			appendStringInfo(&buf, "$%d", found + 1);
			copied = scan.p = name + len;
		}
		else if (dollar[1] >= '0' && dollar[1] <= '9' && atoi(dollar + 1) <= stmt->nargs)
			elog(ERROR, "%sstatement \"%s\" names its parameters, but uses $%d",
				 step >= 0 ? "a step of " : "", stmt->name, atoi(dollar + 1));
	}
	appendStringInfoString(&buf, copied);
	return buf.data;
}

/*
 * DurableResolveParameters
 *		On the first use of a statement that names its parameters, its texts
 *		with positional parameters and its parameter types, once per backend.
 */
void
DurableResolveParameters(DurableStatement *stmt)
{
	char	   *sql;
	char	   *split[DURABLE_MAX_SPLIT_STEPS];

	if (stmt->params_resolved)
		return;
	if (stmt->params == NULL)
	{
		if (stmt->nargs > 0)
			elog(ERROR, "statement \"%s\" binds its parameters by position, not by name",
				 stmt->name);
		return;
	}
	if (stmt->nargs > DURABLE_MAX_ARGS)
		elog(ERROR, "statement \"%s\" declares %d parameters, more than %d",
			 stmt->name, stmt->nargs, DURABLE_MAX_ARGS);
	if ((stmt->by_partition || stmt->delegated) &&
		(stmt->nargs == 0 || stmt->params[0].type != INT4OID ||
		 strcmp(stmt->params[0].name, "partition") != 0))
		elog(ERROR, "statement \"%s\" of one partition must declare $partition, an int4, first",
			 stmt->name);
	/* every text first, so that an ERROR leaves the statement as declared */
	sql = stmt->sql ? resolve_text(stmt, -1, stmt->sql) : NULL;
	for (int k = 0; k < stmt->nsplit; k++)
		split[k] = resolve_text(stmt, k, stmt->split[k].sql);
	if (sql != NULL)
		stmt->sql = MemoryContextStrdup(TopMemoryContext, sql);
	for (int k = 0; k < stmt->nsplit; k++)
		stmt->split[k].sql = MemoryContextStrdup(TopMemoryContext, split[k]);
	for (int i = 0; i < stmt->nargs; i++)
		stmt->argtypes[i] = stmt->params[i].type;
	stmt->params_resolved = true;
}

/*
 * highest_parameter
 *		The highest $n a statement's text refers to, outside quoted literals
 *		and identifiers; with used[n - 1] set for each n it refers to.
 */
static int
highest_parameter(const char *sql, bool *used, int nused)
{
	int			highest = 0;
	DurableSqlScan scan = {sql, '\0'};
	const char *dollar;

	while ((dollar = DurableNextDollar(&scan)) != NULL)
	{
		int			n = 0;

		if (!isdigit((unsigned char) dollar[1]))
			continue;
		while (isdigit((unsigned char) *scan.p))
			n = n * 10 + (*scan.p++ - '0');
		if (n > highest)
			highest = n;
		if (n >= 1 && n <= nused)
			used[n - 1] = true;
	}
	return highest;
}

/*
 * DurableCheckParameters
 *		A statement must use every parameter it declares and no other: a
 *		parameter bound and never read is a value lost, and one read and
 *		never declared would not prepare.  A parameter of a statement with a
 *		split may be read by the statement or by its split; a step of the
 *		split may read the statement's parameters and its input's columns.
 */
void
DurableCheckParameters(const DurableStatement *stmt, int step, int nargs)
{
	bool		used[DURABLE_MAX_SPLIT_ARGS] = {0};
	int			highest;

	if (step >= 0)
	{
		highest = highest_parameter(stmt->split[step].sql,
									used, lengthof(used));
		if (highest > nargs)
			elog(ERROR, "step %d of statement \"%s\" uses parameter $%d, but has %d",
				 step, stmt->name, highest, nargs);
		return;
	}
	highest = highest_parameter(stmt->sql, used, lengthof(used));
	if (highest > nargs)
		elog(ERROR, "statement \"%s\" uses parameter $%d, but declares %d",
			 stmt->name, highest, nargs);
	for (int k = 0; k < stmt->nsplit; k++)
		(void) highest_parameter(stmt->split[k].sql, used, nargs);
	for (int i = 0; i < nargs; i++)
		if (!used[i])
			elog(ERROR, "statement \"%s\" declares parameter $%d but does not use it",
				 stmt->name, i + 1);
}
