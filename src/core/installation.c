/*-------------------------------------------------------------------------
 *
 * installation.c
 *	  The id of this installation, which the keys durable derives mix in.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "utils/lsyscache.h"

enum
{
	INSTALLATION_ID,
	INSTALLATION_NCOLUMNS
};
static const DurableColumn installation_columns[INSTALLATION_NCOLUMNS] = {
	[INSTALLATION_ID] = {"installation_id", TEXTOID},
};
static DurableStatement installation_id = {
	.name = "installation_id",
	.sql = "SELECT installation_id::text FROM durable.installation"
	" ORDER BY installed_at DESC, installation_id DESC LIMIT 1",
	DURABLE_COLUMNS(installation_columns),
};

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
	DurableResult res;
	Oid			schema = get_namespace_oid(DURABLE_SCHEMA, true);

	if (!OidIsValid(schema) ||
		!OidIsValid(get_relname_relid("installation", schema)))
		ereport(ERROR,
				errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				errmsg("durable's installed SQL is older than its library"),
				errdetail("Table \"%s.installation\" does not exist.",
						  DURABLE_SCHEMA),
				errhint("Run ALTER EXTENSION durable UPDATE."));
	res = DurableRun(&installation_id, NULL, NULL, SPI_OK_SELECT, 1);
	if (res.rows != 1)
		elog(ERROR, "durable.installation has no row");
	return DurableGetText(res, 0, INSTALLATION_ID);
}
