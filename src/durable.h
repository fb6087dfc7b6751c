/*-------------------------------------------------------------------------
 *
 * durable.h
 *	  What every layer of the durable extension shares: the layout of a
 *	  task id and the limits of its arguments.
 *
 * The code is in layers, each a folder whose files call only their own
 * layer and the ones below (tools/layers checks it): pure (decisions,
 * delays, digests, keys, cron: no SPI), store (the plan cache), core (tasks,
 * steps, queues, waits, the tick: SPI, never fcinfo), api (the SQL entry
 * points) and process (_PG_init, settings, the background workers).  Each
 * layer's header includes the one below.
 *
 * One clock: every time durable compares or stores is the transaction
 * start time (now(), GetCurrentTransactionStartTimestamp()), taken once per
 * call in C and bound as a parameter.  No worker clock decides anything,
 * and no volatile function runs inside an UPDATE.  Keep claim and commit
 * transactions short so that this clock stays close to the wall clock.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_H
#define DURABLE_H

#include "postgres.h"

#include "common/sha2.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/jsonb.h"

#include "compat.h"
#include "durable_errcodes.h"

/* schema that holds durable's tables, views and internal functions */
#define DURABLE_SCHEMA "durable"

/*
 * A task id carries its partition: bits 14..0 are the partition key, bits
 * 22..15 the node that made it (durable.node_id), the bits above that
 * node's counter.  So a fenced write routes to its row, and its shard, from
 * the task id alone; nodes never hand out the same id; and ids grow in the
 * order tasks were made.
 */
#define DURABLE_PARTITION_BITS 15
#define DURABLE_NODE_BITS 8
#define DURABLE_PARTITION_SPACE (1 << DURABLE_PARTITION_BITS)
#define DURABLE_PARTITION_MASK 32767	/* DURABLE_PARTITION_SPACE - 1 */
#define DURABLE_ID_SHIFT 23		/* DURABLE_PARTITION_BITS + DURABLE_NODE_BITS */
#define DURABLE_TASK_PARTITION(task_id) \
	((int32) ((task_id) & (DURABLE_PARTITION_SPACE - 1)))
#define DURABLE_TASK_ID_SUFFIX(partition, node) \
	(((int64) (node) << DURABLE_PARTITION_BITS) | (int64) (partition))
#define DURABLE_MAX_PARTITIONS 256
#define DURABLE_MAX_BATCH 10000
#define DURABLE_MAX_NAME_LEN (NAMEDATALEN - 1)

#endif							/* DURABLE_H */
