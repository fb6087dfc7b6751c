/*-------------------------------------------------------------------------
 *
 * row.c
 *	  The tables whose rows the statements of a task's moves restate
 *	  column by column (row.h), as the plan cache checks them against the
 *	  catalog before the first such statement runs in a backend.
 *
 *-------------------------------------------------------------------------
 */
#include "core/core.h"

#include "core/row.h"

/* a column as the check knows it: its name and type */
#define CHECKED_COLUMN(name, type, ...) {#name, type},

/* a step's column of durable.live_steps: BOTH, not HISTORY */
#define CHECKED_LIVE_COLUMN(name, type, where) CHECKED_IN_LIVE_##where(name, type)
#define CHECKED_IN_LIVE_BOTH(name, type) {#name, type},
#define CHECKED_IN_LIVE_HISTORY(name, type)

static const DurableTableColumn task_columns[] = {
	DURABLE_TASK_ROW(CHECKED_COLUMN, CHECKED_COLUMN)
};

static const DurableTableColumn live_step_columns[] = {
	DURABLE_STEP_ROW(CHECKED_LIVE_COLUMN, CHECKED_LIVE_COLUMN)
};

static const DurableTableColumn step_history_columns[] = {
	DURABLE_STEP_ROW(CHECKED_COLUMN, CHECKED_COLUMN)
};

/* a table of durable's schema with its columns */
#define CHECKED_TABLE(table, columns_array) \
	{.schema = "durable", .name = (table), .columns = (columns_array), \
	 .ncolumns = lengthof(columns_array)}

DurableTable DurableLiveTasksTable = CHECKED_TABLE("live_tasks", task_columns);
DurableTable DurableTaskHistoryTable = CHECKED_TABLE("task_history", task_columns);
DurableTable DurableLiveStepsTable = CHECKED_TABLE("live_steps", live_step_columns);
DurableTable DurableStepHistoryTable = CHECKED_TABLE("step_history",
													 step_history_columns);
