/*-------------------------------------------------------------------------
 *
 * durable.c
 *	  Module magic, GUCs and the registration of the reconciler.
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

DURABLE_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	if (IsBinaryUpgrade)
		return;

	MarkGUCPrefixReserved("durable");
}
