CREATE TYPE durable.task_state AS ENUM
    ('created', 'ready', 'running', 'waiting', 'completed', 'failed', 'cancelled', 'needs_review');
COMMENT ON TYPE durable.task_state IS 'task states; completed, failed and cancelled are terminal';

CREATE TYPE durable.activity_class AS ENUM ('pure', 'idempotent', 'queryable', 'unsafe');
COMMENT ON TYPE durable.activity_class IS 'how an activity may be recovered: pure and idempotent ones are retry safe, queryable ones are looked up first, unsafe ones go to manual review';

CREATE TYPE durable.step_state AS ENUM
    ('planned', 'started', 'committed', 'failed', 'unknown', 'compensated');
COMMENT ON TYPE durable.step_state IS 'step states; see durable.step_transitions for the allowed moves';
