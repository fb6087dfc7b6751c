/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Every PG_VERSION_NUM difference durable cares about, and nowhere else.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_COMPAT_H
#define DURABLE_COMPAT_H

#if PG_VERSION_NUM < 150000
#error "durable requires PostgreSQL 15 or later"
#endif

/* PG 18 can carry the module's name and version in its magic block */
#if PG_VERSION_NUM >= 180000
#define DURABLE_MODULE_MAGIC PG_MODULE_MAGIC_EXT(.name = "durable", .version = DURABLE_VERSION)
#else
#define DURABLE_MODULE_MAGIC PG_MODULE_MAGIC
#endif

/*
 * A function that does not return: PG 18 replaced pg_attribute_noreturn(),
 * written after the declarator, with pg_noreturn, written before it (C11's
 * _Noreturn).  GCC and clang take the attribute in front as well.
 */
#if PG_VERSION_NUM >= 180000
#define DURABLE_NORETURN pg_noreturn
#else
#define DURABLE_NORETURN pg_attribute_noreturn()
#endif

/* PG 17 gives extensions named wait events; before, PG_WAIT_EXTENSION */
#if PG_VERSION_NUM >= 170000
#define DURABLE_HAVE_NAMED_WAIT_EVENTS 1
#endif

/* PG 16 renamed the dead-tuple count of a table's statistics */
#if PG_VERSION_NUM >= 160000
#define DURABLE_STAT_DEAD_TUPLES(entry) ((entry)->dead_tuples)
#else
#define DURABLE_STAT_DEAD_TUPLES(entry) ((entry)->n_dead_tuples)
#endif

/* PG 17 moved the backend's local transaction id into its virtual xid */
#if PG_VERSION_NUM >= 170000
#define DURABLE_MY_LXID (MyProc->vxid.lxid)
#else
#define DURABLE_MY_LXID (MyProc->lxid)
#endif

/* PG 17 added transaction_timeout, which the reconciler pins too */
#if PG_VERSION_NUM >= 170000
#define DURABLE_HAVE_TRANSACTION_TIMEOUT 1
#endif

/*
 * PG 16 keeps the settings in a hash table: get_guc_variables returns a
 * palloc'd array and its length; before, the array itself, whose length
 * GetNumConfigOptions gives.
 */
#if PG_VERSION_NUM >= 160000
#define DURABLE_GUC_VARIABLES(n) get_guc_variables(n)
#else
#define DURABLE_GUC_VARIABLES(n) (*(n) = GetNumConfigOptions(), get_guc_variables())
#endif

/* PG 18 asks whether a deferrable primary key will do (durable's are not) */
#if PG_VERSION_NUM >= 180000
#define DURABLE_PRIMARY_KEY_INDEX(rel) RelationGetPrimaryKeyIndex(rel, false)
#else
#define DURABLE_PRIMARY_KEY_INDEX(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/* PG 18 gives an index scan somewhere to count what it did, or NULL */
#if PG_VERSION_NUM >= 180000
#define DURABLE_INDEX_BEGINSCAN(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan(heap, index, snapshot, NULL, nkeys, norderbys)
#else
#define DURABLE_INDEX_BEGINSCAN(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan(heap, index, snapshot, nkeys, norderbys)
#endif

/*
 * The range table of an executor state that writes rte's relation: PG 16
 * keeps the permissions apart from the entry, and PG 18 says which entries
 * are not pruned.
 */
#if PG_VERSION_NUM >= 160000
#define DURABLE_INIT_RANGE_TABLE(estate, rte, perms, inserted, updated) \
	do { \
		List	   *perminfos_ = NIL; \
		RTEPermissionInfo *perminfo_ = addRTEPermissionInfo(&perminfos_, (rte)); \
		\
		perminfo_->requiredPerms = (perms); \
		perminfo_->insertedCols = (inserted); \
		perminfo_->updatedCols = (updated); \
		DURABLE_EXEC_INIT_RANGE_TABLE((estate), list_make1(rte), perminfos_); \
	} while (0)
#if PG_VERSION_NUM >= 180000
#define DURABLE_EXEC_INIT_RANGE_TABLE(estate, rtable, perminfos) \
	ExecInitRangeTable(estate, rtable, perminfos, bms_make_singleton(1))
#else
#define DURABLE_EXEC_INIT_RANGE_TABLE(estate, rtable, perminfos) \
	ExecInitRangeTable(estate, rtable, perminfos)
#endif
#else
#define DURABLE_INIT_RANGE_TABLE(estate, rte, perms, inserted, updated) \
	do { \
		(rte)->requiredPerms = (perms); \
		(rte)->insertedCols = (inserted); \
		(rte)->updatedCols = (updated); \
		ExecInitRangeTable((estate), list_make1(rte)); \
	} while (0)
#endif

/* PG 16 makes a partition's map from its root's row type when first asked */
#if PG_VERSION_NUM >= 160000
#define DURABLE_ROOT_TO_CHILD_MAP(rri, estate) ExecGetRootToChildMap(rri, estate)
#else
#define DURABLE_ROOT_TO_CHILD_MAP(rri, estate) ((rri)->ri_RootToPartitionMap)
#endif

#endif							/* DURABLE_COMPAT_H */
