-- the state machine of steps, for reading; the C code holds the same table
CREATE OR REPLACE VIEW durable.step_transitions (from_state, to_state) AS
VALUES ('planned'::durable.step_state, 'started'::durable.step_state),
       ('started', 'committed'), ('started', 'failed'), ('started', 'unknown'),
       ('started', 'planned'),
       ('unknown', 'committed'), ('unknown', 'planned'), ('unknown', 'failed'),
       ('committed', 'compensated');
COMMENT ON VIEW durable.step_transitions IS 'every allowed step transition; any other raises 55U04';
REVOKE ALL ON durable.step_transitions FROM PUBLIC;
GRANT SELECT ON durable.step_transitions TO durable_operator;
