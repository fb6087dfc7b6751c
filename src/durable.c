/*-------------------------------------------------------------------------
 *
 * durable.c
 *	  Module magic, GUCs and the registration of the reconciler.
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "miscadmin.h"
#include "utils/guc.h"

DURABLE_MODULE_MAGIC;

/* bits 47..40 of every task id this server makes */
int			durable_node_id = 0;

/* largest payload, result, error or metadata accepted, in kB */
int			durable_max_payload_size = 1024;

void		_PG_init(void);

void
_PG_init(void)
{
	if (IsBinaryUpgrade)
		return;

	DefineCustomIntVariable("durable.node_id",
							gettext_noop("Number of this node in task ids."),
							gettext_noop("Nodes that create tasks for the same tables, "
										 "as in a distributed deployment, need different "
										 "numbers, from 0 to 255."),
							&durable_node_id,
							0, 0, 255,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("durable.max_payload_size",
							gettext_noop("Largest payload, result, error or metadata durable accepts."),
							NULL,
							&durable_max_payload_size,
							1024, 1, MAX_KILOBYTES,
							PGC_SUSET, GUC_UNIT_KB,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("durable");
}
