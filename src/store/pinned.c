/*-------------------------------------------------------------------------
 *
 * pinned.c
 *	  The settings durable's statements run under, whatever a session, a
 *	  role or a database sets: each pinned for the statement alone, as a
 *	  function's SET clause would pin it.
 *
 * The background workers pin theirs for good (process/settings.c).  A
 * client's backend runs durable's statements among the caller's own, so
 * a setting is changed only when it differs, and only around a statement.
 *
 * jit off: durable's statements are small and run once per call, and a
 * plan whose estimate passes jit_above_cost (the generic plan of a claim in
 * a queue with a concurrency limit, with its subplans) compiled its
 * expressions on every execution, 35 ms where running them took half of
 * one.
 *
 * enable_seqscan and enable_bitmapscan off, for a statement of one
 * partition: its rows are a few that an index finds (a task by its key, the
 * first ready tasks in claim order), and its plan is kept, made once from
 * the statistics of the moment.  On Citus a partition's shard is a small
 * table in flux, often empty when a plan is made, and a plan made then
 * read every row of the shard on every call after it grew, dead ones too:
 * a sequential scan reads them all, and a bitmap scan every index entry
 * that matches, before its first row, and marks no entry dead for the next
 * scan to skip (an index scan does).  A cycle on a worker spent a fifth of
 * its time there.
 *
 * On Citus, found by setting every citus.* setting a session may set
 * (tools/citus):
 *	- citus.function_opens_transaction_block on: off, a statement of one
 *	  shard that a call runs through Citus, or delegates to another node
 *	  (delegate.c), commits there on its own, before the call ends; a call
 *	  that failed afterwards left what it wrote there (an enqueue in a
 *	  statement that failed later left its task);
 *	- citus.enable_router_execution on: off, Citus plans no statement of
 *	  one shard that has parameters, and every claim failed;
 *	- citus.hide_citus_dependent_objects off: on, Citus adds to every read
 *	  of the catalogs a call of a function that Citus 13.2 does not install
 *	  (is_citus_depended_object), and every call that read where a
 *	  partition's shards are failed.
 *
 *-------------------------------------------------------------------------
 */
#include "store/store.h"

#include "jit/jit.h"
#include "optimizer/cost.h"
#include "utils/guc.h"

static const struct
{
	const char *name;
	const char *value;
}			citus_pinned[] =
{
	{"citus.function_opens_transaction_block", "on"},
	{"citus.enable_router_execution", "on"},
	{"citus.hide_citus_dependent_objects", "off"},
};

/* set name to value for the statement, opening the nest level first */
static void
pin(int *nest, const char *name, const char *value)
{
	if (*nest < 0)
		*nest = NewGUCNestLevel();
	(void) set_config_option(name, value, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

/*
 * DurablePinStatementSettings
 *		Pin the settings of durable's statements (above; the Citus ones
 *		when distributed, the scans when by_index) before one runs.
 *		Returns the nest level to give DurableUnpinStatementSettings once
 *		it has, or -1 when nothing was changed.  When the statement fails, the abort of the transaction or
 *		subtransaction restores them.
 */
int
DurablePinStatementSettings(bool distributed, bool by_index)
{
	int			nest = -1;

	if (jit_enabled)
		pin(&nest, "jit", "off");
	if (by_index && enable_seqscan)
		pin(&nest, "enable_seqscan", "off");
	if (by_index && enable_bitmapscan)
		pin(&nest, "enable_bitmapscan", "off");
	if (!distributed)
		return nest;
	for (int i = 0; i < (int) lengthof(citus_pinned); i++)
	{
		const char *now = GetConfigOption(citus_pinned[i].name, true, false);

		if (now != NULL && strcmp(now, citus_pinned[i].value) != 0)
			pin(&nest, citus_pinned[i].name, citus_pinned[i].value);
	}
	return nest;
}

/* give back what DurablePinStatementSettings changed */
void
DurableUnpinStatementSettings(int nest)
{
	if (nest >= 0)
		AtEOXact_GUC(true, nest);
}
