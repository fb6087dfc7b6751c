--
-- The spend budgets (src/core/spend.c), with the settlements not yet
-- folded into their rows: what is reserved, what was spent in the current
-- period (all of it, without a period), and what remains.
--
CREATE OR REPLACE VIEW durable.budgets AS
SELECT b.budget_name AS name, b.amount, b.period, p.period_start,
       b.reserved + coalesce(s.reserved, 0) AS reserved,
       CASE WHEN b.period_start IS NOT DISTINCT FROM p.period_start THEN b.spent ELSE 0 END
           + coalesce(s.spent, 0) AS spent,
       b.amount - b.reserved - coalesce(s.reserved, 0)
           - CASE WHEN b.period_start IS NOT DISTINCT FROM p.period_start THEN b.spent ELSE 0 END
           - coalesce(s.spent, 0) AS remaining
FROM durable.spend_budgets b
CROSS JOIN LATERAL (SELECT durable.budget_period_start(b.period, now()) AS period_start) p
LEFT JOIN LATERAL (
    SELECT sum(x.reserved) AS reserved,
           sum(x.spent) FILTER (WHERE x.period_start IS NOT DISTINCT FROM p.period_start) AS spent
    FROM durable.spend_settlements x
    WHERE x.budget_name = b.budget_name) s ON true;
COMMENT ON VIEW durable.budgets IS 'per spend budget: its amount and period, the start of the current period, what its steps have reserved and not settled, what they spent in the period, and what remains';
REVOKE ALL ON durable.budgets FROM PUBLIC;
GRANT SELECT ON durable.budgets TO durable_operator;
