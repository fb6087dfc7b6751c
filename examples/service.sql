-- The stand-in external service of examples/durable_worker: a database of
-- its own that records every effect it performs.  Idempotent calls are
-- deduplicated by their key (the unique index), queryable calls can be
-- looked up by key, unsafe calls are neither.  Duplicate side effects are
-- keys with more than one effect.
CREATE TABLE effects (
    id   bigserial PRIMARY KEY,
    key  text NOT NULL,
    kind text NOT NULL,
    at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE UNIQUE INDEX effects_idempotent ON effects (key) WHERE kind = 'idempotent';
CREATE INDEX effects_key ON effects (key);
